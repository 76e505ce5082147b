package dashboard

import (
	"testing"
	"time"
)

// TestSamplerMirrorsByRoute: the routes' mirror counters reach the
// history by route: their shadow, totals with the drops by reason, and
// rates per interval; they are not taken for the shadow origin's own
// figures.
func TestSamplerMirrorsByRoute(t *testing.T) {
	d, m, clk := newFake(t, time.Minute)
	m.RouteMirrored.WithLabelValues("pay", "shadow").Add(8)
	m.RouteMirrorDropped.WithLabelValues("pay", "shadow", "max_in_flight").Add(3)
	m.RouteMirrorDropped.WithLabelValues("pay", "shadow", "failed").Add(1)
	clk.Advance(2 * time.Second)

	h := d.History()
	tot := h.MirrorTotals["pay"]
	if tot.Origin != "shadow" || tot.Mirrored != 8 || tot.Dropped["max_in_flight"] != 3 || tot.Dropped["failed"] != 1 {
		t.Fatalf("mirror totals %+v", h.MirrorTotals)
	}
	if r := h.Points[0].Mirrors["pay"]; r.MirroredPerSec != 8 || r.DroppedPerSec != 4 {
		t.Fatalf("first interval's mirror rates %+v; want 8 and 4 a second", r)
	}
	if r := h.Points[1].Mirrors["pay"]; r.MirroredPerSec != 0 || r.DroppedPerSec != 0 {
		t.Fatalf("second interval's mirror rates %+v; want none", r)
	}
	if f, ok := h.Points[0].Origins["shadow"]; ok && f.RequestsPerSec != 0 {
		t.Fatalf("mirrors counted as the shadow origin's requests: %+v", f)
	}
}
