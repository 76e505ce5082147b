package health

import (
	"testing"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/health/healthtest"
	"github.com/corput/corput/internal/rng"
)

// TestFewerRequestsPayForIt: in one run on one clock, two balancers over
// the same 10 endpoints (real sockets) take the same live traffic, one
// with health checks at 1 s and one with passive ejection alone; one
// endpoint starts answering 503 to probes and requests alike. The checked
// balancer's requests fail less often at 1 req/s per endpoint (the
// passive one lets the endpoint back every time its ejection ends, and
// three more requests pay each time), and no more often at 200 req/s.
func TestFewerRequestsPayForIt(t *testing.T) {
	for _, c := range []struct {
		name   string
		period time.Duration // between two live requests to the origin
		run    time.Duration
		fewer  bool // the checks must cost strictly fewer failed requests
	}{
		{"1 req/s per endpoint", 100 * time.Millisecond, 5 * time.Minute, true},
		{"200 req/s", 5 * time.Millisecond, time.Minute, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			hc := check()
			hc.UnhealthyThreshold = 3
			r := newRig(t, 10, hc)
			passive, err := balance.NewOrigin("passive", balance.DefaultConfig(), membersOf(r.addrs), balance.Options{Clock: r.clk, Rand: rng.New(9)})
			if err != nil {
				t.Fatal(err)
			}
			defer passive.Close()
			pc, pp := r.bal.NewPicker(nil), passive.NewPicker(nil)
			defer pc.Close()
			defer pp.Close()
			sick := r.addrs[4]
			failed := map[string]int{}
			send := func(name string, p *balance.Picker) {
				ep, err := p.Pick()
				if err != nil {
					failed[name]++
					return
				}
				if r.origins[ep.Address()].Mode.Load() == healthtest.S503 {
					failed[name]++
					ep.Done(time.Millisecond, balance.ServerError)
					return
				}
				ep.Done(time.Millisecond, balance.Success)
			}
			var tick func()
			tick = func() {
				send("checked", pc)
				send("passive", pp)
				r.clk.AfterFunc(c.period, tick)
			}
			r.clk.AfterFunc(0, tick)
			r.run(5 * time.Second)
			r.origins[sick].Mode.Store(healthtest.S503)
			r.run(c.run)
			t.Logf("%s over %v, one endpoint of 10 answering 503: failed requests with checks at 1 s %d, passive alone %d",
				c.name, c.run-5*time.Second, failed["checked"], failed["passive"])
			switch {
			case c.fewer && failed["checked"] >= failed["passive"]:
				t.Fatalf("checks: %d failed requests, passive alone %d; want fewer", failed["checked"], failed["passive"])
			case failed["checked"] > failed["passive"]:
				t.Fatalf("checks: %d failed requests, passive alone %d; want no more", failed["checked"], failed["passive"])
			}
		})
	}
}

func membersOf(addrs []string) []balance.Member {
	out := make([]balance.Member, len(addrs))
	for i, a := range addrs {
		out[i] = balance.Member{Address: a}
	}
	return out
}
