package subset

import "testing"

// The request path: a loop looks up its subset.
func BenchmarkMembers(b *testing.B) {
	fleet := Fleet{Gateways: 100, Loops: 16}
	snap := mustRing(b, Config{Origin: "o", Fleet: fleet}, addrs(800)).Snapshot()
	b.ReportAllocs()
	n := 0
	for i := 0; b.Loop(); i++ {
		n += len(snap.Members(i%fleet.Gateways, i%fleet.Loops))
	}
	if n == 0 {
		b.Fatal("no members")
	}
}

// Discovery's full rebuild: a 10 000-endpoint ring from scratch, and its
// snapshot.
func BenchmarkRingRebuild10000(b *testing.B) {
	list := addrs(10000)
	cfg := Config{Origin: "o", Fleet: Fleet{Gateways: 100, Loops: 16}}
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewRing(cfg, list)
		if err != nil {
			b.Fatal(err)
		}
		if r.Snapshot().Len() != 10000 {
			b.Fatal("wrong size")
		}
	}
}

// Discovery's usual path on a 10 000-endpoint ring: one endpoint replaced
// (a pod rescheduled), then the new snapshot.
func BenchmarkRingReplaceOne10000(b *testing.B) {
	r := mustRing(b, Config{Origin: "o", Fleet: Fleet{Gateways: 100, Loops: 16}}, addrs(10000))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := r.Remove(r.addrs[i%r.Len()]); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Add(addr(20000 + i)); err != nil {
			b.Fatal(err)
		}
		r.Snapshot()
		i++
	}
}

// The whole `corput subsets` default: 800 × 100 × 16, one trial.
func BenchmarkCompare800x100x16(b *testing.B) {
	sc := Scenario{Endpoints: 800, Fleet: Fleet{Gateways: 100, Loops: 16}, Trials: 1, Seed: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compare(sc, Algorithms()); err != nil {
			b.Fatal(err)
		}
	}
}
