package subset

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// Scenario is one comparison: an origin of Endpoints endpoints served by
// Fleet, measured over Trials random memberships.
type Scenario struct {
	Endpoints int    // N (the CLI's --origins)
	Fleet     Fleet  // G gateways × K loops
	Size      int    // subset size, 0 = automatic (DefaultSizing)
	Trials    int    // random memberships averaged over
	Seed      uint64 // seeds memberships, event choices and comparators
	// Progress, if set, is called after each trial with the trials done.
	Progress func(done, trials int)
}

// maxWork bounds N·F: the comparators hash or draw every endpoint for
// every frontend, several times per trial.
const maxWork = 200_000_000

// Validate reports a scenario that cannot or should not run, naming the flag.
func (sc Scenario) Validate() error {
	switch {
	case sc.Endpoints < 2 || sc.Endpoints > 1_000_000:
		return fmt.Errorf("--origins %d: must be between 2 and 1000000 (endpoints of the origin)", sc.Endpoints)
	case sc.Fleet.Gateways < 1:
		return fmt.Errorf("--gateways %d: must be at least 1", sc.Fleet.Gateways)
	case sc.Fleet.Loops < 1:
		return fmt.Errorf("--loops %d: must be at least 1", sc.Fleet.Loops)
	case sc.Size < 0 || sc.Size == 1:
		return fmt.Errorf("--size %d: must be 0 (automatic) or at least 2", sc.Size)
	case sc.Trials < 1:
		return fmt.Errorf("--trials %d: must be at least 1", sc.Trials)
	case float64(sc.Endpoints)*float64(sc.Fleet.Frontends()) > maxWork:
		return fmt.Errorf("--origins × --gateways × --loops = %d: above %d, the comparison would take minutes; lower one of them",
			sc.Endpoints*sc.Fleet.Frontends(), maxWork)
	}
	return nil
}

// Report is the comparison's result, ranked best first. Its JSON form is the
// output of `corput subsets --json`.
type Report struct {
	Origins    int      `json:"origins"`
	Gateways   int      `json:"gateways"`
	Loops      int      `json:"loops"`
	Trials     int      `json:"trials"`
	Seed       uint64   `json:"seed"`
	Algorithms []Result `json:"algorithms"`
}

// Result is one algorithm's measurements, averaged over the trials.
type Result struct {
	Name       string   `json:"name"`
	Rank       int      `json:"rank"`
	Score      float64  `json:"score"`       // lower is better; see Rank
	Subsets    int      `json:"subsets"`     // distinct member sets among the frontends
	SubsetSize int      `json:"subset_size"` // mean members per frontend, rounded
	Coverage   Coverage `json:"coverage"`
	Churn      ChurnSet `json:"churn"`
}

// ChurnSet is the churn of each measured event, averaged over the trials.
type ChurnSet struct {
	AddEndpoint       Churn `json:"add_endpoint"`        // a new address, landing anywhere in sorted order
	RemoveEndpoint    Churn `json:"remove_endpoint"`     // a member chosen at random
	AddGateway        Churn `json:"add_gateway"`         // G → G+1
	SubsetCountChange Churn `json:"subset_count_change"` // S → 2S (subsets half as large)
}

// Score is the ranking rule: the coverage imbalance (max/mean − 1) plus the
// mean churn fraction of the routine events, one endpoint added and one
// removed. A 10 % hot spot weighs as much as a membership change that remakes
// 10 % of the pools. Fleet and subset-count changes are reported but not
// scored: they are rare, planned events.
func Score(c Coverage, addEndpoint, removeEndpoint Churn) float64 {
	return (c.MaxOverMean - 1) + (addEndpoint.Fraction+removeEndpoint.Fraction)/2
}

// Compare measures every algorithm in algs on sc and ranks them by Score,
// best first (ties by name).
func Compare(sc Scenario, algs []Algorithm) (Report, error) {
	if err := sc.Validate(); err != nil {
		return Report{}, err
	}
	sizing := FixedSize(sc.Size)
	if err := sizing.Validate(); err != nil {
		return Report{}, fmt.Errorf("--size %d: %w", sc.Size, err)
	}
	sums := make([]measurement, len(algs))
	for i := range sc.Trials {
		t := newTrial(sc, sizing, i)
		ids := interner{}
		endpoints := make([]int32, len(t.addrs))
		for j, a := range t.addrs {
			endpoints[j] = ids.id(a)
		}
		ids.id(t.newAddr)
		for j, alg := range algs {
			m, err := measure(alg, t, ids, endpoints)
			if err != nil {
				return Report{}, fmt.Errorf("%s: trial %d: %w", alg.Name(), i, err)
			}
			sums[j].add(m)
		}
		if sc.Progress != nil {
			sc.Progress(i+1, sc.Trials)
		}
	}
	rep := Report{Origins: sc.Endpoints, Gateways: sc.Fleet.Gateways, Loops: sc.Fleet.Loops, Trials: sc.Trials, Seed: sc.Seed}
	for j, alg := range algs {
		rep.Algorithms = append(rep.Algorithms, sums[j].result(alg.Name(), sc.Trials))
	}
	slices.SortStableFunc(rep.Algorithms, func(a, b Result) int {
		return cmp.Or(cmp.Compare(a.Score, b.Score), cmp.Compare(a.Name, b.Name))
	})
	for i := range rep.Algorithms {
		rep.Algorithms[i].Rank = i + 1
	}
	return rep, nil
}

