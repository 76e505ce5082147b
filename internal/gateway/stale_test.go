package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// closingOrigin answers each connection's first request with 200 "ok" and
// then closes the connection while it sits idle in the gateway's pool, as
// an origin with a short keep-alive timeout does; closed receives once the
// close is done.
type closingOrigin struct {
	ln       net.Listener
	closed   chan struct{}
	accepted atomic.Int64
}

func startClosingOrigin(t *testing.T) *closingOrigin {
	t.Helper()
	o := &closingOrigin{closed: make(chan struct{}, 16)}
	o.ln = acceptEach(t, func(c net.Conn) {
		o.accepted.Add(1)
		defer func() { c.Close(); o.closed <- struct{}{} }()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	return o
}

// TestStaleConnectionIsSentAgain: the fast path hands an idle HTTP/1.1
// connection out without the probe read when the request can be sent
// again (pool.AcquireTrusting). Every connection here was closed by the
// origin while idle, so each trusted GET meets a dead one: it is sent again
// on a new connection and answered 200, and the stale retry is counted.
// A POST with a body, and any request with retries off, keeps the probe:
// the pool finds the close before anything is written, and nothing is
// sent twice.
func TestStaleConnectionIsSentAgain(t *testing.T) {
	cases := []struct {
		name, keys, method, body string
		wantStale                float64
	}{
		{"get", "", "GET", "", 1},
		{"post-with-body", "", "POST", "data", 0},
		{"get-retries-off", "    retry: {attempts: 0}\n", "GET", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := startClosingOrigin(t)
			// One loop: every request finds the one pool the one before left.
			g := newGateway(t, strings.Replace(fastYAML(o.ln.Addr().String(), true), "loops: 2", "loops: 1", 1)+"    pool: {prewarm: 0}\n"+tc.keys, Options{})
			if err := g.Start(); err != nil {
				t.Fatal(err)
			}
			c := downstream(t, dsH1, nil)
			for i := range 3 {
				req, _ := http.NewRequest(tc.method, "http://"+g.Addr()+"/", strings.NewReader(tc.body))
				if tc.body == "" {
					req.Body = nil
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != "ok" {
					t.Fatalf("%s %d: %d %q (%s); want 200 ok", tc.method, i, resp.StatusCode, b, resp.Header.Get("X-Corput-Error"))
				}
				<-o.closed // the connection is dead in the pool before the next request
			}
			if h := g.handoffs(); h != 0 {
				t.Fatalf("%d hand-offs to net/http: the fast path was not used", h)
			}
			stale, ok := scrapeFamilies(t, g).value("corput_upstream_stale_retries_total", "origin", "app")
			// The first request found the pool empty; the two after it met a dead connection.
			if want := 2 * tc.wantStale; !ok || stale != want {
				t.Fatalf("corput_upstream_stale_retries_total = %v (present %v), want %v", stale, ok, want)
			}
			if n := o.accepted.Load(); n != 3 {
				t.Fatalf("origin accepted %d connections for 3 requests, want 3", n)
			}
		})
	}
}
