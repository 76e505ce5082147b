package upstream

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/corput/corput/internal/waitfor"
)

func TestH2StreamsFromPeerSettingsAndMultiplexing(t *testing.T) {
	noLeaks(t)
	const streams = 16
	var (
		mu       sync.Mutex
		inFlight int
		peak     int
	)
	allIn := make(chan struct{})
	o := startOrigin(t, originOpts{tls: true, h2: true, maxStreams: streams}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		if inFlight == streams {
			close(allIn)
		}
		mu.Unlock()
		<-allIn // every request waits until all are in flight at once
		mu.Lock()
		inFlight--
		mu.Unlock()
		io.WriteString(w, r.Proto)
	}))
	c := mustDial(t, mustDialer(t, Options{TLS: getPKI(t).clientTLS(false)}), o.addr())
	if c.Protocol() != ProtoH2 {
		t.Fatalf("protocol %s, want h2", c.Protocol())
	}
	if got := c.Streams(); got != streams {
		t.Fatalf("Streams() = %d, want the origin's MAX_CONCURRENT_STREAMS %d", got, streams)
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for range streams {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, o.url("/"), nil)
			resp, err := roundTrip(c, req)
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "HTTP/2.0" {
				errs <- fmt.Errorf("origin saw %q, want HTTP/2.0", b)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if peak != streams || o.accepted.Load() != 1 {
		t.Fatalf("peak %d concurrent streams over %d connections, want %d over 1", peak, o.accepted.Load(), streams)
	}
	if !c.Usable() {
		t.Fatal("h2 connection not usable after its streams finished")
	}
}

func TestH2TrailersAndStreamingBodies(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{tls: true, h2: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "Grpc-Status, X-Req-Trailer")
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // headers first: the client streams after them
		var n int
		buf := make([]byte, 64)
		for { // echo each piece as it arrives
			k, err := r.Body.Read(buf)
			n += k
			w.Write(buf[:k])
			w.(http.Flusher).Flush()
			if err != nil {
				break
			}
		}
		w.Header().Set("Grpc-Status", fmt.Sprint(n))
		w.Header().Set("X-Req-Trailer", r.Trailer.Get("X-Req-Trailer"))
	}))
	c := mustDial(t, mustDialer(t, Options{TLS: getPKI(t).clientTLS(false)}), o.addr())
	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, o.url("/svc/Method"), pr)
	req.Trailer = http.Header{"X-Req-Trailer": nil}
	resp, err := roundTrip(c, req)
	if err != nil {
		t.Fatal(err)
	}
	// Bidirectional: each message comes back before the next one is sent.
	buf := make([]byte, 5)
	for i := range 3 {
		msg := fmt.Sprintf("msg%02d", i)
		if _, err := io.WriteString(pw, msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo %q, %v; want %q", buf, err, msg)
		}
	}
	req.Trailer.Set("X-Req-Trailer", "sent")
	pw.Close()
	if rest, _ := io.ReadAll(resp.Body); len(rest) != 0 {
		t.Fatalf("unexpected extra body %q", rest)
	}
	resp.Body.Close()
	if got := resp.Trailer.Get("Grpc-Status"); got != "15" {
		t.Errorf("response trailer Grpc-Status = %q, want 15", got)
	}
	if got := resp.Trailer.Get("X-Req-Trailer"); got != "sent" {
		t.Errorf("origin saw request trailer %q, want sent", got)
	}
}

func TestH2GoAwayMakesUnusable(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{tls: true, h2: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	c := mustDial(t, mustDialer(t, Options{TLS: getPKI(t).clientTLS(false)}), o.addr())
	readAll(t, get(t, c, o.url("/")))
	shut := make(chan error, 1)
	go func() { shut <- o.Config.Shutdown(context.Background()) }() // sends GOAWAY
	waitfor.Until(t, "GOAWAY seen", func() bool { return !c.Usable() })
	req, _ := http.NewRequest(http.MethodGet, o.url("/"), nil)
	if _, err := roundTrip(c, req); !IsRefusedStream(err) {
		t.Fatalf("request after GOAWAY: %v, want a retryable refusal", err)
	}
	c.Close()
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

func TestH2PingAnsweredAndLost(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{tls: true, h2: true}, http.NotFoundHandler())
	// A proxy in front of the origin that can stop forwarding, like a
	// blackholed path: the sockets stay open, nothing comes back.
	front := startBlackholeProxy(t, o.addr())
	c := mustDial(t, mustDialer(t, Options{TLS: getPKI(t).clientTLS(false)}), front.addr())
	errc := make(chan error, 1)
	c.Ping(5*time.Second, func(err error) { errc <- err })
	if err := <-errc; err != nil {
		t.Fatalf("ping on a live connection: %v", err)
	}
	front.blackhole()
	c.Ping(50*time.Millisecond, func(err error) { errc <- err })
	if err := <-errc; err == nil {
		t.Fatal("ping through a blackhole succeeded")
	}
	if c.Usable() {
		t.Fatal("connection usable after a lost ping")
	}
}

func TestH2RefusedStreamIsRetryable(t *testing.T) {
	noLeaks(t)
	// A minimal HTTP/2 origin that refuses every stream.
	addr := rawOrigin(t, nil, func(nc net.Conn) {
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, preface); err != nil {
			return
		}
		fr := http2.NewFramer(nc, nc)
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 4})
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					fr.WritePing(true, f.Data)
				}
			case *http2.HeadersFrame:
				fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
			}
		}
	})
	c := mustDial(t, mustDialer(t, Options{Protocol: H2C}), addr)
	if c.Streams() != 4 {
		t.Fatalf("Streams() = %d, want 4", c.Streams())
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	_, err := roundTrip(c, req)
	if err == nil || !IsRefusedStream(err) {
		t.Fatalf("refused stream: %v, want IsRefusedStream", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Fatalf("error %q does not name the endpoint", err)
	}
	if !c.Usable() {
		t.Fatal("a refused stream must not break the connection")
	}
}

func TestH2CPriorKnowledge(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{h2: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	c := mustDial(t, mustDialer(t, Options{Protocol: H2C}), o.addr())
	if c.Protocol() != ProtoH2 {
		t.Fatalf("protocol %s, want h2", c.Protocol())
	}
	if got := readAll(t, get(t, c, o.url("/"))); got != "HTTP/2.0" {
		t.Fatalf("origin saw %q, want HTTP/2.0", got)
	}
	if c.Streams() != 250 { // net/http's server default
		t.Fatalf("Streams() = %d, want 250 (the server's default)", c.Streams())
	}
}

// blackholeProxy forwards TCP to an origin. blackhole() silences the
// connections open at that moment: their sockets stay open and nothing is
// forwarded either way. Connections made later pass.
type blackholeProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	count int // connections accepted
	holed int // the first holed connections are silent
	wg    sync.WaitGroup
	cs    []net.Conn
}

func startBlackholeProxy(t testing.TB, target string) *blackholeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackholeProxy{ln: ln}
	p.wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				continue
			}
			p.mu.Lock()
			p.cs = append(p.cs, down, up)
			p.count++
			id := p.count
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(id, up, down) })
			p.wg.Go(func() { p.pipe(id, down, up) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.cs {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *blackholeProxy) addr() string { return p.ln.Addr().String() }

func (p *blackholeProxy) blackhole() {
	p.mu.Lock()
	p.holed = p.count
	p.mu.Unlock()
}

func (p *blackholeProxy) pipe(id int, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		p.mu.Lock()
		dead := id <= p.holed
		p.mu.Unlock()
		if dead {
			continue // swallow: the path is a blackhole now
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}