// measurement is one algorithm's figures for one trial, or their sum.
type measurement struct {
	subsets, size float64
	coverage      Coverage
	churn         [len(events)]Churn
}

func measure(alg Algorithm, t *trial, ids interner, endpoints []int32) (measurement, error) {
	var m measurement
	base, err := alg.Place(t.params, t.addrs)
	if err != nil {
		return m, err
	}
	before := ids.intern(base.Assignment())
	m.coverage = coverage(before, endpoints, len(ids))
	m.subsets = float64(distinctSubsets(before))
	var pairs int
	for _, ms := range before {
		pairs += len(ms)
	}
	m.size = float64(pairs) / float64(len(before))
	for e, ev := range events {
		p, err := alg.Place(t.params, t.addrs)
		if err != nil {
			return m, err
		}
		if err := ev.apply(p, t); err != nil {
			return m, fmt.Errorf("%s: %w", ev.name, err)
		}
		m.churn[e] = churn(before, ids.intern(p.Assignment()), len(ids))
	}
	return m, nil
}

func (s *measurement) add(m measurement) {
	s.subsets += m.subsets
	s.size += m.size
	s.coverage = s.coverage.scaledSum(m.coverage, 1)
	for e := range s.churn {
		s.churn[e] = s.churn[e].scaledSum(m.churn[e], 1)
	}
}

// result turns the sums over trials into means.
func (s measurement) result(name string, trials int) Result {
	k := 1 / float64(trials)
	r := Result{
		Name:       name,
		Subsets:    int(math.Round(s.subsets * k)),
		SubsetSize: int(math.Round(s.size * k)),
		Coverage:   Coverage{}.scaledSum(s.coverage, k),
	}
	for e, ev := range events {
		*ev.of(&r.Churn) = Churn{}.scaledSum(s.churn[e], k)
	}
	r.Score = Score(r.Coverage, r.Churn.AddEndpoint, r.Churn.RemoveEndpoint)
	return r
}

// scaledSum returns c + k·d, field by field.
func (c Coverage) scaledSum(d Coverage, k float64) Coverage {
	return Coverage{MaxOverMean: c.MaxOverMean + k*d.MaxOverMean, MinOverMean: c.MinOverMean + k*d.MinOverMean, CV: c.CV + k*d.CV}
}

// scaledSum returns c + k·d, field by field.
func (c Churn) scaledSum(d Churn, k float64) Churn {
	return Churn{
		PairsChanged: c.PairsChanged + k*d.PairsChanged, PairsCreated: c.PairsCreated + k*d.PairsCreated,
		PairsRemoved: c.PairsRemoved + k*d.PairsRemoved, Fraction: c.Fraction + k*d.Fraction,
		FrontendsTouched: c.FrontendsTouched + k*d.FrontendsTouched,
	}
}

// WriteTable prints the ranking as an aligned table, best first.
func (rep Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "subsetting: %d endpoints, %d gateways × %d loops = %d frontends; %d trials, seed %d\n",
		rep.Origins, rep.Gateways, rep.Loops, rep.Gateways*rep.Loops, rep.Trials, rep.Seed)
	fmt.Fprintln(w, "coverage: frontends per endpoint; churn: pairs changed as % of all pairs / frontends touched")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "rank\talgorithm\tsubsets\tsize\tmax/mean\tmin/mean\tcv")
	for _, ev := range events {
		fmt.Fprintf(tw, "\t%s", ev.name)
	}
	fmt.Fprintln(tw, "\tscore")
	for _, r := range rep.Algorithms {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.3f\t%.3f\t%.3f", r.Rank, r.Name, r.Subsets, r.SubsetSize,
			r.Coverage.MaxOverMean, r.Coverage.MinOverMean, r.Coverage.CV)
		for _, ev := range events {
			c := *ev.of(&r.Churn)
			fmt.Fprintf(tw, "\t%.2f%% / %.0f", 100*c.Fraction, c.FrontendsTouched)
		}
		fmt.Fprintf(tw, "\t%.4f\n", r.Score)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "score = (max/mean − 1) + mean churn fraction of add_endpoint and remove_endpoint; lower ranks first")
	return nil
}
