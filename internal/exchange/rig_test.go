package exchange

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is one origin endpoint behind the real parts an exchange runs on: an
// upstream dialer, a pool, a balancer's picker and a forward.Attempt.
type rig struct {
	t    *testing.T
	addr string
	pol  forward.Policy
	pk   *balance.Picker
	p    *pool.Pool
	x    State
}

// newRig dials addr with protocol proto (upstream.H1 or upstream.H2C).
func newRig(t *testing.T, addr string, proto upstream.Protocol) *rig {
	t.Helper()
	d, err := upstream.NewDialer(upstream.Options{Protocol: proto, ConnectTimeout: time.Second, MaxResponseHeaderBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	oc := config.DefaultOrigin()
	bal, err := balance.NewOrigin("t", balance.FromConfig(&oc), []balance.Member{{Address: addr, Weight: 1}}, balance.Options{Clock: clock.Real(), Rand: rng.New(1)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := pool.DefaultConfig()
	cfg.Prewarm = 0
	p, err := pool.New(addr, 0, cfg, d, clock.Real(), rng.New(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, addr: addr, pol: forward.NewPolicy(oc.Retry, clock.Real(), nil), pk: bal.NewPicker([]string{addr}), p: p}
	t.Cleanup(func() {
		r.p.Close()
		r.pk.Close()
		bal.Close()
	})
	return r
}

// do makes one attempt's exchange of req, the response going to c.
func (r *rig) do(req *Request, c Client) (int, forward.Step, forward.Reason) {
	r.t.Helper()
	if req.MaxHead == 0 {
		req.MaxHead = 16 << 10
	}
	if req.Host == "" {
		req.Host = r.addr
	}
	if req.Scheme == "" {
		req.Scheme = "http"
	}
	var a forward.Attempt
	a.Start(&r.pol, r.pk, forward.Replay{}, 1, balance.Key{})
	defer a.Finish()
	if _, _, step := a.Pick(); step != forward.Acquire {
		r.t.Fatalf("pick: %v", step)
	}
	lease, err := r.p.Acquire(context.Background())
	if step := a.Acquired(lease, err); step != forward.Send {
		r.t.Fatalf("acquire: %v %v", step, err)
	}
	status, step := r.x.Do(&a, req, c)
	return status, step, a.Reason()
}

// conns is how many connections the rig's pool holds open.
func (r *rig) conns() int { return r.p.Held() }

func get(target string) *Request {
	return &Request{Method: http.MethodGet, Target: target}
}

// recorder is a Client that keeps what it is given.
type recorder struct {
	raw      bool // takes Framing Chunked
	head     Head
	fields   http.Header
	body     bytes.Buffer
	trailer  http.Header
	n        int64
	ended    bool
	aborted  bool
	flushes  int
	gone     chan struct{} // closed: the client left
	mu       sync.Mutex
	watched  io.Closer
	upgraded io.ReadWriteCloser
}

func newRecorder(raw bool) *recorder {
	return &recorder{raw: raw, fields: http.Header{}, trailer: http.Header{}, gone: make(chan struct{})}
}

func (r *recorder) WriteHead(h *Head) error {
	r.head = *h
	r.head.Fields = nil
	for _, f := range h.Fields {
		r.fields.Add(f.Name, f.Value)
	}
	return nil
}

func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *recorder) Flush() error                { r.flushes++; return nil }

func (r *recorder) End(t []hpack.HeaderField, n int64) error {
	for _, f := range t {
		r.trailer.Add(f.Name, f.Value)
	}
	r.n, r.ended = n, true
	return nil
}

func (r *recorder) Abort(n int64)   { r.n, r.aborted = n, true }
func (r *recorder) RawChunks() bool { return r.raw }

// Watch closes up when the client "leaves" (leave).
func (r *recorder) Watch(up io.Closer) {
	r.mu.Lock()
	r.watched = up
	r.mu.Unlock()
	select {
	case <-r.gone:
		up.Close()
	default:
	}
}

func (r *recorder) Unwatch() bool {
	r.mu.Lock()
	r.watched = nil
	r.mu.Unlock()
	select {
	case <-r.gone:
		return true
	default:
		return false
	}
}

func (r *recorder) leave() {
	close(r.gone)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watched != nil {
		r.watched.Close()
	}
}

func (r *recorder) Upgrade(h *Head, up io.ReadWriteCloser) int {
	r.WriteHead(h)
	r.upgraded = up
	io.WriteString(up, "ping")
	buf := make([]byte, 4)
	io.ReadFull(up, buf)
	r.body.Write(buf)
	return h.Status
}

// origin is an HTTP/1.1 and h2c test server on loopback.
func origin(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetHTTP1(true)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// rawOrigin serves every connection with serve, on loopback.
func rawOrigin(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	return ln.Addr().String()
}

// protocols are the two wires an exchange speaks.
var protocols = []struct {
	name  string
	proto upstream.Protocol
}{{"h1", upstream.H1}, {"h2", upstream.H2C}}

func addrOf(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
