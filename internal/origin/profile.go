package origin

import (
	"fmt"
	"sort"
	"strings"

	"github.com/corput/corput/internal/workload"
)

// profiles are the presets of `corput origin --profile`. Every class
// profile has 8 workers, as the origins of the peer benchmarks
// (docs/references.md: 4 origins × 8 workers).
var profiles = map[string]func(*Options){
	// default: the 70/30 mix at its nominal latencies.
	"default": func(*Options) {},
	// slow: the seed's degraded endpoint, 5× slower.
	"slow": func(o *Options) { o.Slowdown = 5 },
	// cold: a JIT cold start, 10× slow decaying to 1× over 40 s.
	"cold": func(o *Options) { o.Warmup = workload.Cold() },
	// flaky: one request in five is answered 500.
	"flaky": func(o *Options) { o.ErrorRate = 0.2 },
	// failing: every request is answered 500.
	"failing": func(o *Options) { o.ErrorRate = 1 },
	// raw: no classes, no worker bound: every path is a tiny immediate 200
	// for throughput tests (not balancer evidence).
	"raw": func(o *Options) { o.Classes, o.Workers = nil, 0 },
}

// ProfileNames lists the profiles, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Profile returns the options of the named profile, on a free loopback
// port, speaking HTTP/1.1.
func Profile(name string) (Options, error) {
	apply, ok := profiles[name]
	if !ok {
		return Options{}, fmt.Errorf("origin: profile %q: want one of %s", name, strings.Join(ProfileNames(), ", "))
	}
	o := Options{Profile: name, Workers: 8, Classes: workload.Default().Classes}
	apply(&o)
	return o, nil
}
