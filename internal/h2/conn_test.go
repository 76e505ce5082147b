package h2

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func noLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) })
}

// origin is Go's HTTP/2 server over TLS (ALPN h2) on 127.0.0.1.
func origin(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// dial opens a Conn to s over TLS with ALPN h2.
func dial(t *testing.T, s *httptest.Server, o Options) *Conn {
	t.Helper()
	tc := s.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tc.NextProtos = []string{"h2"}
	nc, err := tls.Dial("tcp", s.Listener.Addr().String(), tc)
	if err != nil {
		t.Fatal(err)
	}
	if p := nc.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Handshake(ctx, nc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func get(t *testing.T, c *Conn, host, path string) (*Stream, int) {
	t.Helper()
	var f Fields
	f.Pseudo("GET", "https", host, path)
	s, err := c.Open(&f, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Head(Wait{})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

func readBody(t *testing.T, s *Stream) string {
	t.Helper()
	var out bytes.Buffer
	buf := make([]byte, 1000)
	for {
		n, err := s.Read(buf, Wait{})
		out.Write(buf[:n])
		if err == io.EOF {
			return out.String()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestStreamsCarryRequestsBothWays: fields reach the origin as sent
// (lower-cased, forbidden ones left out), the response's fields, body and
// trailers come back, and many streams run at once on one connection.
func TestStreamsCarryRequestsBothWays(t *testing.T) {
	noLeaks(t)
	s := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-End")
		w.Header().Set("X-Echo", r.Header.Get("X-Mixed-Case")+"|"+r.Header.Get("Connection")+"|"+r.Host+"|"+r.URL.RequestURI())
		io.WriteString(w, strings.Repeat("b", 3000))
		w.Header().Set("X-End", "done")
	}))
	c := dial(t, s, Options{})
	if c.Streams() != 250 {
		t.Fatalf("Streams() = %d, want Go's server's 250", c.Streams())
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			var f Fields
			f.Pseudo("GET", "https", "example.test", fmt.Sprintf("/p/%d?q=1", i))
			f.Add("X-Mixed-Case", "v")
			f.Add("Connection", "keep-alive") // forbidden in HTTP/2: left out
			st, err := c.Open(&f, true)
			if err != nil {
				errs <- err
				return
			}
			defer st.Release()
			code, err := st.Head(Wait{})
			if err != nil || code != 200 {
				errs <- fmt.Errorf("head: %d %v", code, err)
				return
			}
			if v, _ := st.Value("x-echo"); v != fmt.Sprintf("v||example.test|/p/%d?q=1", i) {
				errs <- fmt.Errorf("origin saw %q", v)
				return
			}
			var n int
			buf := make([]byte, 512)
			for {
				k, err := st.Read(buf, Wait{})
				n += k
				if err == io.EOF {
					break
				}
				if err != nil {
					errs <- err
					return
				}
			}
			tr := st.Trailer()
			if n != 3000 || len(tr) != 1 || tr[0] != (hpack.HeaderField{Name: "x-end", Value: "done"}) {
				errs <- fmt.Errorf("body %d bytes, trailers %v", n, tr)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !c.Usable() {
		t.Fatal("connection not usable after its streams")
	}
}

// TestFlowControlBothWays: a body larger than every window goes up and
// comes back whole, and a reader that stops holds at most its stream's
// window buffered (the origin blocks rather than the gateway buffering).
func TestFlowControlBothWays(t *testing.T) {
	noLeaks(t)
	const size = 3 << 20
	wrote := make(chan int64, 1)
	s := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprint(w, n)
			return
		}
		n, _ := io.Copy(w, bytes.NewReader(make([]byte, size)))
		wrote <- n
	}))
	const window = 64 << 10
	c := dial(t, s, Options{StreamWindow: window, ConnWindow: 1 << 20})

	// Upload: more than the origin's windows (Go's server: 1 MiB per stream).
	var f Fields
	f.Pseudo("POST", "https", "x", "/")
	st, err := c.Open(&f, false)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := st.Write(make([]byte, size), Wait{}); err != nil || n != size {
		t.Fatalf("write: %d %v", n, err)
	}
	if err := st.CloseWrite(nil); err != nil {
		t.Fatal(err)
	}
	if code, err := st.Head(Wait{}); err != nil || code != 200 {
		t.Fatalf("upload: %d %v", code, err)
	}
	if got := readBody(t, st); got != fmt.Sprint(size) {
		t.Fatalf("origin received %s bytes, want %d", got, size)
	}
	st.Release()

	// Download with a reader that stops: buffered stays within the window.
	st, _ = get(t, c, "x", "/")
	defer st.Release()
	buf := make([]byte, 1000)
	if _, err := st.Read(buf, Wait{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the origin send all it may
	c.mu.Lock()
	held := len(st.buf) - st.r
	c.mu.Unlock()
	if held > window {
		t.Fatalf("%d bytes buffered for a reader that stopped, above the stream window %d", held, window)
	}
	select {
	case n := <-wrote:
		t.Fatalf("the origin finished writing (%d bytes) to a reader that stopped", n)
	default:
	}
	var got int64 = 1000
	for {
		n, err := st.Read(buf, Wait{})
		got += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got != size || <-wrote != size {
		t.Fatalf("read %d bytes, want %d", got, size)
	}
}

// TestCancelResetsTheStreamOnly: a stream canceled mid-response is reset
// (the origin's request context ends), its waiter returns at once, and
// the connection carries the next request.
func TestCancelResetsTheStreamOnly(t *testing.T) {
	noLeaks(t)
	canceled := make(chan struct{})
	s := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(canceled)
			return
		}
		io.WriteString(w, "ok")
	}))
	c := dial(t, s, Options{})
	st, code := get(t, c, "x", "/slow")
	if code != 200 {
		t.Fatal(code)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := st.Read(make([]byte, 10), Wait{})
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	st.Close()
	if err := <-errc; !errors.Is(err, ErrCanceled) {
		t.Fatalf("read on a canceled stream: %v, want ErrCanceled", err)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the origin never saw the stream reset")
	}
	st.Release()
	st, code = get(t, c, "x", "/")
	if code != 200 || readBody(t, st) != "ok" {
		t.Fatal("the connection did not carry the next request")
	}
	st.Release()
}

// TestWaitsEndOnDone: a head that never comes ends with ErrDone when the
// caller's timer fires.
func TestWaitsEndOnDone(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	s := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer close(release)
	c := dial(t, s, Options{})
	var f Fields
	f.Pseudo("GET", "https", "x", "/")
	st, err := c.Open(&f, true)
	if err != nil {
		t.Fatal(err)
	}
	tm := time.NewTimer(30 * time.Millisecond)
	if _, err := st.Head(Wait{Expire: tm.C}); !errors.Is(err, ErrDone) {
		t.Fatalf("Head: %v, want ErrDone", err)
	}
	st.Release()
}

// TestHeadTooLarge: a response header list above the limit fails its
// stream with ErrHeadTooLarge; the connection stays usable.
func TestHeadTooLarge(t *testing.T) {
	noLeaks(t)
	s := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			for i := range 20 {
				w.Header().Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("v", 100))
			}
		}
		io.WriteString(w, "ok")
	}))
	c := dial(t, s, Options{MaxHeaderListSize: 1000})
	var f Fields
	f.Pseudo("GET", "https", "x", "/big")
	st, err := c.Open(&f, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Head(Wait{}); !errors.Is(err, ErrHeadTooLarge) {
		t.Fatalf("Head: %v, want ErrHeadTooLarge", err)
	}
	st.Release()
	st, code := get(t, c, "x", "/")
	if code != 200 || readBody(t, st) != "ok" || !c.Usable() {
		t.Fatal("connection unusable after a stream's head was too large")
	}
	st.Release()
}

