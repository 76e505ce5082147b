package discovery_test

import (
	"fmt"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery"
)

// A Debouncer in front of the ring: the first membership applies at once,
// a burst of changes applies once, with the latest set, when the window
// has been quiet.
func ExampleDebouncer() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clk.Now()
	d := discovery.NewDebouncer(clk, func(u discovery.Update) {
		fmt.Printf("t=%v apply %s: %d endpoints\n", clk.Now().Sub(start), u.Origin, len(u.Endpoints))
	})
	defer d.Close()
	d.SetWindow("payments", 2*time.Second, 10*time.Second)

	member := func(n int) discovery.Update {
		u := discovery.Update{Origin: "payments"}
		for i := range n {
			u.Endpoints = append(u.Endpoints, discovery.Endpoint{Address: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1})
		}
		return u
	}
	d.Offer(member(3))
	for n := 4; n <= 8; n++ { // pods scaling up one by one, 100 ms apart
		clk.Advance(100 * time.Millisecond)
		d.Offer(member(n))
	}
	clk.Advance(time.Minute)
	// Output:
	// t=0s apply payments: 3 endpoints
	// t=2.5s apply payments: 8 endpoints
}

// Fleet position from a StatefulSet: the ordinal comes from the pod's
// hostname, the size from the environment.
func ExampleResolveFleet() {
	env := map[string]string{discovery.EnvFleetSize: "6"}
	f, err := discovery.ResolveFleet(discovery.FleetInputs{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Hostname:  "corput-4",
	})
	fmt.Println(f.Instance, f.Size, f.InstanceFrom, "|", f.SizeFrom, err)
	// Output: 4 6 hostname corput-4 | env CORPUT_FLEET_SIZE <nil>
}
