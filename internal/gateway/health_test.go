package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/health/healthtest"
	"github.com/corput/corput/internal/waitfor"
)

// TestHealthChecksThroughTheGateway: a gateway in front of 10 endpoints
// with no traffic, one answering 500 and one that never answers. Its
// health checks eject both (within the 20 % cap), /admin/origins names
// health_check as the reason and probe as the source, and the requests
// that follow reach only the healthy eight. A reload that removes the
// health_check block applies in place: both are back in service.
func TestHealthChecksThroughTheGateway(t *testing.T) {
	var srvs []*healthtest.Origin
	var addrs []string
	for range 10 {
		s := healthtest.Start(t)
		srvs = append(srvs, s)
		addrs = append(addrs, s.Addr())
	}
	srvs[0].Mode.Store(healthtest.S500)
	srvs[1].Mode.Store(healthtest.Hang)
	base := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    protocol: h1
    endpoints: %s
`, endpointList(addrs...))
	text := base + "    health_check: {path: /healthz, interval: 200ms, jitter: 50ms, timeout: 100ms, unhealthy_threshold: 2}\n"
	g := newGateway(t, text, Options{})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g)
	ejectedBy := func() map[string]string {
		var v []cluster.OriginView
		adminJSON(t, g, "/admin/origins", 200, &v)
		out := map[string]string{}
		for _, e := range v[0].Endpoints {
			if e.Ejected {
				out[e.Address] = e.EjectedBy
			}
			if e.Check == nil || e.HealthSource == "" {
				t.Fatalf("%s: no health check in /admin/origins: %+v", e.Address, e)
			}
		}
		return out
	}
	waitfor.Until(t, "both sick endpoints ejected by their health checks", func() bool {
		ej := ejectedBy()
		return len(ej) == 2 && ej[addrs[0]] == balance.ReasonHealthCheck && ej[addrs[1]] == balance.ReasonHealthCheck
	})
	for range 50 {
		resp, err := http.Get("http://" + g.Addr() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if n := srvs[0].Requests.Load() + srvs[1].Requests.Load(); n != 0 {
		t.Fatalf("%d requests reached the sick endpoints after their checks failed", n)
	}

	cfg, err := config.Parse([]byte(base), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.Admin.Listen = g.Running().Listen, g.Running().Admin.Listen
	if err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	var v []cluster.OriginView
	adminJSON(t, g, "/admin/origins", 200, &v)
	for _, e := range v[0].Endpoints {
		if e.Ejected || e.Check != nil {
			t.Errorf("after the reload without health_check: %s ejected %v, check %+v", e.Address, e.Ejected, e.Check)
		}
	}
	if !strings.Contains(fmt.Sprint(v[0].Endpoints), addrs[0]) {
		t.Fatal("endpoint gone")
	}
}
