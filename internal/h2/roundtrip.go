package h2

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// RoundTrip sends req on a new stream and returns the response once its
// head arrived, for net/http's side of the gateway. The request body is
// sent by a goroutine of its own while the response streams back (gRPC's
// bidirectional streams work through it); req.Trailer is sent after it.
// The response body must be read to EOF or closed; resp.Trailer is filled
// when Read returns io.EOF. req.Context() cancels the stream.
func (c *Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	f := getFields()
	requestFields(f, req, hasBody)
	s, err := c.Open(f, !hasBody)
	putFields(f)
	if err != nil {
		if hasBody {
			req.Body.Close()
		}
		return nil, err
	}
	stop := cancelOnDone(ctx, s)
	if hasBody {
		s.holds.Add(1)
		go sendBody(s, req, Wait{Done: ctx.Done()})
	}
	st, err := s.Head(Wait{})
	if err != nil {
		stop()
		s.Cancel(err)
		s.unhold()
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		return nil, err
	}
	resp := &http.Response{
		Status:     strconv.Itoa(st) + " " + http.StatusText(st),
		StatusCode: st,
		Proto:      "HTTP/2.0", ProtoMajor: 2,
		Header:        make(http.Header, len(s.header)),
		ContentLength: -1,
		Request:       req,
		TLS:           c.tls,
	}
	for _, hf := range s.header {
		k := http.CanonicalHeaderKey(hf.Name)
		resp.Header[k] = append(resp.Header[k], hf.Value)
	}
	if vv := resp.Header["Content-Length"]; len(vv) == 1 {
		if n, err := strconv.ParseInt(vv[0], 10, 64); err == nil && n >= 0 {
			resp.ContentLength = n
		}
	}
	for _, v := range resp.Header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" {
				if resp.Trailer == nil {
					resp.Trailer = make(http.Header)
				}
				resp.Trailer[k] = nil
			}
		}
	}
	delete(resp.Header, "Trailer")
	c.mu.Lock()
	ended := s.remoteDone && len(s.buf) == s.r
	c.mu.Unlock()
	if ended && len(s.Trailer()) == 0 {
		if resp.ContentLength < 0 && req.Method != http.MethodHead {
			resp.ContentLength = 0
		}
		stop()
		if !hasBody {
			s.unhold()
			resp.Body = http.NoBody
			return resp, nil
		}
	}
	resp.Body = &body{s: s, resp: resp, stop: stop, ctx: ctx}
	return resp, nil
}

// cancelOnDone cancels s when ctx ends, until the function it returns is
// called. The cancellation holds the stream, so it never runs on one
// recycled.
func cancelOnDone(ctx context.Context, s *Stream) func() {
	s.holds.Add(1)
	stop := context.AfterFunc(ctx, func() {
		s.Cancel(ctx.Err())
		s.unhold()
	})
	return func() {
		if stop() {
			s.unhold() // it will never run: its hold is dropped here
		}
	}
}

// requestFields encodes req's head as net/http's Transport would.
func requestFields(f *Fields, req *http.Request, hasBody bool) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	path := req.URL.RequestURI()
	if req.Method == http.MethodConnect {
		path = ""
	}
	scheme := req.URL.Scheme
	if scheme == "" {
		scheme = "https"
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	f.Pseudo(method, scheme, host, path)
	for k, vv := range req.Header {
		if k == "Content-Length" || k == "Trailer" {
			continue
		}
		for _, v := range vv {
			if v == "" && k == "User-Agent" {
				continue // present but empty: send none, as net/http's Transport does
			}
			f.Add(k, v)
		}
	}
	if len(req.Trailer) > 0 {
		keys := make([]string, 0, len(req.Trailer))
		for k := range req.Trailer {
			keys = append(keys, k)
		}
		f.Add("trailer", strings.Join(keys, ","))
	}
	switch {
	case req.ContentLength > 0:
		f.Add("content-length", strconv.FormatInt(req.ContentLength, 10))
	case !hasBody && (method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch):
		f.Add("content-length", "0")
	}
}

// sendBody copies req's body to the stream and ends it, with the
// request's trailers when it has any. A failure resets the stream.
func sendBody(s *Stream, req *http.Request, w Wait) {
	defer req.Body.Close()
	bp := bodyBufs.Get().(*[]byte)
	defer bodyBufs.Put(bp)
	for {
		n, rerr := req.Body.Read(*bp)
		if n > 0 {
			if _, err := s.Write((*bp)[:n], w); err != nil {
				if !errors.Is(err, ErrBodyNotWanted) {
					s.Cancel(err)
				}
				s.unhold()
				return
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			s.Cancel(rerr)
			s.unhold()
			return
		}
	}
	var tf *Fields
	if len(req.Trailer) > 0 {
		tf = getFields()
		defer putFields(tf)
		for k, vv := range req.Trailer {
			for _, v := range vv {
				tf.Add(k, v)
			}
		}
	}
	if err := s.CloseWrite(tf); err != nil {
		s.Cancel(err)
	}
	s.unhold()
}

var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

var fieldPool = sync.Pool{New: func() any { return new(Fields) }}

func getFields() *Fields { return fieldPool.Get().(*Fields) }

func putFields(f *Fields) {
	f.Reset()
	fieldPool.Put(f)
}

// body is a RoundTrip response's body.
type body struct {
	s      *Stream
	resp   *http.Response
	stop   func()
	ctx    context.Context
	closed bool
	err    error
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.s.Read(p, Wait{Done: b.ctx.Done()})
	switch {
	case err == io.EOF:
		for _, hf := range b.s.Trailer() {
			if b.resp.Trailer == nil {
				b.resp.Trailer = make(http.Header)
			}
			k := http.CanonicalHeaderKey(hf.Name)
			b.resp.Trailer[k] = append(b.resp.Trailer[k], hf.Value)
		}
		b.err = io.EOF
	case errors.Is(err, ErrDone):
		err = b.ctx.Err()
		b.err = err
	case err != nil:
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
		b.err = err
	}
	return n, err
}

// Close ends the stream; one not ended both ways is reset. The stream is
// recycled once the request body's goroutine is done with it too.
func (b *body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.err == nil {
		b.err = errors.New("http2: response body closed")
	}
	b.stop()
	b.s.Cancel(ErrCanceled) // a no-op once both ways ended
	b.s.unhold()
	return nil
}