// TestInterimResponsesAreSkipped: 103 Early Hints before the response.
func TestInterimResponsesAreSkipped(t *testing.T) {
	noLeaks(t)
	s := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusTeapot)
	}))
	c := dial(t, s, Options{})
	st, code := get(t, c, "x", "/")
	defer st.Release()
	if code != http.StatusTeapot {
		t.Fatalf("status %d, want 418 after the 103", code)
	}
}

// rawOrigin serves one connection with serve, after reading the client's
// preface and sending SETTINGS (MAX_CONCURRENT_STREAMS 8).
func rawOrigin(t *testing.T, serve func(fr *http2.Framer)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, preface); err != nil {
			return
		}
		fr := http2.NewFramer(nc, nc)
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 8})
		serve(fr)
	})
	return ln.Addr().String()
}

func dialRaw(t *testing.T, addr string) *Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Handshake(ctx, nc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestGoAwayRefusesTheStreamsAboveIt: streams above GOAWAY's last stream
// ID fail as refused (safe to retry), the one below it completes, and no
// stream opens after it.
func TestGoAwayRefusesTheStreamsAboveIt(t *testing.T) {
	noLeaks(t)
	addr := rawOrigin(t, func(fr *http2.Framer) {
		var ids []uint32
		for len(ids) < 3 {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if h, ok := f.(*http2.HeadersFrame); ok {
				ids = append(ids, h.StreamID)
			}
		}
		fr.WriteGoAway(ids[0], http2.ErrCodeNo, nil)
		var b bytes.Buffer
		e := hpack.NewEncoder(&b)
		e.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: ids[0], BlockFragment: b.Bytes(), EndHeaders: true, EndStream: true})
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	})
	c := dialRaw(t, addr)
	var ss []*Stream
	for range 3 {
		var f Fields
		f.Pseudo("GET", "http", "x", "/")
		s, err := c.Open(&f, true)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	if code, err := ss[0].Head(Wait{}); err != nil || code != 200 {
		t.Fatalf("the stream GOAWAY kept: %d %v", code, err)
	}
	for _, s := range ss[1:] {
		if _, err := s.Head(Wait{}); !IsRefused(err) {
			t.Fatalf("a stream above GOAWAY's last ID: %v, want refused", err)
		}
	}
	for _, s := range ss {
		s.Release()
	}
	if c.Usable() {
		t.Fatal("usable after GOAWAY")
	}
	var f Fields
	f.Pseudo("GET", "http", "x", "/")
	if _, err := c.Open(&f, true); !IsRefused(err) {
		t.Fatalf("Open after GOAWAY: %v, want refused (nothing sent)", err)
	}
}

