package health

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/health/healthtest"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/upstream"
	"github.com/corput/corput/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is one origin's endpoints on real sockets, their balancer and one
// warm HTTP/1.1 pool each, on a fake clock, with a Checker.
type rig struct {
	t       *testing.T
	clk     *clock.Fake
	origins map[string]*healthtest.Origin
	addrs   []string
	bal     *balance.Origin
	pools   map[string]*pool.Pool
	c       *Checker
	hang    map[string]bool // endpoints whose probes wait for their timeout
	start   time.Time
}

func (r *rig) ProbePool(addr string) (*pool.Pool, bool) { return r.pools[addr], false }

// warmPools builds the balancer of an origin named name over ms (seeded
// with seed) and one warm pool of protocol per member into pools, on clk,
// with no idle or lifetime closes and no keepalive; tune edits the pools'
// configuration.
func warmPools(t *testing.T, clk *clock.Fake, name string, protocol upstream.Protocol, seed uint64, ms []balance.Member, pools map[string]*pool.Pool, tune ...func(*pool.Config)) *balance.Origin {
	t.Helper()
	bal, err := balance.NewOrigin(name, balance.DefaultConfig(), ms, balance.Options{Clock: clk, Rand: rng.New(seed)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := upstream.NewDialer(upstream.Options{Protocol: protocol, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := pool.DefaultConfig()
	cfg.IdleTimeout, cfg.MaxLifetime, cfg.Keepalive = 0, 0, 0
	for _, f := range tune {
		f(&cfg)
	}
	for i, m := range ms {
		if pools[m.Address], err = pool.New(m.Address, 0, cfg, d, clk, rng.New(uint64(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Until(t, "every pool warm", func() bool {
		for _, p := range pools {
			if !p.Ready() {
				return false
			}
		}
		return true
	})
	return bal
}

func newRig(t *testing.T, n int, hc config.HealthCheck, tune ...func(*pool.Config)) *rig {
	t.Helper()
	r := &rig{t: t, clk: clock.NewFake(time.Unix(1000, 0)), origins: map[string]*healthtest.Origin{}, pools: map[string]*pool.Pool{}, hang: map[string]bool{}}
	var ms []balance.Member
	for range n {
		o := healthtest.Start(t)
		r.origins[o.Addr()] = o
		r.addrs = append(r.addrs, o.Addr())
		ms = append(ms, balance.Member{Address: o.Addr()})
	}
	r.bal = warmPools(t, r.clk, "app", upstream.H1, 7, ms, r.pools, tune...)
	waitfor.Until(t, "the origins to count the warm connections", func() bool { return r.conns() == int64(n) })
	oc := config.DefaultOrigin()
	oc.Name, oc.HealthCheck = "app", &hc
	r.c = New(Env{Origin: "app", Clock: r.clk, Seed: 3, Balance: r.bal, Pools: r})
	r.c.Configure(&oc)
	r.c.Sync(r.addrs)
	r.start = r.clk.Now()
	t.Cleanup(func() {
		r.c.Close()
		for _, p := range r.pools {
			p.Close()
		}
		r.bal.Close()
	})
	return r
}

// quiet reports whether every probe in flight has ended, but those to a
// hanging endpoint still waiting for their timeout.
func (r *rig) quiet() bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for a, t := range r.c.targets {
		if t.running && !(r.hang[a] && !t.expired) {
			return false
		}
	}
	return true
}

// run moves the clock to d after the start, one timer at a time, letting
// the probes each timer starts end before the next.
func (r *rig) run(d time.Duration) {
	r.t.Helper()
	healthtest.Advance(r.t, r.clk, r.start.Add(d).Sub(r.clk.Now()), r.quiet)
}

// changedAt is when addr's check state last changed, since the start.
func (r *rig) changedAt(addr string) time.Duration {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.targets[addr].changedAt.Sub(r.start)
}

func (r *rig) probes() map[string]int64 {
	out := map[string]int64{}
	for a, o := range r.origins {
		out[a] = o.Probes.Load()
	}
	return out
}

func (r *rig) conns() int64 {
	var n int64
	for _, o := range r.origins {
		n += o.Conns.Load()
	}
	return n
}

// traffic ends a successful live request to every endpoint but skip every
// period on the fake clock, until stop is called.
func (r *rig) traffic(period time.Duration, skip map[string]bool) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var tick func()
	tick = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		for _, a := range r.addrs {
			if skip[a] {
				continue
			}
			p := r.bal.NewPicker([]string{a})
			ep, err := p.Pick()
			p.Close()
			if err == nil {
				ep.Done(5*time.Millisecond, balance.Success)
			}
		}
		r.clk.AfterFunc(period, tick)
	}
	r.clk.AfterFunc(0, tick)
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
}
