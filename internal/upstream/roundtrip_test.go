package upstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/internal/h2"
)

// roundTrip sends req on c and returns the response once its head
// arrived, for the tests of the connections themselves (the gateway's
// exchanges are package exchange's): on a Raw, Request.Write and
// ReadResponse between Begin and End (End when the body is read to EOF or
// closed); on a Mux, a stream opened from req's fields, its body sent by a
// goroutine while the response streams back.
func roundTrip(c Conn, req *http.Request) (*http.Response, error) {
	switch c := c.(type) {
	case Raw:
		return rawRoundTrip(c, req)
	case Mux:
		return muxRoundTrip(c, req)
	}
	return nil, fmt.Errorf("connection %T is neither Raw nor Mux", c)
}

func rawRoundTrip(c Raw, req *http.Request) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	_, bw, err := c.Begin(time.Time{}, hasBody)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", c.Addr(), err)
	}
	if err := req.Write(bw); err != nil {
		c.End(false)
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		c.End(false)
		return nil, err
	}
	resp, err := c.ReadResponse(req.Method)
	if err != nil {
		c.End(false)
		return nil, fmt.Errorf("upstream %s: %w", c.Addr(), err)
	}
	resp.TLS = c.(*h1Conn).tlsState
	if resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = c.Upgrade()
		return resp, nil
	}
	keep := !resp.Close && !req.Close && !strings.EqualFold(req.Header.Get("Connection"), "close")
	resp.Body = &rawBody{ReadCloser: resp.Body, c: c, keep: keep}
	return resp, nil
}

// rawBody ends the Raw exchange at the body's EOF (reusable) or when it is
// closed before (not).
type rawBody struct {
	io.ReadCloser
	c     Raw
	keep  bool
	ended bool
}

func (b *rawBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.ended {
		b.ended = true
		b.c.End(err == io.EOF && b.keep)
	}
	return n, err
}

func (b *rawBody) Close() error {
	if !b.ended {
		b.ended = true
		b.c.End(false)
	}
	return b.ReadCloser.Close()
}

func muxRoundTrip(c Mux, req *http.Request) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	var f h2.Fields
	scheme := req.URL.Scheme
	if scheme == "" {
		scheme = "https"
	}
	f.Pseudo(req.Method, scheme, req.URL.Host, req.URL.RequestURI())
	for k, vv := range req.Header {
		for _, v := range vv {
			f.Add(k, v)
		}
	}
	for k := range req.Trailer {
		f.Add("trailer", k)
	}
	s, err := c.H2().Open(&f, !hasBody)
	if err != nil {
		if errors.Is(err, h2.ErrUnusable) {
			err = ErrConnUnusable
		}
		return nil, fmt.Errorf("upstream %s: %w", c.Addr(), err)
	}
	if hasBody {
		s.Hold()
		go func() {
			defer s.Unhold()
			buf := make([]byte, 4<<10)
			for {
				n, rerr := req.Body.Read(buf)
				if n > 0 {
					if _, err := s.Write(buf[:n], h2.Wait{}); err != nil {
						return
					}
				}
				if rerr != nil {
					break
				}
			}
			var tf *h2.Fields
			if len(req.Trailer) > 0 {
				tf = new(h2.Fields)
				for k, vv := range req.Trailer {
					for _, v := range vv {
						tf.Add(k, v)
					}
				}
			}
			s.CloseWrite(tf)
		}()
	}
	st, err := s.Head(h2.Wait{})
	if err != nil {
		s.Cancel(err)
		s.Unhold()
		return nil, fmt.Errorf("upstream %s: %w", c.Addr(), err)
	}
	resp := &http.Response{StatusCode: st, Proto: "HTTP/2.0", ProtoMajor: 2, Header: http.Header{}, ContentLength: -1, Trailer: http.Header{}, TLS: c.H2().TLS()}
	for _, hf := range s.Header() {
		resp.Header.Add(hf.Name, hf.Value)
	}
	if n, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err == nil {
		resp.ContentLength = n
	}
	resp.Body = &muxBody{s: s, resp: resp}
	return resp, nil
}

// muxBody reads a stream's body; its trailers fill resp.Trailer at EOF.
type muxBody struct {
	s      *h2.Stream
	resp   *http.Response
	closed bool
}

func (b *muxBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.s.Read(p, h2.Wait{})
	if err == io.EOF {
		for _, hf := range b.s.Trailer() {
			b.resp.Trailer.Add(hf.Name, hf.Value)
		}
	}
	return n, err
}

func (b *muxBody) Close() error {
	if !b.closed {
		b.closed = true
		b.s.Unhold()
	}
	return nil
}
