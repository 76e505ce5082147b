package dashboard

import (
	"testing"
	"time"
)

// TestSamplerSplitShares: the history carries each split route's request
// rate per target (corput_route_requests_total), the page's splits panel;
// a route with one origin is not a split and is left out.
func TestSamplerSplitShares(t *testing.T) {
	d, m, clk := newFake(t, time.Minute)
	m.RouteRequests.WithLabelValues("pay", "v1").Add(95)
	m.RouteRequests.WithLabelValues("pay", "v2").Add(5)
	m.RouteRequests.WithLabelValues("static", "cdn").Add(40)
	clk.Advance(time.Second)
	h := d.History()
	if len(h.Points) != 1 {
		t.Fatalf("%d points", len(h.Points))
	}
	s := h.Points[0].Splits
	if len(s) != 1 || s["pay"]["v1"] != 95 || s["pay"]["v2"] != 5 {
		t.Fatalf("splits %v; want pay: v1 95/s, v2 5/s, and no static", s)
	}
	if h.Points[0].Origins["cdn"].RequestsPerSec != 0 || len(h.Points[0].Origins) != 0 {
		t.Fatalf("route counts leaked into the origins' figures: %+v", h.Points[0].Origins)
	}
}
