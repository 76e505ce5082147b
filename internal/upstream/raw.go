package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"
)

// Raw is an HTTP/1.1 connection's byte-level face, for the gateway's fast
// path: the caller writes the request head and body to W and reads the
// response from R itself, between Begin and End. Only *h1Conn implements
// it; an HTTP/2 connection goes through RoundTrip.
type Raw interface {
	Conn
	// Begin takes the connection for one exchange. A non-zero deadline
	// bounds every read until End (up to DeadlineSlack later), and every
	// write too when body says the request has a body (a head alone fits
	// the socket's buffer). It fails with ErrConnUnusable or ErrConnBusy;
	// nothing was sent then.
	Begin(deadline time.Time, body bool) (r *bufio.Reader, w *bufio.Writer, err error)
	// ReadBy moves the read deadline of the exchange in progress to t
	// (zero: none): the exchange's limits after a wait they ended, or once
	// the response head came (timeouts.stream_idle). Read side's owner
	// only.
	ReadBy(t time.Time) error
	// WriteBy bounds the writes of the exchange in progress by t: a
	// request body's, sent by the exchange's owner.
	WriteBy(t time.Time) error
	// End ends the exchange. reusable says the response ended cleanly at
	// its framing and neither side asked to close; otherwise the
	// connection is closed. A reused connection is probed when it is next
	// handed out (Usable), not here — unless a replayable request takes it
	// within TrustWindow (Trusted), and then Stale tells a dead one.
	End(reusable bool)
	// ReadResponse reads a response the fast path cannot parse itself
	// with http.ReadResponse (skipping 1xx interim responses), for a
	// request with the given method.
	ReadResponse(method string) (*http.Response, error)
	// Upgrade hands the connection over after a 101 Switching Protocols
	// read by ReadResponse: it reads what the origin sends (buffered bytes
	// first) and writes straight to the socket. The connection never
	// returns to the pool; closing what Upgrade returns closes it.
	Upgrade() io.ReadWriteCloser
	// Addr is the endpoint address.
	Addr() string
	// Stale reports whether err, which failed the exchange, is what the
	// probe would have found had the connection not been handed out
	// unprobed (pool.AcquireTrusting): the origin had closed it while it
	// sat idle, so writing the request failed, or the read ended (EOF or
	// a reset) before a single byte came back. The caller sends the
	// request again on another connection.
	Stale(err error) bool
}

func (c *h1Conn) Addr() string { return c.addr }

func (c *h1Conn) Upgrade() io.ReadWriteCloser {
	c.state.Store(h1Broken)
	// The tunnel reads and writes from two goroutines, for as long as it
	// lasts: no write held back for a read, no deadline of the exchange.
	c.sock.holdWrites(false)
	c.rdl, c.wdl = time.Time{}, false
	_ = c.sock.SetReadDeadline(time.Time{})
	_ = c.sock.SetWriteDeadline(time.Time{})
	var w io.Writer = c.sock
	if c.tls != nil {
		w = c.tls
	}
	return &upgradedBody{r: c.br, w: w, close: c.closeSocket}
}

func (c *h1Conn) Begin(deadline time.Time, body bool) (*bufio.Reader, *bufio.Writer, error) {
	if !c.state.CompareAndSwap(h1Idle, h1Busy) {
		if c.state.Load() == h1Broken {
			return nil, nil, ErrConnUnusable
		}
		return nil, nil, ErrConnBusy
	}
	c.justChecked.Store(false)
	c.exUnprobed, c.exGot = c.unprobed.Swap(false), c.sock.got
	// The read deadline of the last exchange is still set (End leaves it:
	// one timer update per request instead of four); move it unless it
	// serves (deadlineKept: under load, once per DeadlineSlack).
	if !deadlineKept(c.rdl, deadline) {
		if !deadline.IsZero() {
			deadline = deadline.Add(DeadlineSlack)
		}
		c.rdl = deadline
		if c.sock.SetReadDeadline(deadline) != nil {
			c.state.Store(h1Idle)
			return nil, nil, ErrConnUnusable
		}
	}
	if body && !deadline.IsZero() {
		c.wdl = true
		_ = c.sock.SetWriteDeadline(deadline)
	}
	// A request without a body goes out with the read for its response
	// (sockConn.held): one read fewer per exchange. Not under TLS, whose
	// records the socket cannot tell apart.
	c.sock.holdWrites(!body && c.tls == nil)
	return c.br, c.bw, nil
}

// DeadlineSlack is how much later than asked a Raw exchange's read
// deadline may be. A deadline that moves with every request would cost a
// timer update per request; Begin keeps the one on the socket while it is
// at most this much later than the new one, and sets new ones this much
// later. So timeouts.request may fire up to 50 ms late on the fast path,
// and a busy connection's read deadline moves once per 50 ms.
const DeadlineSlack = 50 * time.Millisecond

// deadlineKept reports whether the read deadline set, set, serves for a
// Begin asking for want.
func deadlineKept(set, want time.Time) bool {
	if set.IsZero() || want.IsZero() {
		return set.Equal(want)
	}
	return !set.Before(want) && set.Sub(want) <= DeadlineSlack
}

func (c *h1Conn) ReadBy(t time.Time) error {
	c.rdl = t
	return c.sock.SetReadDeadline(t)
}

func (c *h1Conn) WriteBy(t time.Time) error {
	c.wdl = true
	return c.sock.SetWriteDeadline(t)
}

func (c *h1Conn) End(reusable bool) {
	if len(c.sock.held) > 0 {
		reusable = false // a request was written but never sent
	}
	c.sock.holdWrites(false)
	if c.wdl {
		c.wdl = false
		if c.sock.SetWriteDeadline(time.Time{}) != nil {
			reusable = false
		}
	}
	if reusable && c.br.Buffered() == 0 {
		// Trusted at release; the hand-out check reads (see Usable), unless
		// a replayable request takes it within TrustWindow (Trusted).
		c.endedAt = time.Now()
		c.justChecked.Store(true)
		if c.state.CompareAndSwap(h1Busy, h1Idle) {
			return
		}
	}
	c.Close()
}

func (c *h1Conn) Stale(err error) bool {
	return c.exUnprobed && c.sock.got == c.exGot && closedByPeer(err)
}

// closedByPeer reports whether err says the peer closed or reset the
// connection (rather than a timeout, or a response the parser refused).
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errPeerClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// settleDeadline clears the read deadline a Raw exchange left on the
// socket before the connection is read outside one: always for a
// RoundTrip (its reads may take longer), and for a probe once the deadline
// is near (an expired deadline would fail the probe's read). The caller
// owns the read side.
func (c *h1Conn) settleDeadline(always bool) {
	if c.rdl.IsZero() || (!always && time.Until(c.rdl) > time.Second) {
		return
	}
	c.rdl = time.Time{}
	_ = c.sock.SetReadDeadline(time.Time{})
}

func (c *h1Conn) ReadResponse(method string) (*http.Response, error) {
	req := &http.Request{Method: method}
	for i := 0; ; i++ {
		resp, err := readResponse(c.br, &c.bound, c.maxHead, req)
		if err != nil {
			return nil, err
		}
		if code := resp.StatusCode; code >= 200 || code == http.StatusSwitchingProtocols {
			return resp, nil
		}
		if i >= max1xx {
			return nil, fmt.Errorf("more than %d informational (1xx) responses", max1xx)
		}
	}
}
