package controlplane

import (
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// A fleet of gateways on one control plane: 100 ADS streams, an origin of
// 800 endpoints. Every stream gets the same indices, and one endpoint
// replaced reaches all of them as one response each, holding the one
// changed cluster. The figures (response size, fan-out time) are logged.
func TestFanOutToAFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("100 streams")
	}
	addrs := endpoints(20001, 800)
	f := newFixture(t, map[string][]string{"payments": addrs, "search": endpoints(30001, 40)})
	f.opts.Debounce = -1
	cp := f.start()
	const gateways = 100
	clients := make([]*adsClient, gateways)
	for i := range clients {
		clients[i] = dialADS(t, cp.Addr(), "gw-"+string(rune('a'+i%26))+string(rune('a'+i/26)), []string{"payments", "search"}, nil)
	}
	first, subsets := indicesOf(t, clients[0].wait(1).clusters["payments"])
	for _, c := range clients[1:] {
		if got, _ := indicesOf(t, c.wait(1).clusters["payments"]); !maps.Equal(got, first) {
			t.Fatal("two gateways got different indices")
		}
	}
	cla, _ := cp.server.Assignment("payments")
	t.Logf("800 endpoints, %d subsets: the ClusterLoadAssignment is %d bytes", subsets, proto.Size(cla))

	replaced := append(slices.Clone(addrs[1:]), "127.0.0.1:29999")
	start := time.Now()
	f.setSource(map[string][]string{"payments": replaced, "search": endpoints(30001, 40)})
	for _, c := range clients {
		r := c.wait(2)
		if len(r.clusters) != 1 || r.clusters["payments"] == nil {
			t.Fatalf("the change reached a gateway as %d clusters, want payments alone", len(r.clusters))
		}
	}
	t.Logf("one endpoint replaced: %d gateways had the new assignment %v after the file was written (watch debounce %v, no control-plane debounce)",
		gateways, time.Since(start).Round(time.Millisecond), min(500*time.Millisecond, 10*time.Millisecond))
	next, _ := indicesOf(t, clients[gateways-1].wait(2).clusters["payments"])
	moved := 0
	for a, i := range next {
		if j, ok := first[a]; ok && i != j {
			moved++
		}
	}
	if moved != 0 {
		t.Fatalf("%d endpoints moved for one replaced, want 0 (the joiner takes the leaver's index)", moved)
	}
	for _, c := range clients {
		if c.count() != 2 {
			t.Fatalf("a gateway got %d responses, want 2", c.count())
		}
	}
}
