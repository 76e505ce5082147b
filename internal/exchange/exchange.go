// Package exchange is one exchange with an origin, per upstream wire
// protocol: the request written to the origin and its response relayed to
// the client, on the stream an attempt holds (package forward's Attempt,
// package dispatch's acquisition). There is one HTTP/1.1 exchange (H1, on
// an upstream.Raw connection) and one HTTP/2 exchange (H2, on a stream of
// an upstream.Mux connection), and one classification of what fails them
// (failureOf). Every serving path calls them: the fast path, net/http's
// handler, and anything else that sends a request to an origin (a probe,
// a mirror), which only needs a Request and a Client.
//
// The serving paths differ only in how they hold a client's request and
// how they write its answer. The request comes as a Request (its head
// already rewritten for the origin: hop-by-hop fields out, X-Forwarded-*
// in; its body a reader), and the answer goes to a Client, one small
// interface: the response head, body bytes, flushes, the end (trailers) or
// an abort, and a watch on the client while the origin is awaited.
//
// Invariants:
//   - Exactly one function writes an HTTP/1.1 request head (writeHead) and
//     one opens an HTTP/2 stream for a request (openStream).
//   - Every response head relayed from an origin reaches the client
//     through writeHeadTo: the request's Editor (a route's response header
//     edits), when set, changes it first.
//   - Every exchange ends its I/O on the connection before it reports the
//     attempt's step (Attempt.Failed or Attempt.Settle), so a connection
//     goes back to its pool in a known state; an HTTP/1.1 connection is
//     kept only when the response ended cleanly at its framing.
//   - What reaches the client after the head is the origin's body, whole,
//     or a response the client can tell is truncated (Client.Abort): never
//     a silently short one.
//   - A request whose body's client left (ErrClientGone) fails the attempt
//     as ClientLeft, one whose body was refused (ErrBodyRefused) as
//     BadBody; any other failure to read the body fails it as Broken:
//     the request went out partly.
//   - With a State kept per client connection, an exchange allocates
//     nothing on the fast path's requests (bench/hotpath).
package exchange

import (
	"errors"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/h2"
	"github.com/corput/corput/internal/upstream"
)

// Client is the serving path's side of an exchange: where the response
// goes, and whether its client is still there.
type Client interface {
	// WriteHead writes the response head.
	WriteHead(h *Head) error
	// Write writes body bytes: the body's data, or under Framing Chunked
	// the origin's chunked body as it came, framing and trailers included.
	Write(p []byte) (int, error)
	// Flush sends what the client's side holds: the exchange calls it
	// before it waits for the origin, so a stream is never held back.
	Flush() error
	// End ends a body that arrived whole, with the origin's trailers (none
	// under Framing Chunked, whose bytes carried them); n is the body's
	// data bytes, without framing.
	End(trailer []hpack.HeaderField, n int64) error
	// Abort ends a body that broke after the head: the client must be able
	// to tell the response is truncated. n is the data bytes relayed.
	Abort(n int64)
	// RawChunks reports whether the client takes an HTTP/1.1 origin's
	// chunked body as it is (Framing Chunked): true on the fast path,
	// whose client speaks HTTP/1.1 on bytes the gateway writes itself.
	RawChunks() bool
	// Watch watches the client while the exchange waits for the origin: a
	// client that leaves closes up, which ends the wait. Unwatch ends the
	// watch and reports whether the client left.
	Watch(up io.Closer)
	Unwatch() (gone bool)
	// Upgrade completes a 101 Switching Protocols: it writes the head and
	// carries bytes both ways between the client and up (the origin's
	// connection, the client's from now on) until either side closes. It
	// returns the status the client got: 101, or the gateway's own answer
	// when the client's connection cannot be taken over.
	Upgrade(h *Head, up io.ReadWriteCloser) (status int)
}

// Framing is how a response's body reaches the client.
type Framing uint8

// The framings.
const (
	// None: no body (a HEAD request's response, 1xx, 204, 304).
	None Framing = iota
	// Length: Head.Length bytes.
	Length
	// Stream: a body of unknown length, or one with trailers: the client
	// frames it (HTTP/1.1 chunked) and End gives the trailers.
	Stream
	// Chunked: an HTTP/1.1 origin's chunked body, passed through as it is
	// (Client.RawChunks).
	Chunked
)

