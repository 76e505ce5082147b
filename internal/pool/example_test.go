package pool_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
)

// A pool driven on virtual time, the way the lab's simulator drives it: one
// goroutine, callbacks, a fake clock as the event queue.
func Example() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	origin := memconn.New(clk, memconn.Config{Streams: 1, DialLatency: 2 * time.Millisecond})
	cfg := pool.DefaultConfig()
	cfg.MaxConnections, cfg.Prewarm = 1, 0
	tally := &pool.Tally{}
	p, err := pool.New("10.0.0.1:443", 0, cfg, origin, clk, rng.New(1), tally)
	if err != nil {
		panic(err)
	}
	defer p.Close()

	start := clk.Now()
	report := func(name string) func(pool.Lease, error) {
		return func(l pool.Lease, err error) {
			fmt.Printf("%-6s at %v: err=%v\n", name, clk.Now().Sub(start), err)
			if err == nil {
				clk.AfterFunc(5*time.Millisecond, l.Release) // the request takes 5ms
			}
		}
	}
	p.AcquireAsync(report("first"))  // dials
	p.AcquireAsync(report("second")) // waits for the first's release
	clk.Advance(time.Millisecond)
	p.AcquireAsync(report("third"))
	clk.Advance(time.Second)
	fmt.Println("connections created:", tally.Created())

	// With over_cap: reject, a request at the cap fails at once.
	cfg.OverCap = pool.Reject
	r, _ := pool.New("10.0.0.2:443", 0, cfg, origin, clk, rng.New(2), nil)
	defer r.Close()
	r.AcquireAsync(func(pool.Lease, error) {}) // holds its stream
	clk.Advance(2 * time.Millisecond)
	r.AcquireAsync(func(_ pool.Lease, err error) { fmt.Println("reject:", errors.Is(err, pool.ErrOverCap)) })
	// Output:
	// first  at 2ms: err=<nil>
	// second at 7ms: err=<nil>
	// third  at 12ms: err=<nil>
	// connections created: 1
	// reject: true
}
