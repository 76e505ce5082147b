package latency

import (
	"testing"
	"time"
)

func TestNearestRank(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[len(d)-1-i] = time.Duration(i+1) * time.Millisecond // 100 ms … 1 ms, unsorted
	}
	p := Of(d)
	if p != (Percentiles{Count: 100, P50: 50, P90: 90, P99: 99, Max: 100}) {
		t.Fatalf("Of = %+v", p)
	}
	if q := OfMillis([]float64{3, 1, 2}); q != (Percentiles{Count: 3, P50: 2, P90: 3, P99: 3, Max: 3}) {
		t.Fatalf("OfMillis = %+v", q)
	}
	if (Of(nil) != Percentiles{}) || (OfMillis(nil) != Percentiles{}) {
		t.Fatal("empty input: want the zero summary")
	}
	if r := (Percentiles{P50: 1.234, P90: 2.345, P99: 3.456, Max: 4.5678}).Rounded(); r.P50 != 1.23 || r.Max != 4.57 {
		t.Fatalf("Rounded = %+v", r)
	}
}
