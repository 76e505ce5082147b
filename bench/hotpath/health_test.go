package hotpath

import (
	"testing"
)

// healthCheck is an origin's health_check block for the benchmarks: a
// probe due every second per endpoint, skipped while the benchmark's
// requests keep the endpoint busy.
const healthCheck = "    health_check: {path: /, interval: 1s, jitter: 100ms, timeout: 500ms}\n"

// TestFastPathHealthCheckAllocs: with active health checks configured, a
// fast path request still allocates nothing over real sockets (the whole
// process counted); the checks cost the request path only the balancer's
// record of its live outcome (two atomic stores).
func TestFastPathHealthCheckAllocs(t *testing.T) {
	const runs = 2000
	g := startGatewayWith(t, true, 1, healthCheck, startTinyOrigin(t))
	c := warmClient(t, g, 100)
	if allocs := testing.AllocsPerRun(runs, func() { mustGet(t, c) }); allocs != 0 {
		t.Errorf("a fast path request with health checks: %v allocs on average, want 0", allocs)
	}
}
