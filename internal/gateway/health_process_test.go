package gateway

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/waitfor"
)

// TestHealthChecksOnRealProcessesFollowTheSubsets: 4 `corput serve`
// processes × 2 loops over 64 endpoints with subsets of 16, each probing
// on a path of its own: every endpoint is probed by exactly the gateways
// whose loops' subsets hold it (the origins' counts), never by another.
func TestHealthChecksOnRealProcessesFollowTheSubsets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 corput processes")
	}
	const gateways, endpoints = 4, 64
	var mu sync.Mutex
	probes := map[string]map[string]int{} // endpoint -> probe path -> count
	var addrs []string
	for range endpoints {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		addrs = append(addrs, addr)
		probes[addr] = map[string]int{}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			probes[addr][r.URL.Path]++
			mu.Unlock()
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	var eps strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&eps, "      - {address: %q}\n", a)
	}
	dir := t.TempDir()
	var procs []*serveProcess
	for i := range gateways {
		cfg := filepath.Join(dir, fmt.Sprintf("gw%d.yaml", i))
		writeFileAtomic(t, cfg, fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
fleet: {instance: %d, size: %d}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    subset: {size: 16}
    pool: {prewarm: 1}
    health_check: {path: /hz/gw%d, interval: 200ms, jitter: 50ms, timeout: 150ms}
    endpoints:
%s`, i, gateways, i, eps.String()))
		procs = append(procs, startServeWith(t, serveSpec{config: cfg}))
	}
	// Each gateway's union of its loops' subsets, from its /admin/subsets.
	holders := map[string][]int{}
	for i, p := range procs {
		waitfor.Until(t, fmt.Sprintf("gateway %d ready", i), func() bool { return statusOf(t, "http://"+p.admin+"/readyz") == 200 })
		v := subsetsOf(t, p)
		for _, e := range v.Endpoints {
			for _, u := range e.Users {
				if u.Gateway == v.Gateway {
					holders[e.Address] = append(holders[e.Address], i)
					break
				}
			}
		}
	}
	time.Sleep(2 * time.Second) // about 8 intervals
	mu.Lock()
	defer mu.Unlock()
	var probed, held int
	for _, a := range addrs {
		hold := map[int]bool{}
		for _, g := range holders[a] {
			hold[g] = true
		}
		held += len(hold)
		for g := range gateways {
			n := probes[a][fmt.Sprintf("/hz/gw%d", g)]
			switch {
			case hold[g] && n == 0:
				t.Errorf("endpoint %s: gateway %d holds it and never probed it", a, g)
			case !hold[g] && n > 0:
				t.Errorf("endpoint %s: gateway %d does not hold it and probed it %d times", a, g, n)
			}
			if n > 0 {
				probed++
			}
		}
		for path := range probes[a] {
			if !strings.HasPrefix(path, "/hz/gw") {
				t.Errorf("endpoint %s: a request for %s, want probes only", a, path)
			}
		}
	}
	t.Logf("%d gateways × 2 loops, %d endpoints, subsets of 16: %d (endpoint, gateway) pairs held, %d probed; against %d if every gateway probed every endpoint", gateways, endpoints, held, probed, gateways*endpoints)
}