// TestProtocolErrorFailsEveryStream: an origin that breaks the protocol
// ends the connection and every stream on it, at once.
func TestProtocolErrorFailsEveryStream(t *testing.T) {
	noLeaks(t)
	addr := rawOrigin(t, func(fr *http2.Framer) {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.HeadersFrame); ok {
				fr.AllowIllegalWrites = true
				fr.WriteData(0, false, []byte("DATA on stream 0")) // a connection error
			}
		}
	})
	c := dialRaw(t, addr)
	var f Fields
	f.Pseudo("GET", "http", "x", "/")
	s, err := c.Open(&f, true)
	if err != nil {
		t.Fatal(err)
	}
	var ce *ConnError
	if _, err := s.Head(Wait{}); !errors.As(err, &ce) || ce.Code != CodeProtocol {
		t.Fatalf("Head: %v, want a PROTOCOL_ERROR ConnError", err)
	}
	s.Release()
	if c.Usable() {
		t.Fatal("usable after a protocol error")
	}
}

// TestPingAnswered: Ping gets its answer; on a closed connection it fails.
func TestPingAnswered(t *testing.T) {
	noLeaks(t)
	c := dial(t, origin(t, http.NotFoundHandler()), Options{})
	errc := make(chan error, 1)
	c.Ping(5*time.Second, func(err error) { errc <- err })
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Ping(5*time.Second, func(err error) { errc <- err })
	if err := <-errc; err == nil {
		t.Fatal("ping on a closed connection succeeded")
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// countingConn counts the writes to a connection.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// countedOkConn is a connection to an h2c origin that answers "ok",
// through a countingConn; both are closed when the test ends.
func countedOkConn(t *testing.T) (*Conn, *countingConn) {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	nc, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingConn{Conn: nc}
	ctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	c, err := Handshake(ctx, cc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cc
}

// TestConcurrentRequestsShareWrites: the HEADERS of requests opened while
// the writer is busy leave in far fewer writes than requests, and every
// one of them is answered.
func TestConcurrentRequestsShareWrites(t *testing.T) {
	noLeaks(t)
	c, cc := countedOkConn(t)
	const n = 40
	c.lockWrite() // busy: every Open below waits for the writer
	before := cc.writes.Load()
	var wg sync.WaitGroup
	var opened atomic.Int32
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			var f Fields
			f.Pseudo("GET", "http", "x", "/")
			opened.Add(1)
			st, err := c.Open(&f, true)
			if err != nil {
				errs <- err
				return
			}
			defer st.Release()
			if code, err := st.Head(Wait{}); err != nil || code != 200 {
				errs <- fmt.Errorf("head %d %v", code, err)
			}
		})
	}
	// Every request waits for the writer before it is let go, so that how
	// many share a write does not hang on the scheduler (with half of them
	// waiting, a loaded machine let the rest arrive one write each); the
	// wait is bounded should an Open ever not reach the writer.
	for end := time.Now().Add(5 * time.Second); (opened.Load() < n || c.waiting.Load() < n) && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	c.unlockWrite()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The reads' SETTINGS ACKs and WINDOW_UPDATEs write too; the requests
	// alone would be n writes if each flushed.
	if w := cc.writes.Load() - before; w > n/4 {
		t.Fatalf("%d requests took %d writes, want at most %d", n, w, n/4)
	}
}

// TestOnlyABusyConnectionYieldsBeforeFlushing: a stream alone on its
// connection flushes its HEADERS at once, without the yield that lets
// concurrent requests join the write (at low rates the yield only wakes an
// idle thread); a stream opened while another is open yields first.
func TestOnlyABusyConnectionYieldsBeforeFlushing(t *testing.T) {
	noLeaks(t)
	var yields atomic.Int32
	yield = func() { yields.Add(1); runtime.Gosched() }
	defer func() { yield = runtime.Gosched }()
	c, cc := countedOkConn(t)
	open := func() *Stream {
		var f Fields
		f.Pseudo("GET", "http", "x", "/")
		before := cc.writes.Load()
		st, err := c.Open(&f, true)
		if err != nil {
			t.Fatal(err)
		}
		if cc.writes.Load() == before {
			t.Fatal("Open returned before its HEADERS were written")
		}
		return st
	}
	first := open()
	if n := yields.Load(); n != 0 {
		t.Errorf("a stream alone on its connection yielded %d times before flushing, want 0", n)
	}
	second := open() // first is still open: the connection is busy
	if n := yields.Load(); n != 1 {
		t.Errorf("a stream opened beside another yielded %d times, want 1", n)
	}
	for _, st := range []*Stream{first, second} {
		if code, err := st.Head(Wait{}); err != nil || code != 200 {
			t.Fatalf("head %d %v", code, err)
		}
		st.Release()
	}
}
