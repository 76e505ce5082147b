package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/waitfor"
)

// gatedListener holds every Accept until open is closed, so a dial to it
// connects (the kernel completes the handshake) but its HTTP/2 SETTINGS
// do not come: the dial stays in flight.
type gatedListener struct {
	net.Listener
	open     chan struct{}
	accepted atomic.Int64
}

func (l *gatedListener) Accept() (net.Conn, error) {
	<-l.open
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// A loop that holds no connection to an HTTP/2 endpoint waits on the
// home loop's connection instead of dialling its own (pool.Share): while
// the home loop's pre-warm dial is in flight, requests placed on both
// loops queue, one dial is in flight in all, and the endpoint gets one
// connection. Before, the other loop dialled a second one (bench/peers
// tls_origins' 17th connection, a full handshake).
func TestLoopsWaitOnTheHomeLoopsHTTP2Dial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl := &gatedListener{Listener: ln, open: make(chan struct{})}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}), Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(gl)
	var once sync.Once
	openGate := func() { once.Do(func() { close(gl.open) }) }
	t.Cleanup(func() { openGate(); srv.Close() })

	g := newGateway(t, protoYAML(ln.Addr().String(), "h2c", true), Options{})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	const n = 8
	type answer struct {
		code int
		body string
		err  error
	}
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
			resp, err := c.Get(fmt.Sprintf("http://%s/r%d", g.Addr(), i))
			if err != nil {
				answers <- answer{err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{code: resp.StatusCode, body: string(b)}
		}()
	}
	pools := func() (pending, dialing int, perLoop []int) {
		for _, lv := range g.Origins().([]cluster.OriginView)[0].Loops {
			d := 0
			for _, pv := range lv.Pools {
				pending += pv.Pending
				d += pv.Dialing
			}
			dialing += d
			perLoop = append(perLoop, d)
		}
		return pending, dialing, perLoop
	}
	waitfor.Until(t, "every request to queue for a stream", func() bool { p, _, _ := pools(); return p == n })
	if _, dialing, perLoop := pools(); dialing != 1 {
		t.Fatalf("%d dials in flight (per loop %v) for %d requests to one HTTP/2 endpoint, want the home loop's 1", dialing, perLoop, n)
	}
	openGate()
	for range n {
		a := <-answers
		if a.err != nil || a.code != 200 || !strings.HasPrefix(a.body, "HTTP/2") {
			t.Errorf("answer %d %q %v, want 200 over HTTP/2", a.code, a.body, a.err)
		}
	}
	if got := gl.accepted.Load(); got != 1 {
		t.Fatalf("the origin accepted %d connections, want 1", got)
	}
}
