package exchange

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/h2"
	"github.com/corput/corput/internal/tracing"
)

// Request is a request as an exchange sends it to an origin: its head
// rewritten for the origin by the serving path, and its body. Its strings
// may be views of a client connection's buffer: they are read only during
// the exchange.
type Request struct {
	Method, Target, Host string
	// Scheme is HTTP/2's :scheme: "https" when the client or the origin
	// speaks TLS, else "http".
	Scheme string
	// Fields are the end-to-end fields to send, in order: the client's,
	// without hop-by-hop fields (RFC 9110 §7.6.1), and the gateway's own
	// (X-Forwarded-*). Content-Length, Transfer-Encoding and the trace
	// context are the exchange's to write.
	Fields []hpack.HeaderField
	// TE says "TE: trailers" goes along (the one TE value a proxy
	// forwards; gRPC needs it end to end).
	TE bool
	// Length is the body's length; -1 when unknown (chunked on HTTP/1.1).
	Length int64
	// Body is the request body, nil for none: Length bytes, or until
	// io.EOF when Length is -1. Its read errors are the client's.
	Body io.Reader
	// Trailer is sent after a body of unknown length, nil for none.
	Trailer http.Header
	// Duplex says the body may stream while the response streams back (a
	// client that waits for the response before it sends more, gRPC's
	// bidirectional streams): it is then sent by a goroutine of its own.
	// Otherwise it is sent whole before the response is read.
	Duplex bool
	// Upgrade is the protocol the request asks to switch to (its
	// Connection and Upgrade fields are in Fields), "" for none.
	Upgrade string
	// Trace, when tracing, gives each attempt its trace context fields.
	Trace *tracing.Request
	// Deadline bounds the whole exchange (timeouts.request, or the
	// request's grpc-timeout: DeadlineLimit says which); zero for none.
	Deadline      time.Time
	DeadlineLimit forward.Limit
	// Start is when the attempt began (set per attempt, with PerTry).
	Start time.Time
	// PerTry bounds the attempt up to its response head
	// (retry.per_try_timeout from Start); zero for none.
	PerTry time.Time
	// HeadTimeout bounds the wait for the response head from the request's
	// last byte sent (timeouts.response_header); 0 for none.
	HeadTimeout time.Duration
	// IdleTimeout ends an exchange on which no byte moved either way for
	// this long after the head (timeouts.stream_idle); 0 for none.
	IdleTimeout time.Duration
	// sent is when the request body's last byte went out (UnixNano), 0
	// while none did (then Start): response_header counts from it. A
	// duplex body's sender writes it.
	sent int64 // read and written with sync/atomic
	// MaxHead bounds the response head (pool.max_response_header_bytes).
	MaxHead int
	// Edit, when set, edits the response head before the client's
	// WriteHead: a route's response header edits (package edit).
	Edit Editor
}

// Editor changes a response head on its way to the client. A pointer
// implements it, so that setting it allocates nothing.
type Editor interface {
	EditHead(h *Head)
}

// hasBody reports whether the request has a body to send.
func (r *Request) hasBody() bool { return r.Body != nil && r.Length != 0 }

// wantsLength reports whether a request without a body still says
// "Content-Length: 0", as net/http's client does: many origins want a
// length on POST, PUT and PATCH.
func wantsLength(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return true
	}
	return false
}

// writeHead writes r's head for HTTP/1.1 to w: the request line, Host,
// the fields, TE, the trace context of the attempt, and the body's
// framing. It is the one writer of an HTTP/1.1 request head to an origin.
func (x *State) writeHead(w *bufio.Writer, r *Request) {
	w.WriteString(r.Method)
	w.WriteByte(' ')
	w.WriteString(r.Target)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(r.Host)
	w.WriteString("\r\n")
	for i := range r.Fields {
		writeLine(w, r.Fields[i].Name, r.Fields[i].Value)
	}
	if r.TE {
		w.WriteString("Te: trailers\r\n")
	}
	r.Trace.Fields(func(name string, value []byte) {
		w.WriteString(name)
		w.WriteString(": ")
		w.Write(value)
		w.WriteString("\r\n")
	})
	switch {
	case r.hasBody() && r.Length < 0:
		w.WriteString("Transfer-Encoding: chunked\r\n")
		writeTrailerNames(w, r.Trailer)
	case r.hasBody() || wantsLength(r.Method):
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(x.num[:0], max(r.Length, 0), 10))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
}

func writeLine(w *bufio.Writer, name, value string) {
	w.WriteString(name)
	w.WriteString(": ")
	w.WriteString(value)
	w.WriteString("\r\n")
}

// writeTrailerNames announces the trailers a chunked body ends with.
func writeTrailerNames(w *bufio.Writer, t http.Header) {
	if len(t) == 0 {
		return
	}
	w.WriteString("Trailer: ")
	first := true
	for k := range t {
		if !first {
			w.WriteString(", ")
		}
		first = false
		w.WriteString(k)
	}
	w.WriteString("\r\n")
}

// openStream opens an HTTP/2 stream for r on c, its header block encoded as
// writeHead writes HTTP/1.1's: the same fields, TE, trace context and
// Content-Length. It is the one place a stream is opened for a request. It
// fails only when nothing was sent.
func (x *State) openStream(c *h2.Conn, r *Request) (*h2.Stream, error) {
	f := &x.h2f
	f.Reset()
	f.Pseudo(r.Method, r.Scheme, r.Host, r.Target)
	for i := range r.Fields {
		f.Add(r.Fields[i].Name, r.Fields[i].Value)
	}
	if r.TE {
		f.Add("te", "trailers")
	}
	r.Trace.Fields(func(name string, value []byte) { f.Add(name, h1.View(value)) })
	if r.hasBody() && len(r.Trailer) > 0 {
		for k := range r.Trailer {
			f.Add("trailer", k)
		}
	}
	if r.Length > 0 || !r.hasBody() && wantsLength(r.Method) {
		f.Add("content-length", h1.View(strconv.AppendInt(x.num[:0], max(r.Length, 0), 10)))
	}
	return c.Open(f, !r.hasBody())
}

// trailerFields encodes a request's trailers for HTTP/2, nil for none.
func (x *State) trailerFields(t http.Header) *h2.Fields {
	if len(t) == 0 {
		return nil
	}
	f := &x.trf
	f.Reset()
	for k, vv := range t {
		for _, v := range vv {
			f.Add(k, v)
		}
	}
	return f
}
