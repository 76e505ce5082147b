package balance

import (
	"fmt"
	"math"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// members returns n endpoints named 10.0.0.i:80, zones cycling through
// zones (none when zones is empty), weight 1.
func members(n int, zones ...string) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Address: fmt.Sprintf("10.0.0.%d:80", i), Weight: 1}
		if len(zones) > 0 {
			ms[i].Zone = zones[i%len(zones)]
		}
	}
	return ms
}

func addrs(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Address
	}
	return out
}

// fixture is an origin on a fake clock with a seeded source.
type fixture struct {
	t   testing.TB
	clk *clock.Fake
	o   *Origin
	obs *recorder
}

func newFixture(t testing.TB, cfg Config, ms []Member, seed uint64) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: clock.NewFake(epoch), obs: &recorder{}}
	o, err := NewOrigin("payments", cfg, ms, Options{Clock: f.clk, Rand: rng.New(seed), Observer: f.obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	f.o = o
	return f
}

// shares picks n times, ending each request at once with latency lat, and
// returns each address's share of the picks.
func shares(t testing.TB, p *Picker, n int, lat time.Duration) map[string]float64 {
	t.Helper()
	count := map[string]int{}
	for range n {
		ep, err := p.Pick()
		if err != nil {
			t.Fatal(err)
		}
		count[ep.Address()]++
		ep.Done(lat, Success)
	}
	out := map[string]float64{}
	for a, c := range count {
		out[a] = float64(c) / float64(n)
	}
	return out
}

// within fails unless got is within tol of want (both shares in [0, 1]).
func within(t testing.TB, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s: share %.4f, want %.4f ± %.4f", what, got, want, tol)
	}
}

// recorder is an Observer that keeps what it saw.
type recorder struct {
	ejections     []string
	ejectedCounts []int
	panics        []bool
	local, remote int
}

func (r *recorder) Ejected(addr, reason string, d time.Duration) {
	r.ejections = append(r.ejections, fmt.Sprintf("%s %s %v", addr, reason, d))
}
func (r *recorder) EjectedCount(n int) { r.ejectedCounts = append(r.ejectedCounts, n) }
func (r *recorder) PanicMode(on bool)  { r.panics = append(r.panics, on) }
func (r *recorder) ZonePick(local bool) {
	if local {
		r.local++
	} else {
		r.remote++
	}
}
