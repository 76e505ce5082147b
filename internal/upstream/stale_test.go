package upstream

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// scriptedOrigin accepts connections on 127.0.0.1 and runs serve on each
// in its own goroutine; Close waits for them.
type scriptedOrigin struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
}

func startScripted(t *testing.T, serve func(c net.Conn)) *scriptedOrigin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &scriptedOrigin{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		var each []chan struct{}
		defer func() {
			for _, d := range each {
				<-d
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d := make(chan struct{})
			each = append(each, d)
			go func() {
				defer close(d)
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-o.done })
	return o
}

// answerOne reads one request head and answers 200 "ok".
func answerOne(c net.Conn) bool {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	req.Body.Close()
	_, err = fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	return err == nil
}

// beginGet writes a GET through Raw and reads the response head.
func beginGet(c Raw) (*http.Response, error) {
	_, bw, err := c.Begin(time.Now().Add(5*time.Second), false)
	if err != nil {
		return nil, err
	}
	fmt.Fprint(bw, "GET / HTTP/1.1\r\nHost: origin\r\n\r\n")
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return c.ReadResponse(http.MethodGet)
}

// An idle connection the origin closed: handed out Trusted (no probe), the
// exchange fails and Stale says it is what the probe would have found;
// the probe (Usable) finds the same connection dead without sending.
func TestTrustedConnectionClosedWhileIdleIsStale(t *testing.T) {
	noLeaks(t)
	closed := make(chan struct{}, 2)
	o := startScripted(t, func(c net.Conn) {
		answerOne(c)
		c.Close() // the origin closes the kept-alive connection while it is idle
		closed <- struct{}{}
	})
	d := mustDialer(t, Options{})
	for _, trusted := range []bool{true, false} {
		c := mustDial(t, d, o.ln.Addr().String()).(Raw)
		if got := rawGet(t, c, "/", time.Now().Add(5*time.Second)); got != "ok" {
			t.Fatalf("first exchange: %q", got)
		}
		<-closed
		if !c.Usable() { // the pool's check at release: trusted, no read
			t.Fatal("release check failed a connection that ended cleanly")
		}
		if !trusted {
			// A probed hand-out finds the close before anything is sent.
			for i := 0; c.Usable(); i++ {
				if i == 100 {
					t.Fatal("the probe never saw the origin's close")
				}
				time.Sleep(time.Millisecond) // the FIN is on its way
			}
			c.Close()
			continue
		}
		if !c.(*h1Conn).Trusted() {
			t.Fatal("an idle connection was not Trusted")
		}
		_, err := beginGet(c)
		if err == nil {
			t.Fatal("an exchange on a connection the origin closed succeeded")
		}
		if !c.Stale(err) {
			t.Fatalf("Stale(%v) = false on a trusted connection closed while idle", err)
		}
		c.End(false)
	}
}

// Stale is false when the exchange began on a probed connection, and when
// a byte of response came back before the close: the origin may have
// acted on the request.
func TestStaleOnlyWhenUnprobedAndNothingCameBack(t *testing.T) {
	noLeaks(t)
	o := startScripted(t, func(c net.Conn) {
		answerOne(c)
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		fmt.Fprint(c, "HTTP/1.1 2") // half a status line, then the close
	})
	d := mustDialer(t, Options{})
	for _, trusted := range []bool{true, false} {
		c := mustDial(t, d, o.ln.Addr().String()).(Raw)
		if got := rawGet(t, c, "/", time.Now().Add(5*time.Second)); got != "ok" {
			t.Fatalf("first exchange: %q", got)
		}
		c.Usable() // release
		if trusted {
			c.(*h1Conn).Trusted()
		} else if !c.Usable() {
			t.Fatal("probe failed a live connection")
		}
		_, err := beginGet(c)
		if err == nil {
			t.Fatal("a cut response read as whole")
		}
		if c.Stale(err) {
			t.Fatalf("trusted=%v: Stale(%v) = true after a byte came back", trusted, err)
		}
		c.End(false)
	}

	// Probed, and the origin closes without answering: not stale either
	// (the probe ran; this close came after the request).
	o2 := startScripted(t, func(c net.Conn) {
		answerOne(c)
		http.ReadRequest(bufio.NewReader(c))
	})
	c := mustDial(t, d, o2.ln.Addr().String()).(Raw)
	rawGet(t, c, "/", time.Now().Add(5*time.Second))
	c.Usable()
	if !c.Usable() {
		t.Fatal("probe failed a live connection")
	}
	_, err := beginGet(c)
	if err == nil || c.Stale(err) {
		t.Fatalf("probed exchange cut by the origin: err %v, Stale %v; want an error that is not stale", err, c.Stale(err))
	}
	c.End(false)
}

// A connection idle for TrustWindow or longer is not Trusted: it is probed
// at hand-out, and bytes the origin sent unasked while it sat idle are
// found there instead of being read as the next request's response.
func TestTrustEndsAfterTheWindow(t *testing.T) {
	noLeaks(t)
	idle, sent := make(chan struct{}), make(chan struct{})
	o := startScripted(t, func(c net.Conn) {
		answerOne(c)
		<-idle
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra") // unasked
		close(sent)
		http.ReadRequest(bufio.NewReader(c)) // keeps the connection open
	})
	c := mustDial(t, mustDialer(t, Options{}), o.ln.Addr().String()).(Raw)
	if got := rawGet(t, c, "/", time.Now().Add(5*time.Second)); got != "ok" {
		t.Fatalf("first exchange: %q", got)
	}
	close(idle)
	<-sent
	h := c.(*h1Conn)
	if !h.Trusted() {
		t.Fatal("a connection that just ended cleanly was not Trusted")
	}
	h.unprobed.Store(false)
	h.endedAt = h.endedAt.Add(-TrustWindow) // idle for the whole window
	if h.Trusted() {
		t.Fatal("a connection idle for TrustWindow was still Trusted")
	}
	c.Usable() // the release check
	for i := 0; c.Usable(); i++ {
		if i == 100 {
			t.Fatal("the probe never saw the unasked bytes")
		}
		time.Sleep(time.Millisecond) // they are on their way
	}
	c.Close()
}
