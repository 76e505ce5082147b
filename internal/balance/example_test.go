package balance_test

import (
	"fmt"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
)

// A loop picks within its subset, admits, forwards and reports the result.
// 10.0.0.2 answers 503: its third 5xx in a row ejects it for 30 s and the
// loop goes on with the rest of its subset; it then returns in slow start.
func Example() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var members []balance.Member
	for i := range 5 {
		members = append(members, balance.Member{Address: fmt.Sprintf("10.0.0.%d:80", i), Weight: 1})
	}
	origin, err := balance.NewOrigin("payments", balance.DefaultConfig(), members, balance.Options{Clock: clk, Rand: rng.New(1)})
	if err != nil {
		panic(err)
	}
	defer origin.Close()
	loop := origin.NewPicker([]string{"10.0.0.1:80", "10.0.0.2:80"}) // this loop's subset

	status := func(addr string) int {
		if addr == "10.0.0.2:80" {
			return 503
		}
		return 200
	}
	for range 8 {
		ep, err := loop.Pick()
		if err != nil { // balance.ErrNoHealthy: 503, X-Corput-Error: no_healthy
			fmt.Println(err)
			continue
		}
		if !ep.TryAdmit() { // 503, Retry-After: 1, X-Corput-Error: pending_full
			ep.Done(0, balance.Shed)
			continue
		}
		// ... acquire a connection, leave the pending queue, forward ...
		ep.Release()
		code := status(ep.Address())
		ep.Done(12*time.Millisecond, balance.OutcomeOf(code))
		fmt.Println(ep.Address(), code)
	}
	fmt.Println("candidates:", loop.Candidates())
	clk.Advance(30 * time.Second)
	fmt.Println("after 30s:", loop.Candidates(), origin.Endpoint("10.0.0.2:80").Status().EffectiveWeight)
	// Output:
	// 10.0.0.1:80 200
	// 10.0.0.2:80 503
	// 10.0.0.1:80 200
	// 10.0.0.2:80 503
	// 10.0.0.1:80 200
	// 10.0.0.2:80 503
	// 10.0.0.1:80 200
	// 10.0.0.1:80 200
	// candidates: [10.0.0.1:80]
	// after 30s: [10.0.0.1:80 10.0.0.2:80] 0.1
}
