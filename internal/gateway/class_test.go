package gateway

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/waitfor"
)

// classYAML is a gateway on one origin whose requests are classified: a
// route with a class of its own, the workload's match rules for the rest.
func classYAML(addr string, fast bool) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
downstream: {fast_path: %v}
routes:
  - {path_prefix: /batch/, origin: app, class: bulk}
  - {path_prefix: /, origin: app}
origins:
  - name: app
    protocol: h1
    balancer: {policy: least_work}
    endpoints: [{address: %q}]
workload:
  classes:
    - {name: light, percent: 60, latency: 15ms, match: {path_suffix: /light}}
    - {name: heavy, percent: 30, latency: 140ms, match: {methods: [GET], path_suffix: /heavy}}
    - {name: bulk, percent: 10, latency: 600ms, cost: 25}
`, fast, addr)
}

// TestClassReachesThePick: on both serving paths (the fast path, and
// net/http with fast_path off), over real sockets, a request's class —
// from the workload's match rules, or from its route — reaches the
// balancer's pick: while the request is held at the origin, its endpoint
// has the class's cost in flight, and nothing once it is answered.
func TestClassReachesThePick(t *testing.T) {
	hold := make(chan struct{})
	arrived := make(chan string, 8)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Method + " " + r.URL.Path
		<-hold
		io.WriteString(w, "ok")
	}))
	t.Cleanup(origin.Close)
	t.Cleanup(func() { close(hold) })
	addr := strings.TrimPrefix(origin.URL, "http://")

	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast_path=%v", fast), func(t *testing.T) {
			g := newGateway(t, classYAML(addr, fast), Options{})
			if err := g.Start(); err != nil {
				t.Fatal(err)
			}
			waitReady(t, g)
			url := "http://" + g.Addr()
			for _, c := range []struct {
				method, path string
				cost         float64
			}{
				{"GET", "/api/light", 1},
				{"GET", "/api/heavy", 140.0 / 15},
				{"POST", "/api/heavy", 1}, // the heavy rule is for GET only: no class
				{"GET", "/batch/heavy", 25},
				{"GET", "/other", 1},
			} {
				done := make(chan error, 1)
				go func() {
					req, _ := http.NewRequest(c.method, url+c.path, nil)
					resp, err := http.DefaultClient.Do(req)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					done <- err
				}()
				select {
				case got := <-arrived:
					if got != c.method+" "+c.path {
						t.Fatalf("origin got %q, want %q", got, c.method+" "+c.path)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s %s never reached the origin", c.method, c.path)
				}
				if w := workInFlight(g); math.Abs(w-c.cost) > 0.01 {
					t.Errorf("%s %s: work in flight %.3f, want the class's cost %.3f", c.method, c.path, w, c.cost)
				}
				hold <- struct{}{}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				waitfor.Until(t, "the work to be given back", func() bool { return workInFlight(g) == 0 })
			}
		})
	}
}

// workInFlight is the work in flight at the gateway's only endpoint, as
// /admin/origins shows it.
func workInFlight(g *Gateway) float64 {
	v := g.Origins().([]cluster.OriginView)
	return v[0].Endpoints[0].Work
}
