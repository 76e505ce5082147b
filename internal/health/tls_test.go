package health

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/health/healthtest"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/upstream"
	"github.com/corput/corput/internal/waitfor"
)

// poolsOf is a health.Pools of fixed pools.
type poolsOf struct {
	m   map[string]*pool.Pool
	mux bool
}

func (p poolsOf) ProbePool(addr string) (*pool.Pool, bool) { return p.m[addr], p.mux }

// TestProbesOverTLS: over TLS, on HTTP/1.1 and on HTTP/2, a probe asks the
// configured method and path, with the origin's server name as its host;
// an answer outside expected_statuses fails it.
func TestProbesOverTLS(t *testing.T) {
	for _, proto := range []upstream.Protocol{upstream.H1, upstream.H2} {
		t.Run(string(proto), func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			status := 204
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Proto+" "+r.Method+" "+r.Host+" "+r.URL.Path+" "+r.UserAgent())
				s := status
				mu.Unlock()
				w.WriteHeader(s)
			}))
			srv.EnableHTTP2 = proto == upstream.H2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			addr := srv.Listener.Addr().String()
			roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			d, err := upstream.NewDialer(upstream.Options{Protocol: proto, ConnectTimeout: time.Second,
				TLS: &tls.Config{RootCAs: roots, ServerName: "example.com"}})
			if err != nil {
				t.Fatal(err)
			}
			clk := clock.NewFake(time.Unix(1000, 0))
			bal, err := balance.NewOrigin("tls", balance.DefaultConfig(), []balance.Member{{Address: addr}}, balance.Options{Clock: clk, Rand: rng.New(1)})
			if err != nil {
				t.Fatal(err)
			}
			defer bal.Close()
			cfg := pool.DefaultConfig()
			cfg.IdleTimeout, cfg.MaxLifetime, cfg.Keepalive = 0, 0, 0
			p, err := pool.New(addr, 0, cfg, d, clk, rng.New(1), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			waitfor.Until(t, "the pool warm", p.Ready)
			oc := config.DefaultOrigin()
			oc.Name, oc.TLS = "tls", &config.ClientTLS{ServerName: "example.com"}
			hc := check()
			hc.Method, hc.Path, hc.ExpectedStatuses = "HEAD", "/ready", []int{204}
			oc.HealthCheck = &hc
			c := New(Env{Origin: "tls", Clock: clk, Balance: bal, Pools: poolsOf{map[string]*pool.Pool{addr: p}, proto == upstream.H2}})
			defer c.Close()
			c.Configure(&oc)
			c.Sync([]string{addr})
			step := func(d time.Duration) {
				healthtest.Advance(t, clk, d, func() bool { return c.InFlight() == 0 })
			}
			step(3 * time.Second)
			if st := c.State(addr); st != Healthy {
				t.Fatalf("state %s", st)
			}
			mu.Lock()
			want := map[upstream.Protocol]string{upstream.H1: "HTTP/1.1", upstream.H2: "HTTP/2.0"}[proto] + " HEAD example.com /ready " + UserAgent
			if len(seen) == 0 || seen[0] != want {
				t.Fatalf("the origin saw %q; want %q", seen, want)
			}
			status = 200 // not in expected_statuses
			mu.Unlock()
			step(3 * time.Second)
			if st := c.State(addr); st != Unhealthy {
				t.Fatalf("answering 200 outside expected_statuses [204]: state %s", st)
			}
		})
	}
}
