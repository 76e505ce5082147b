package subset_test

import (
	"fmt"

	"github.com/corput/corput/internal/subset"
)

// A ring of 8 endpoints shared by 2 gateways with 2 loops each, in subsets of
// at most 2: S = 4, each subset used by one frontend. Adding an endpoint
// changes one loop's subset, and only by that endpoint.
func ExampleRing() {
	var endpoints []string
	for i := range 8 {
		endpoints = append(endpoints, fmt.Sprintf("10.0.0.%d:80", i))
	}
	ring, err := subset.NewRing(subset.Config{
		Origin: "payments",
		Sizing: subset.FixedSize(2),
		Fleet:  subset.Fleet{Gateways: 2, Loops: 2},
	}, endpoints)
	if err != nil {
		panic(err)
	}
	old := ring.Snapshot()
	for g := range 2 {
		for l := range 2 {
			fmt.Printf("gateway %d loop %d: subset %d %v\n", g, l, old.SubsetOf(g, l), old.Members(g, l))
		}
	}
	ring.Add("10.0.0.8:80")
	for g := range 2 {
		for _, c := range subset.Diff(old, ring.Snapshot(), g) {
			fmt.Printf("gateway %d loop %d: +%v -%v\n", g, c.Loop, c.Added, c.Removed)
		}
	}
	// Output:
	// gateway 0 loop 0: subset 0 [10.0.0.5:80 10.0.0.3:80]
	// gateway 0 loop 1: subset 2 [10.0.0.7:80 10.0.0.1:80]
	// gateway 1 loop 0: subset 1 [10.0.0.6:80 10.0.0.0:80]
	// gateway 1 loop 1: subset 3 [10.0.0.2:80 10.0.0.4:80]
	// gateway 0 loop 0: +[10.0.0.8:80] -[]
}
