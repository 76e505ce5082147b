package upstream

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/corput/corput/internal/waitfor"
)

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return string(b)
}

func TestH1ReuseAfterBodyEOF(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	c := mustDial(t, mustDialer(t, Options{}), o.addr())
	if c.Protocol() != ProtoH1 || c.Streams() != 1 {
		t.Fatalf("protocol %s streams %d, want h1 and 1", c.Protocol(), c.Streams())
	}
	for i := range 3 {
		resp := get(t, c, o.url(fmt.Sprint("/", i)))
		b, err := io.ReadAll(resp.Body)
		if got, want := string(b), fmt.Sprint("hello /", i); err != nil || got != want {
			t.Fatalf("body %q, %v; want %q", got, err, want)
		}
		if _, err := resp.Body.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after EOF: %v, want io.EOF again", err)
		}
		resp.Body.Close()
		if _, err := resp.Body.Read(make([]byte, 1)); !errors.Is(err, http.ErrBodyReadAfterClose) {
			t.Fatalf("read after Close: %v, want ErrBodyReadAfterClose", err)
		}
		if !c.Usable() {
			t.Fatalf("request %d: connection not usable after its body was read", i)
		}
	}
	if n := o.accepted.Load(); n != 1 {
		t.Fatalf("origin accepted %d connections, want 1", n)
	}
}

func TestH1BusyConnectionRefusesSecondRequest(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "x")
	}))
	c := mustDial(t, mustDialer(t, Options{}), o.addr())
	resp := get(t, c, o.url("/"))
	req, _ := http.NewRequest(http.MethodGet, o.url("/"), nil)
	if _, err := roundTrip(c, req); !errors.Is(err, ErrConnBusy) || !IsRefusedStream(err) {
		t.Fatalf("second request while the first body is open: %v, want ErrConnBusy (retryable)", err)
	}
	readAll(t, resp)
	readAll(t, get(t, c, o.url("/")))
}

func TestH1ConnectionClose(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bye" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, "ok")
	}))
	d := mustDialer(t, Options{})

	t.Run("origin asks", func(t *testing.T) {
		c := mustDial(t, d, o.addr())
		readAll(t, get(t, c, o.url("/bye")))
		if c.Usable() {
			t.Fatal("connection usable after the origin sent Connection: close")
		}
		req, _ := http.NewRequest(http.MethodGet, o.url("/"), nil)
		if _, err := roundTrip(c, req); !errors.Is(err, ErrConnUnusable) {
			t.Fatalf("request on a closed connection: %v, want ErrConnUnusable", err)
		}
	})
	t.Run("request asks", func(t *testing.T) {
		c := mustDial(t, d, o.addr())
		req, _ := http.NewRequest(http.MethodGet, o.url("/"), nil)
		req.Header.Set("Connection", "close")
		resp, err := roundTrip(c, req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if c.Usable() {
			t.Fatal("connection usable after the request sent Connection: close")
		}
	})
}

// rawOrigin is a hand-driven HTTP/1.1 origin: each accepted connection is
// given to serve on a goroutine of its own. It lets a test close a
// connection at a chosen moment. Cleanup closes the listener and every
// connection and waits for the goroutines.
func rawOrigin(t *testing.T, tlsConf *tls.Config, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Go(func() { serve(nc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// serveOne answers one request with "ok" and then runs after.
func serveOne(after func(net.Conn)) func(net.Conn) {
	return func(nc net.Conn) {
		br := bufio.NewReader(nc)
		req, err := http.ReadRequest(br)
		if err != nil {
			nc.Close()
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		after(nc)
	}
}

func TestH1PeerClosedIdleIsNotHandedOut(t *testing.T) {
	p := getPKI(t)
	for _, tc := range []struct {
		name   string
		server *tls.Config
		client *tls.Config
	}{
		{"cleartext", nil, nil},
		// A client session cache makes the server send TLS 1.3 session
		// tickets, and a client certificate makes it send them only after
		// the client's handshake is over: they wait in the socket, and the
		// probe must read past them (a raw peek would see "data").
		{"tls13", &tls.Config{Certificates: []tls.Certificate{p.server},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.clientPool},
			&tls.Config{RootCAs: p.roots, Certificates: []tls.Certificate{p.client},
				ClientSessionCache: tls.NewLRUClientSessionCache(4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t)
			closeIt := make(chan struct{})
			closed := make(chan struct{})
			handshaken := make(chan struct{})
			serve := serveOne(func(nc net.Conn) {
				go func() {
					<-closeIt
					nc.Close()
					close(closed)
				}()
			})
			addr := rawOrigin(t, tc.server, func(nc net.Conn) {
				if tc, ok := nc.(*tls.Conn); ok {
					tc.Handshake() // TLS 1.3: returns once the session tickets are sent
				}
				close(handshaken)
				serve(nc)
			})
			t.Cleanup(func() {
				select {
				case <-closeIt:
				default:
					close(closeIt)
				}
			})
			d := mustDialer(t, Options{Protocol: H1, TLS: tc.client})
			c := mustDial(t, d, addr)
			scheme := "http"
			if tc.client != nil {
				scheme = "https"
			}
			<-handshaken
			if !c.Usable() {
				t.Fatal("a fresh connection was reported unusable")
			}
			readAll(t, get(t, c, scheme+"://"+addr+"/"))
			for range 3 {
				if !c.Usable() {
					t.Fatal("a live idle connection was reported unusable")
				}
			}
			close(closeIt)
			<-closed
			waitfor.Until(t, "peer close detected", func() bool { return !c.Usable() })
			var pinged error
			c.Ping(0, func(err error) { pinged = err })
			if pinged == nil {
				t.Fatal("Ping on a connection the peer closed reported success")
			}
		})
	}
}

func TestH1UnaskedBytesMakeIdleUnusable(t *testing.T) {
	noLeaks(t)
	sent := make(chan struct{})
	addr := rawOrigin(t, nil, serveOne(func(nc net.Conn) {
		io.WriteString(nc, "HTTP/1.1 200 OK\r\n") // garbage after the response
		close(sent)
		io.Copy(io.Discard, nc)
		nc.Close()
	}))
	c := mustDial(t, mustDialer(t, Options{}), addr)
	readAll(t, get(t, c, "http://"+addr+"/"))
	<-sent
	waitfor.Until(t, "stray bytes detected", func() bool { return !c.Usable() })
}

func TestH1UpgradeGivesRawConnection(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer nc.Close()
		io.WriteString(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(nc, brw) // echo until the client closes
	}))
	c := mustDial(t, mustDialer(t, Options{}), o.addr())
	req, _ := http.NewRequest(http.MethodGet, o.url("/ws"), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := roundTrip(c, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatal("101 response body is not an io.ReadWriteCloser")
	}
	if _, err := io.WriteString(rw, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(rw, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q, %v; want ping", buf, err)
	}
	if c.Usable() {
		t.Fatal("an upgraded connection must never go back to the pool")
	}
	rw.Close()
}
