package upstream

import (
	"errors"

	"github.com/corput/corput/internal/h2"
	"github.com/corput/corput/internal/pool"
)

// Conn is an upstream connection: the HTTP/1.1 one is a Raw, the HTTP/2
// one a Mux, and package exchange makes a request's exchange on either.
type Conn interface {
	pool.Conn
}

// Protocol names.
const (
	ProtoH1 = "h1"
	ProtoH2 = "h2"
)

var (
	// ErrConnUnusable is returned by RoundTrip on a connection that was
	// already closed, broken or told to go away. Nothing was sent, so the
	// request may be retried on another connection (IsRefusedStream).
	ErrConnUnusable = errors.New("connection not usable (closed, broken or GOAWAY); nothing was sent, retry on another connection")
	// ErrConnBusy is returned by RoundTrip on an HTTP/1.1 connection that
	// still carries a request: the caller released its lease before the
	// previous response body was done. Nothing was sent.
	ErrConnBusy = errors.New("HTTP/1.1 connection still busy with the previous response; close its body before releasing the lease")
	// ErrHeadTooLarge fails an exchange whose response head is above
	// Options.MaxResponseHeaderBytes; an HTTP/1.1 connection is not
	// reused after it.
	ErrHeadTooLarge = errors.New("response head larger than pool.max_response_header_bytes")
)

// IsConnectFailure reports whether err is a failure to open the
// connection (a *DialError): nothing reached the origin, so the request may
// go to another endpoint (retry.on: connect-failure).
func IsConnectFailure(err error) bool {
	var de *DialError
	return errors.As(err, &de)
}

// IsRefusedStream reports whether the origin is known not to have
// processed the request: an HTTP/2 RST_STREAM REFUSED_STREAM, a stream
// above the last one a GOAWAY accepted, or a connection found unusable
// before anything was written (retry.on: refused-stream).
func IsRefusedStream(err error) bool {
	return errors.Is(err, ErrConnUnusable) || errors.Is(err, ErrConnBusy) || h2.IsRefused(err)
}
