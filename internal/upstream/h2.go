package upstream

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/corput/corput/internal/h2"
)

// h2Conn is an HTTP/2 client connection on corput's own client (package
// h2).
type h2Conn struct {
	addr string
	c    *h2.Conn
}

// Mux is an HTTP/2 connection's stream-level face, for the gateway's fast
// path: it opens streams with the request's fields straight from its
// parsed head (package h2). Only *h2Conn implements it.
type Mux interface {
	Conn
	// H2 is the connection.
	H2() *h2.Conn
	// Addr is the endpoint address.
	Addr() string
}

var _ Mux = (*h2Conn)(nil)

// newH2Conn starts HTTP/2 on nc and waits, within ctx, until the peer's
// SETTINGS arrived, so Streams is the peer's value from the first use.
func newH2Conn(ctx context.Context, o h2.Options, addr string, nc net.Conn) (*h2Conn, error) {
	c, err := h2.Handshake(ctx, nc, o)
	if err != nil {
		return nil, err
	}
	return &h2Conn{addr: addr, c: c}, nil
}

func (c *h2Conn) Protocol() string { return ProtoH2 }
func (c *h2Conn) H2() *h2.Conn     { return c.c }
func (c *h2Conn) Addr() string     { return c.addr }

// Streams is the peer's SETTINGS_MAX_CONCURRENT_STREAMS as last received.
func (c *h2Conn) Streams() int { return c.c.Streams() }

// Usable is false once the connection was closed, its socket failed or
// the peer sent GOAWAY.
func (c *h2Conn) Usable() bool { return c.c.Usable() }

// Ping sends an HTTP/2 PING and waits up to timeout for the answer on a
// goroutine of its own; a lost PING closes the connection, so it is
// unusable from then on.
func (c *h2Conn) Ping(timeout time.Duration, done func(error)) {
	c.c.Ping(timeout, func(err error) {
		if err != nil {
			c.c.Close()
			err = fmt.Errorf("upstream %s: h2 ping (timeout %v): %w", c.addr, timeout, err)
		}
		done(err)
	})
}

// Close closes the connection at once; in-flight streams fail.
func (c *h2Conn) Close() error { return c.c.Close() }
