package controlplane

import (
	"log/slog"
	"maps"
	"path/filepath"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/corput/corput/internal/discovery/xdstest"
	"github.com/corput/corput/internal/testlog"
)

// Relay mode: the control plane follows an upstream go-control-plane
// server's EDS for the named clusters and republishes it with indices
// added. Only the endpoints a gateway would use (HEALTHY or UNKNOWN, of
// the lowest usable priority) are indexed, so the indices are dense over
// exactly the set the gateways place. Upstream changes are relayed by the
// ring's rules.
func TestRelayAddsIndicesToAnUpstreamServer(t *testing.T) {
	up := xdstest.New(t, "127.0.0.1:0")
	healthy := corev3.HealthStatus_HEALTHY
	eps := func(addrs ...string) []xdstest.Endpoint {
		var out []xdstest.Endpoint
		for i, a := range addrs {
			out = append(out, xdstest.Endpoint{Addr: a, Zone: []string{"a", "b"}[i%2], Weight: uint32(1 + i%3), Health: healthy})
		}
		return out
	}
	base := endpoints(13001, 40)
	upstream := append(eps(base...),
		xdstest.Endpoint{Addr: "127.0.0.1:13998", Health: corev3.HealthStatus_UNHEALTHY},
		xdstest.Endpoint{Addr: "127.0.0.1:13999", Priority: 1, Health: healthy})
	up.MustSet(t, "relay-0", "u1", xdstest.CLA("payments", upstream...), xdstest.CLA("search", eps(endpoints(14001, 5)...)...))

	logger, _ := testlog.New(slog.LevelDebug)
	dir := t.TempDir()
	cp, err := Start(Options{Listen: "127.0.0.1:0", StatePath: filepath.Join(dir, "state.json"), Relay: up.Addr(), RelayNodeID: "relay-0",
		Clusters: []string{"payments", "search"}, Debounce: 50 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	ads := dialADS(t, cp.Addr(), "gw-0", []string{"payments", "search"}, nil)
	got := map[string]map[string]int{}
	for n := 1; len(got) < 2; n++ {
		for name, cla := range ads.wait(n).clusters {
			got[name], _ = indicesOf(t, cla)
		}
	}
	if len(got["payments"]) != 40 {
		t.Fatalf("payments relayed with %d endpoints, want the 40 healthy ones of priority 0", len(got["payments"]))
	}
	if _, ok := got["payments"]["127.0.0.1:13998"]; ok {
		t.Fatal("an unhealthy upstream endpoint was indexed")
	}
	seen := map[int]bool{}
	for _, i := range got["payments"] {
		seen[i] = true
	}
	for i := range 40 {
		if !seen[i] {
			t.Fatalf("index %d missing: indices are not dense", i)
		}
	}
	cla, _ := cp.server.Assignment("payments")
	for _, loc := range cla.GetEndpoints() {
		for _, lbe := range loc.GetLbEndpoints() {
			if sa := lbe.GetEndpoint().GetAddress().GetSocketAddress(); sa.GetPortValue() == 13002 && (loc.GetLocality().GetZone() != "b" || lbe.GetLoadBalancingWeight().GetValue() != 2) {
				t.Errorf("zone and weight not relayed: %s weight %d", loc.GetLocality().GetZone(), lbe.GetLoadBalancingWeight().GetValue())
			}
		}
	}
	if len(got["search"]) != 5 {
		t.Fatalf("search relayed with %d endpoints, want 5", len(got["search"]))
	}

	// Upstream adds one endpoint: relayed with the next index; search is
	// not sent again.
	n := ads.count()
	up.MustSet(t, "relay-0", "u2", xdstest.CLA("payments", append(upstream, eps("127.0.0.1:13500")...)...), xdstest.CLA("search", eps(endpoints(14001, 5)...)...))
	r := ads.wait(n + 1)
	if _, again := r.clusters["search"]; again || r.clusters["payments"] == nil {
		t.Fatalf("the response after an upstream change of payments holds %v; want payments only", maps.Keys(r.clusters))
	}
	next, _ := indicesOf(t, r.clusters["payments"])
	if next["127.0.0.1:13500"] != 40 {
		t.Fatalf("the relayed new endpoint has index %d, want 40", next["127.0.0.1:13500"])
	}
	delete(next, "127.0.0.1:13500")
	if !maps.Equal(next, got["payments"]) {
		t.Fatal("an upstream add moved relayed endpoints")
	}
	if up.Acked("u2") != true {
		t.Error("the relay did not ACK the upstream's version")
	}
}
