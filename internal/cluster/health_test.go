package cluster

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/health"
	"github.com/corput/corput/internal/health/healthtest"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/waitfor"
)

// TestHealthChecksScaleWithTheSubset: 4 gateways × 2 loops × 64 endpoints
// on real sockets, subsets of 16. Each gateway probes exactly the union of
// its loops' subsets, once per interval whatever the number of its loops
// that hold an endpoint; the origins count every endpoint's probes at the
// number of gateways that hold it × the intervals, and none at an endpoint
// no gateway holds.
func TestHealthChecksScaleWithTheSubset(t *testing.T) {
	const gateways, loops, n = 4, 2, 64
	clk := clock.NewFake(time.Unix(1000, 0))
	srv := map[string]*healthtest.Origin{}
	oc := config.DefaultOrigin()
	oc.Name, oc.Protocol = "app", config.ProtocolH1
	oc.Subset.Size = 16
	oc.Pool.IdleTimeout, oc.Pool.MaxLifetime, oc.Pool.Keepalive = 0, 0, 0
	hc := config.DefaultHealthCheck()
	hc.Interval, hc.Jitter, hc.Timeout = time.Second, 100*time.Millisecond, 500*time.Millisecond
	oc.HealthCheck = &hc
	for range n {
		s := healthtest.Start(t)
		srv[s.Addr()] = s
		oc.Endpoints = append(oc.Endpoints, config.Endpoint{Address: s.Addr(), Weight: 1})
	}
	var os []*Origin
	holders := map[string]int{}
	for g := range gateways {
		o, err := New(&oc, &Env{Clock: clk, Log: slog.New(slog.DiscardHandler), Metrics: telemetry.New(), Loops: loops,
			Fleet: config.Fleet{Instance: g, Size: gateways}, Seed: uint64(g + 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(o.Close)
		os = append(os, o)
		var union []string
		for l := range loops {
			union = append(union, o.Loop(l).subset...)
		}
		slices.Sort(union)
		union = slices.Compact(union)
		if got := o.Health().Probed(); !slices.Equal(got, union) {
			t.Fatalf("gateway %d probes %v; want the union of its loops' subsets %v", g, got, union)
		}
		for _, a := range union {
			holders[a]++
		}
	}
	waitfor.Until(t, "every pool warm", func() bool {
		for _, o := range os {
			if !o.Ready() {
				return false
			}
		}
		return true
	})
	const run = 10 * time.Second
	healthtest.Advance(t, clk, run, func() bool {
		for _, o := range os {
			if o.Health().InFlight() != 0 {
				return false
			}
		}
		return true
	})
	var total, none int64
	for a, s := range srv {
		h, got := holders[a], s.Probes.Load()
		total += got
		if h == 0 {
			none++
		}
		// interval 1 s + jitter up to 100 ms: 9 or 10 probes in 10 s
		if lo, hi := int64(9*h), int64(10*h); got < lo || got > hi {
			t.Errorf("%s, held by %d gateways: %d probes in %v; want %d to %d", a, h, got, run, lo, hi)
		}
	}
	t.Logf("%d gateways × %d loops × %d endpoints, subsets of 16: %d probes in %v (%.2f per endpoint per second; every gateway probing every endpoint would be %.2f); %d endpoints held by no gateway",
		gateways, loops, n, total, run, float64(total)/n/run.Seconds(), float64(gateways)/1.05, none)

	// The admin view names each endpoint's health source.
	v := os[0].View()
	seen := 0
	for _, e := range v.Endpoints {
		if e.Check != nil {
			seen++
			if e.HealthSource != health.SourceProbe || e.Check.State != health.Healthy || e.Check.Probes == 0 {
				t.Errorf("%s: source %q, check %+v; want probe, healthy", e.Address, e.HealthSource, *e.Check)
			}
		}
	}
	if seen != len(os[0].Health().Probed()) {
		t.Errorf("%d endpoints show a check; want the %d probed", seen, len(os[0].Health().Probed()))
	}
}