// Head is a response head as the client is to get it.
type Head struct {
	Status int
	// Fields are the end-to-end fields in the origin's order: no
	// hop-by-hop field, no Content-Length, no Transfer-Encoding.
	Fields []hpack.HeaderField
	// Lower says the names are HTTP/2's lower-case ones; an HTTP/1.1 client
	// gets them in net/http's canonical form.
	Lower bool
	// Length is the body's length, -1 when unknown. A HEAD request's
	// answer carries the length a GET would get, without the body.
	Length  int64
	Framing Framing
	HasDate bool // the origin sent a Date field
}

// State is what an exchange keeps between requests: its buffers. The fast
// path keeps one per client connection, so that its exchanges allocate
// nothing; the zero value is ready.
type State struct {
	head   Head
	fields []hpack.HeaderField // head.Fields' storage
	resp   h1.Head             // an HTTP/1.1 response head, parsed in place
	h2f    h2.Fields           // an HTTP/2 request's header block
	trf    h2.Fields           // an HTTP/2 request's trailer block
	timer  *time.Timer         // an HTTP/2 exchange's deadline, made on first use
	num    [24]byte
	edit   Editor // the request's (Request.Edit), for the head relayed
}

// writeHeadTo hands h to the client, edited first by the request's Editor.
func (x *State) writeHeadTo(c Client, h *Head) error {
	if x.edit != nil {
		x.edit.EditHead(h)
	}
	return c.WriteHead(h)
}

// Do makes one attempt's exchange on the stream a holds: H1 on an
// HTTP/1.1 connection, H2 on an HTTP/2 one. It returns the status relayed
// and the attempt's step.
func (x *State) Do(a *forward.Attempt, req *Request, c Client) (int, forward.Step) {
	switch conn := a.Conn().(type) {
	case upstream.Raw:
		return x.H1(a, conn, req, c)
	case upstream.Mux:
		return x.H2(a, conn, req, c)
	}
	return 0, a.Failed(forward.Refused) // every connection upstream dials is one of the two
}

// ErrClientGone is what a serving path's request body returns when its
// client's connection failed under it (closed, reset, timed out): the
// attempt fails as ClientLeft, and nothing is answered. Any other error
// reading the body (a malformed chunk, a body shorter than its length)
// fails the attempt as Broken: the request went out partly.
var ErrClientGone = errors.New("the client's connection failed while its request body was read")

// ErrBodyTooLarge is what a serving path's request body returns once it
// grew above the route's max_request_body_bytes: the attempt fails as
// BodyTooLarge (413 when no response head went out), the upstream request
// cut.
var ErrBodyTooLarge = errors.New("the request body is above max_request_body_bytes")

// ErrBodyTimeout is what a serving path's request body returns when its
// client sent nothing for downstream.body_read_timeout: the attempt fails
// as BodyTimeout (408 when no response head went out), the upstream
// request cut.
var ErrBodyTimeout = errors.New("the client sent no request body byte for downstream.body_read_timeout")

// ErrBodyRefused is what a serving path's request body returns when the
// request must be refused once it went out (its framing or its trailers):
// the attempt fails as BadBody, answered 400, and the origin, which sees
// a truncated request, is not blamed.
var ErrBodyRefused = errors.New("the request's body or trailers were refused")

// failureOf classifies what failed an exchange before any response, on
// either protocol; raw is the HTTP/1.1 connection (nil on HTTP/2), which
// knows whether the error is a stale idle connection's.
func failureOf(err error, raw upstream.Raw) forward.Failure {
	var se *h2.StreamError
	switch {
	case errors.Is(err, ErrClientGone):
		return forward.ClientLeft
	case errors.Is(err, ErrBodyTooLarge):
		return forward.BodyTooLarge
	case errors.Is(err, ErrBodyTimeout):
		return forward.BodyTimeout
	case errors.As(err, new(limitError)):
		var le limitError
		errors.As(err, &le)
		return timeoutFailure(forward.Limit(le))
	case errors.Is(err, ErrBodyRefused):
		return forward.BadBody
	case errors.Is(err, upstream.ErrHeadTooLarge), errors.Is(err, h2.ErrHeadTooLarge):
		return forward.HeadTooLarge
	case timedOut(err), errors.Is(err, h2.ErrDone):
		return forward.Timeout
	case errors.Is(err, upstream.ErrConnUnusable), errors.Is(err, upstream.ErrConnBusy), h2.IsRefused(err):
		return forward.Refused
	case raw != nil && raw.Stale(err):
		return forward.Stale
	case errors.As(err, &se) && se.Code == h2.CodeProtocol:
		return forward.Protocol
	}
	return forward.Broken
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// loadField is forward.LoadHeader as HTTP/2 spells it.
const loadField = "endpoint-load-metrics"
