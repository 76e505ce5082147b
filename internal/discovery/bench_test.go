package discovery

import (
	"fmt"
	"strings"
	"testing"
)

// The discovery paths run once per membership change, not per request;
// these benchmarks keep their cost visible for a 200-endpoint origin.

func BenchmarkParseEndpoints200(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("endpoints:\n")
	for i := range 200 {
		fmt.Fprintf(&sb, "  - {address: 10.0.%d.%d:8080, zone: us-east-1%c, weight: %d}\n", i/250, i%250, 'a'+i%3, 1+i%4)
	}
	data := []byte(sb.String())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseEndpoints("bench", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEndpointsFromCLA200(b *testing.B) {
	var locs []locality
	for z := range 3 {
		l := locality{zone: fmt.Sprintf("us-east-1%c", 'a'+z)}
		for i := z; i < 200; i += 3 {
			l.eps = append(l.eps, lbe{fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250), uint32(1 + i%4), 0})
		}
		locs = append(locs, l)
	}
	c := cla("bench", locs...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EndpointsFromCLA(c); err != nil {
			b.Fatal(err)
		}
	}
}
