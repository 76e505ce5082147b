package balance

import (
	"testing"
	"time"
)

// A refused dial fails in microseconds. If Peak EWMA took that as a latency
// the refusing endpoint would look like the fastest, and in panic routing —
// one of four endpoints down is below the 80 % threshold — P2C would keep
// choosing it. The penalty sample keeps its share small, for least_work
// too, whose tie rule would otherwise take an endpoint that never answered
// for an unmeasured one and compare it by its load alone (50.8 % of the
// picks).
func TestConnectFailuresMakeAnEndpointExpensive(t *testing.T) {
	for _, pol := range []Policy{PeakEWMA, LeastWork} {
		t.Run(string(pol), func(t *testing.T) { testConnectFailuresMakeAnEndpointExpensive(t, pol) })
	}
}

func testConnectFailuresMakeAnEndpointExpensive(t *testing.T, pol Policy) {
	ms := members(4)
	f := newFixture(t, policyConfig(pol), ms, 11)
	p := f.o.NewPicker(nil)
	defer p.Close()
	dead := ms[0].Address
	// Its first three requests fail: ejected, and with one of four out the
	// origin routes in panic over all endpoints, the dead one included.
	only := f.o.NewPicker([]string{dead})
	for i := 0; i < 3; i++ {
		e, err := only.Pick()
		if err != nil || e.Address() != dead {
			t.Fatalf("the dead endpoint's own picker: %v, %v", e, err)
		}
		e.Done(50*time.Microsecond, ConnectFailure)
	}
	only.Close()
	if !f.o.Panic() {
		t.Fatal("one of four endpoints ejected should put the origin in panic routing (below 80 % healthy)")
	}
	if st := f.o.Endpoint(dead).Status(); st.EWMALatency < 300*time.Millisecond {
		t.Fatalf("EWMA after the failure run %v: want at least ten default RTTs (300ms)", st.EWMALatency)
	}
	picked := 0
	const n = 2000
	for i := 0; i < n; i++ {
		ep, err := p.Pick()
		if err != nil {
			t.Fatal(err)
		}
		if ep.Address() == dead {
			picked++
			ep.Done(50*time.Microsecond, ConnectFailure)
		} else {
			ep.Done(20*time.Millisecond, Success)
		}
		f.clk.Advance(5 * time.Millisecond)
	}
	if share := float64(picked) / n; share > 0.05 {
		t.Fatalf("the refusing endpoint got %.1f%% of %d picks in panic routing; want at most 5%%", 100*share, n)
	}
}

// Below the failure threshold a connect failure records nothing: the
// endpoint stays a candidate so that outlier detection sees its third
// failure and ejects it promptly (a penalty at the first failure would hide
// it from P2C and delay the ejection).
func TestConnectFailuresBelowTheThresholdRecordNoLatency(t *testing.T) {
	ms := members(4)
	f := newFixture(t, DefaultConfig(), ms, 3)
	e := f.o.Endpoint(ms[0].Address)
	before := e.Status().EWMALatency
	for i := 0; i < 2; i++ {
		e.active.Add(1)
		e.Done(50*time.Microsecond, ConnectFailure)
	}
	if got := e.Status().EWMALatency; got != before {
		t.Fatalf("EWMA moved from %v to %v on failures below the threshold", before, got)
	}
}
