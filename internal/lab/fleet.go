package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/report"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/workload"
)

// The fleet experiment (docs/lab.md, section 8): a gateway fleet in front of one origin
// through a rolling deploy of every endpoint, during which some gateways
// restart. Unlike the other fleet experiments, every gateway holds its own
// subset.Ring, so placement is per gateway as in corput serve:
//
//   - local placement (today): each gateway's ring follows its own history.
//     A gateway builds its ring from the membership it starts with (sorted,
//     shuffled by the origin's name) and then applies every change as
//     Remove/Add deltas, as cluster.Origin.Apply does; a restarted gateway
//     builds a new ring from the membership it sees then;
//   - shared indices: a control-plane ring sees every change (the same
//     deltas) and after each one every gateway Places the control plane's
//     indices and subset count (subset.Ring.Place); a restarted gateway
//     Places them at start.
//
// The deltas, the pools and the pickers are the gateway's: only loops whose
// subset changed (subset.Diff) drain pools and take a new subset.

// fleetRingsRun is one run of the fleet experiment: a variant (subset
// sizing and deploy style) and a placement mode.
type fleetRingsRun struct {
	FleetVariant
	shared bool // shared indices from a control plane
}

// The deploy styles.
const (
	// deployReplace replaces a batch in one membership update (remove the
	// old endpoints, add the new ones), as the steps' deploy does: the
	// endpoint count never changes.
	deployReplace = "replace"
	// deploySurge adds the new batch first and removes the old one
	// SurgeOverlap later, as a Kubernetes Deployment with maxSurge does:
	// the count rises by a batch during each step.
	deploySurge = "surge"
)

func (v FleetVariant) deploy() string {
	if v.Surge {
		return deploySurge
	}
	return deployReplace
}

func (r fleetRingsRun) placement() string {
	if r.shared {
		return placementShared
	}
	return placementLocal
}

// The placement modes, as corput_subset_placement's mode label names them.
const (
	placementLocal  = "local"
	placementShared = "shared"
)

// fleetRingsRuns are, for every variant of the scenario, local placement
// then shared indices.
func fleetRingsRuns(fr FleetRingsScenario) []fleetRingsRun {
	var runs []fleetRingsRun
	for _, v := range fr.Variants {
		runs = append(runs, fleetRingsRun{FleetVariant: v}, fleetRingsRun{FleetVariant: v, shared: true})
	}
	return runs
}

// FleetRingsResult is one run's coverage and request spread at the end of
// the deploy.
type FleetRingsResult struct {
	Placement  string `json:"placement"`   // local or shared
	SubsetSize int    `json:"subset_size"` // subset.size; 0 is automatic
	Deploy     string `json:"deploy"`      // replace or surge
	Subsets    int    `json:"subsets"`     // the subset count S most of the fleet's rings use at the end (the smaller on a tie)
	// SubsetCounts lists the distinct subset counts the gateways' rings
	// hold at the end, ascending.
	SubsetCounts []int `json:"subset_counts"`
	Gateways     int   `json:"gateways"`
	Loops        int   `json:"loops"`
	Endpoints    int   `json:"endpoints"`
	// Restarted is how many gateways restarted during the deploy; Rings
	// how many distinct rings (index order and subset count) the fleet
	// holds at the end.
	Restarted int `json:"gateways_restarted"`
	Rings     int `json:"distinct_rings"`

	// Coverage is frontends per endpoint at the end: how many (gateway,
	// loop) pairs have the endpoint in their subset.
	CoverageMin      int       `json:"coverage_min"`
	CoverageMax      int       `json:"coverage_max"`
	CoverageMean     float64   `json:"coverage_mean"`
	CoverageMinOver  float64   `json:"coverage_min_over_mean"`
	CoverageMaxOver  float64   `json:"coverage_max_over_mean"`
	UnusedEndpoints  int       `json:"endpoints_unused"`
	CoverageSorted   []int     `json:"coverage_per_endpoint_sorted"`
	CoverageOverTime []float64 `json:"coverage_max_over_mean_per_second"`

	// Requests each endpoint received in the measuring window, ÷ the mean.
	Window          time.Duration `json:"window_ns"`
	WindowRequests  int64         `json:"window_requests"`
	RequestsMinOver float64       `json:"requests_min_over_mean"`
	RequestsMaxOver float64       `json:"requests_max_over_mean"`
	RequestsSorted  []float64     `json:"requests_per_endpoint_sorted_over_mean"`
	Latency         Percentiles   `json:"latency"` // of the window's requests
	Errors          int64         `json:"errors"`
	Shed            int64         `json:"shed"`
}

// Name labels the run: its sizing, deploy and placement.
func (r FleetRingsResult) Name() string {
	return fmt.Sprintf("%s, %s, %s", sizingLabel(r.SubsetSize, r.Subsets, r.Endpoints), r.Deploy, r.Placement)
}

func (r FleetRingsResult) variant() FleetVariant {
	return FleetVariant{SubsetSize: r.SubsetSize, Surge: r.Deploy == deploySurge}
}

// sizingLabel names a subset sizing by what it gives: "16 subsets of 50
// (automatic)".
func sizingLabel(size, subsets, endpoints int) string {
	how := "automatic"
	if size > 0 {
		how = fmt.Sprintf("subset.size %d", size)
	}
	if subsets == 0 {
		return how
	}
	noun := "subsets"
	if subsets == 1 {
		noun = "subset"
	}
	return fmt.Sprintf("%d %s of %g (%s)", subsets, noun, math.Round(10*float64(endpoints)/float64(subsets))/10, how)
}

// ringFleet is the placement side of one run: every gateway's ring and
// snapshot, and for shared indices the control plane's ring.
type ringFleet struct {
	e         *engine
	shared    bool
	cfg       subset.Config
	cp        *subset.Ring
	rings     []*subset.Ring
	snaps     []*subset.Snapshot
	restarted int
	cover     []int     // frontends per endpoint, by instance id, for the current rings
	ratio     float64   // coverage max/mean of the current members
	series    []float64 // ratio per virtual second
}

// newRing is a gateway's ring at (re)start: built from the current
// membership, then, with shared indices, placed by the control plane's.
func (rf *ringFleet) newRing() (*subset.Ring, error) {
	ring, err := subset.NewRing(rf.cfg, addrsOf(rf.e.members))
	if err != nil {
		return nil, err
	}
	if rf.shared {
		if _, err := ring.Place(rf.cp.Indices(), rf.cp.Subsets()); err != nil {
			return nil, err
		}
	}
	return ring, nil
}

// setMembers applies a membership change on every gateway, as
// engine.setMembers does on the fleet's one placement: the balancers keep
// survivors' state, each gateway's ring changes (by its own deltas, or to
// the control plane's indices), and only loops whose subset changed touch
// their pools.
func (rf *ringFleet) setMembers(next []*instance) error {
	e := rf.e
	added, removed := delta(e.members, next)
	ms := membersOf(next)
	apply := func(r *subset.Ring) error {
		for _, a := range removed {
			if _, err := r.Remove(a); err != nil {
				return err
			}
		}
		for _, a := range added {
			if _, err := r.Add(a); err != nil {
				return err
			}
		}
		return nil
	}
	var indices map[string]int
	if rf.shared {
		if err := apply(rf.cp); err != nil {
			return err
		}
		indices = rf.cp.Indices()
	}
	for g, gw := range e.gws {
		if err := gw.bal.Update(ms); err != nil {
			return fmt.Errorf("gateway %d: %w", g, err)
		}
		ring := rf.rings[g]
		if rf.shared {
			if _, err := ring.Place(indices, rf.cp.Subsets()); err != nil {
				return fmt.Errorf("gateway %d: %w", g, err)
			}
		} else if err := apply(ring); err != nil {
			return fmt.Errorf("gateway %d: %w", g, err)
		}
		snap := ring.Snapshot()
		for _, ch := range subset.Diff(rf.snaps[g], snap, g) {
			l := gw.loops[ch.Loop]
			for _, a := range ch.Removed {
				drain(l.pools, e.byAddr[a].id)
			}
			l.picker.SetSubset(snap.Members(g, ch.Loop))
		}
		gw.placed(snap)
		for _, a := range removed {
			id := e.byAddr[a].id
			for _, l := range gw.loops {
				drain(l.pools, id) // an on-demand pool outside the subset
			}
		}
		rf.snaps[g] = snap
	}
	e.members = next
	rf.recount()
	return nil
}

// restart replaces gateway g by a new process: every pool drained, a new
// balancer (every member warm, as at any start), and a ring built from the
// membership it sees now. Its arrivals carry on (the front load balancer
// keeps sending it its share); requests in flight finish on the old
// process's drained pools.
func (rf *ringFleet) restart(g int) error {
	e := rf.e
	gw := e.gws[g]
	for _, l := range gw.loops {
		for id := range l.pools {
			drain(l.pools, id)
		}
	}
	ring, err := rf.newRing()
	if err != nil {
		return fmt.Errorf("gateway %d restart: %w", g, err)
	}
	snap := ring.Snapshot()
	fresh, err := e.newGateway(g, snap)
	if err != nil {
		return err
	}
	// The new process: its balancer, its loops with their own pools, and
	// its driver over them, with in-flight counts of its own; the old
	// process's requests finish on the old loops' pools, through the old
	// driver.
	for l, fl := range fresh.loops {
		fl.gw, fl.requests = gw, gw.loops[l].requests
	}
	fresh.set.g = gw
	gw.bal, gw.loops, gw.set, gw.drv = fresh.bal, fresh.loops, fresh.set, fresh.drv
	rf.rings[g], rf.snaps[g] = ring, snap
	rf.restarted++
	rf.recount()
	return nil
}

// recount recomputes frontends per endpoint from every gateway's current
// subsets.
func (rf *ringFleet) recount() {
	e := rf.e
	rf.cover = slices.Grow(rf.cover[:0], len(e.insts))[:len(e.insts)]
	clear(rf.cover)
	for g, snap := range rf.snaps {
		for l := range e.o.loops {
			for _, a := range snap.Members(g, l) {
				rf.cover[e.byAddr[a].id]++
			}
		}
	}
	_, hi := rf.coverage()
	rf.ratio = hi
}

// coverage returns min/mean and max/mean of the current members'
// coverage.
func (rf *ringFleet) coverage() (lo, hi float64) {
	vs := make([]float64, len(rf.e.members))
	for i, in := range rf.e.members {
		vs[i] = float64(rf.cover[in.id])
	}
	return overMean3(vs)
}

// distinctRings counts the distinct rings the fleet holds (index order and
// subset count) and returns the distinct subset counts, ascending, and the
// one most gateways hold.
func (rf *ringFleet) distinctRings() (rings int, counts []int, usual int) {
	seen := map[string]bool{}
	held := map[int]int{}
	for _, r := range rf.rings {
		snap := r.Snapshot()
		var b strings.Builder
		fmt.Fprintf(&b, "%d|", snap.Subsets())
		for _, ep := range snap.Endpoints() {
			b.WriteString(ep.Address)
			b.WriteByte(',')
		}
		seen[b.String()] = true
		if held[snap.Subsets()]++; held[snap.Subsets()] == 1 {
			counts = append(counts, snap.Subsets())
		}
	}
	slices.Sort(counts)
	for _, c := range counts {
		if held[c] > held[usual] {
			usual = c
		}
	}
	return len(seen), counts, usual
}

// restartPlan draws which gateways restart during the deploy and when:
// round(share × gateways) of them, each at a uniform instant in
// [from, to). It depends on the seed only, so both placements restart the
// same gateways at the same instants.
func restartPlan(seed uint64, gateways int, share float64, from, to time.Duration) map[int]time.Duration {
	r := rng.New(rng.Mix64(seed ^ 0x72657374617274))
	order := make([]int, gateways)
	for i := range order {
		order[i] = i
	}
	for i := len(order) - 1; i > 0; i-- {
		j := r.IntN(i + 1)
		order[i], order[j] = order[j], order[i]
	}
	n := int(math.Round(share * float64(gateways)))
	plan := make(map[int]time.Duration, n)
	for _, g := range order[:n] {
		plan[g] = from + time.Duration(r.Float64()*float64(to-from)).Truncate(time.Millisecond)
	}
	return plan
}

// fleetBalance is the fleet experiment's balancer: the defaults with
// peak_ewma, whose rotation and tie rule place requests as evenly as the
// subsets let them, so that requests per endpoint measure the placement.
// least_work (the default) balances work, not requests: under the 70/30
// mix its heavy requests' extra candidates are random, and requests per
// endpoint spread 1.066–1.072× the mean with shared indices (inside the
// even-load target of 0.85–1.15×, outside this check's 1.05; docs/lab.md).
func fleetBalance() balance.Config {
	c := balance.DefaultConfig()
	c.Policy = balance.PeakEWMA
	return c
}

// runFleetRings simulates one run: the fleet starts warm on generation 0,
// the rolling deploy replaces every endpoint by a new (cold) one a batch
// at a time, the planned gateways restart meanwhile, and the window at the
// end counts the requests each endpoint received.
func runFleetRings(ctx context.Context, sc *Scenario, run fleetRingsRun, tick func()) (FleetRingsResult, error) {
	fr, f := sc.FleetRings, sc.Fleet
	sizing := subset.FixedSize(run.SubsetSize)
	e := newEngine(sc.Seed, sc.Mix, fleetOptions{
		gateways: fr.Gateways, loops: fr.Loops, algorithm: subset.NameRingsteady, sizing: sizing,
		scope: perLoop, pool: fleetPool(), conn: memconn.Config{Streams: f.Streams, DialLatency: f.DialLatency},
		balance: fleetBalance(), workers: f.Workers, retries: 1,
	})
	e.rec.from = fr.MeasureFrom
	fail := func(err error) (FleetRingsResult, error) {
		return FleetRingsResult{}, fmt.Errorf("fleet %s, %s deploy, %s: %w", sizingLabel(run.SubsetSize, 0, 0), run.deploy(), run.placement(), err)
	}
	for i := range fr.Endpoints {
		e.members = append(e.members, e.newInstance(address(0, i), 1, workload.Warmup{}, 0))
	}
	rf := &ringFleet{e: e, shared: run.shared,
		cfg: subset.Config{Origin: "origin", Sizing: sizing, Fleet: subset.Fleet{Gateways: fr.Gateways, Loops: fr.Loops}}}
	if run.shared {
		cp, err := subset.NewRing(rf.cfg, addrsOf(e.members))
		if err != nil {
			return fail(err)
		}
		rf.cp = cp
	}
	for g := range fr.Gateways {
		ring, err := rf.newRing()
		if err != nil {
			return fail(err)
		}
		snap := ring.Snapshot()
		gw, err := e.newGateway(g, snap)
		if err != nil {
			return fail(err)
		}
		rf.rings, rf.snaps, e.gws = append(rf.rings, ring), append(rf.snaps, snap), append(e.gws, gw)
	}
	rf.recount()
	for _, g := range e.gws {
		g.start(fr.RatePerGateway)
	}
	batches := (fr.Endpoints + fr.DeployBatch - 1) / fr.DeployBatch
	for b := range batches {
		// Batch b is the initial instances b·batch.. (ids are dense in
		// creation order); each is replaced by a new, cold one.
		old := func(in *instance) bool {
			return in.id >= b*fr.DeployBatch && in.id < min(fr.Endpoints, (b+1)*fr.DeployBatch)
		}
		change := func(next []*instance) {
			if err := rf.setMembers(next); err != nil {
				e.fail(err)
			}
		}
		at := fr.DeployAt + time.Duration(b)*fr.DeployEvery
		if !run.Surge {
			e.clk.AfterFunc(at, func() {
				next := make([]*instance, 0, len(e.members))
				for _, in := range e.members {
					if old(in) {
						in = e.newInstance(address(1, in.id), 1, f.Warmup, 0)
					}
					next = append(next, in)
				}
				change(next)
			})
			continue
		}
		e.clk.AfterFunc(at, func() {
			next := slices.Clone(e.members)
			for _, in := range e.members {
				if old(in) {
					next = append(next, e.newInstance(address(1, in.id), 1, f.Warmup, 0))
				}
			}
			change(next)
		})
		e.clk.AfterFunc(at+fr.SurgeOverlap, func() {
			change(slices.DeleteFunc(slices.Clone(e.members), old))
		})
	}
	plan := restartPlan(sc.Seed, fr.Gateways, fr.Restart, fr.DeployAt, fr.deployEnd())
	for g := range fr.Gateways {
		if at, ok := plan[g]; ok {
			e.clk.AfterFunc(at, func() {
				if err := rf.restart(g); err != nil {
					e.fail(err)
				}
			})
		}
	}
	var base []int64
	e.clk.AfterFunc(fr.MeasureFrom, func() {
		base = make([]int64, len(e.insts))
		for _, in := range e.insts {
			base[in.id] = in.received
		}
	})
	err := e.run(ctx, fr.Duration, func() {
		rf.series = append(rf.series, round3(rf.ratio))
		if tick != nil {
			tick()
		}
	})
	if err != nil {
		return fail(err)
	}
	return rf.result(run, base), nil
}

// result reads the run's figures at the end.
func (rf *ringFleet) result(run fleetRingsRun, base []int64) FleetRingsResult {
	e := rf.e
	r := FleetRingsResult{
		Placement: run.placement(), SubsetSize: run.SubsetSize, Deploy: run.deploy(),
		Gateways: e.o.gateways, Loops: e.o.loops, Endpoints: len(e.members),
		Restarted: rf.restarted, CoverageOverTime: rf.series,
	}
	r.Rings, r.SubsetCounts, r.Subsets = rf.distinctRings()
	cov := make([]float64, len(e.members))
	got := make([]float64, len(e.members))
	r.CoverageMin = math.MaxInt
	for i, in := range e.members {
		c := rf.cover[in.id]
		cov[i] = float64(c)
		r.CoverageSorted = append(r.CoverageSorted, c)
		r.CoverageMin, r.CoverageMax = min(r.CoverageMin, c), max(r.CoverageMax, c)
		if c == 0 {
			r.UnusedEndpoints++
		}
		got[i] = float64(in.received - base[in.id])
		r.WindowRequests += in.received - base[in.id]
	}
	slices.Sort(r.CoverageSorted)
	r.CoverageMean = round3(sum(cov) / float64(len(cov)))
	r.CoverageMinOver, r.CoverageMaxOver = overMean3(cov)
	r.RequestsMinOver, r.RequestsMaxOver = overMean3(got)
	mean := sum(got) / float64(len(got))
	for _, g := range got {
		if mean > 0 {
			r.RequestsSorted = append(r.RequestsSorted, round3(g/mean))
		}
	}
	slices.Sort(r.RequestsSorted)
	r.Window = e.now() - e.rec.from
	r.Latency = percentiles(concat(e.rec.lat))
	r.Errors, r.Shed = e.rec.errors, e.rec.shedTotal()
	return r
}

// overMean3 is overMean to three decimals: the fleet's checks compare
// with 1.05, so two decimals would hide up to 0.005.
func overMean3(vs []float64) (lo, hi float64) {
	total := sum(vs)
	if len(vs) == 0 || total == 0 {
		return 0, 0
	}
	mean := total / float64(len(vs))
	return round3(slices.Min(vs) / mean), round3(slices.Max(vs) / mean)
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// deployEnd is when the last deploy batch starts, plus one batch interval.
func (fr FleetRingsScenario) deployEnd() time.Duration {
	batches := (fr.Endpoints + fr.DeployBatch - 1) / fr.DeployBatch
	return fr.DeployAt + time.Duration(batches)*fr.DeployEvery
}

// fleetChecks adds the fleet experiment's checks: with shared indices,
// coverage and requests per endpoint within the limit (max/mean) for every
// sizing; the local figures are printed beside them.
func (r *Results) fleetChecks(add func(name string, ok, skipped bool, format string, args ...any)) {
	limit := r.Scenario.FleetRings.Limit
	for _, m := range []struct {
		name string
		of   func(FleetRingsResult) float64
	}{
		{"frontends per endpoint", func(x FleetRingsResult) float64 { return x.CoverageMaxOver }},
		{"requests per endpoint", func(x FleetRingsResult) float64 { return x.RequestsMaxOver }},
	} {
		name := fmt.Sprintf("fleet: %s max/mean ≤ %.2f with shared indices (local placement beside)", m.name, limit)
		if len(r.FleetRings) == 0 {
			add(name, false, true, "fleet not run")
			continue
		}
		ok := true
		var parts []string
		for _, v := range r.Scenario.FleetRings.Variants {
			shared, local := r.fleetRing(v, placementShared), r.fleetRing(v, placementLocal)
			if shared == nil {
				ok = false
				parts = append(parts, fmt.Sprintf("%s, %s deploy: no shared run", sizingLabel(v.SubsetSize, 0, 0), v.deploy()))
				continue
			}
			part := fmt.Sprintf("%s, %s deploy: shared %.3f", sizingLabel(v.SubsetSize, shared.Subsets, shared.Endpoints), v.deploy(), m.of(*shared))
			if local != nil {
				part += fmt.Sprintf(" (local %.3f)", m.of(*local))
			}
			parts = append(parts, part)
			ok = ok && m.of(*shared) <= limit
		}
		add(name, ok, false, "%s", strings.Join(parts, "; "))
	}
}

// fleetRing returns the fleet run of variant v and placement, or nil.
func (r *Results) fleetRing(v FleetVariant, placement string) *FleetRingsResult {
	for i := range r.FleetRings {
		if x := &r.FleetRings[i]; x.variant() == v && x.Placement == placement {
			return x
		}
	}
	return nil
}

// The fleet experiment's plots.
const (
	plotFleetCoverage = "fleet_coverage.png"
	plotFleetTime     = "fleet_coverage_over_time.png"
	plotFleetRequests = "fleet_requests.png"
)

func fleetPlots() []string { return []string{plotFleetCoverage, plotFleetTime, plotFleetRequests} }

func (r *Results) fleetSection() report.Section {
	fr := r.Scenario.FleetRings
	t := report.Table{
		Title: fmt.Sprintf("Fleet: %d gateways × %d loops × %d endpoints, rolling deploy of every endpoint (%d every %v from %v), %.0f%% of the gateways restarted during it",
			fr.Gateways, fr.Loops, fr.Endpoints, fr.DeployBatch, fr.DeployEvery, fr.DeployAt, 100*fr.Restart),
		Header: []string{"sizing", "deploy", "placement", "restarted", "subset counts", "distinct rings", "frontends per endpoint min–max (mean)", "min/mean", "max/mean", "unused",
			"requests min/mean", "requests max/mean", "p99 ms"},
		Note: fmt.Sprintf("at the end; requests per endpoint over %v–%v (%.0f req/s per gateway); local = each gateway's ring from its own history, shared = every gateway places the control plane's indices and subset count",
			fr.MeasureFrom, fr.Duration, fr.RatePerGateway),
	}
	for _, x := range r.FleetRings {
		counts := make([]string, len(x.SubsetCounts))
		for i, c := range x.SubsetCounts {
			counts[i] = strconv.Itoa(c)
		}
		t.Rows = append(t.Rows, []string{sizingLabel(x.SubsetSize, x.Subsets, x.Endpoints), x.Deploy, x.Placement, strconv.Itoa(x.Restarted),
			strings.Join(counts, ", "), strconv.Itoa(x.Rings),
			fmt.Sprintf("%d–%d (%s)", x.CoverageMin, x.CoverageMax, f1(x.CoverageMean)), f3(x.CoverageMinOver), f3(x.CoverageMaxOver), strconv.Itoa(x.UnusedEndpoints),
			f3(x.RequestsMinOver), f3(x.RequestsMaxOver), f1(x.Latency.P99)})
	}
	return report.Section{Title: "7. Fleet: one ring for the whole fleet", Tables: []report.Table{t}, Plots: fleetPlots(),
		Text: "Every gateway holds its own ring, as corput serve does; loop l of gateway g uses subset (g·loops + l) mod S of its ring. " +
			"When loops is a multiple of S every gateway uses every subset once, so coverage is even whatever the index order, as long as every gateway holds the same S. " +
			"A gateway restarted during the deploy holds a ring of its own: another index order (with S > loops its loops use other endpoints) and, in a surge deploy, " +
			"another S (sized afresh for the surged count, kept by hysteresis). With shared indices every gateway places the control plane's indices and subset count. " +
			"docs/lab.md, section 8, explains the table."}
}

func f3(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// writeFleetPlots draws the fleet experiment's plots into dir.
func (r *Results) writeFleetPlots(dir string) error {
	fr := r.Scenario.FleetRings
	var cov, reqs, over []report.Series
	for _, x := range r.FleetRings {
		xs := make([]float64, len(x.CoverageSorted))
		ys := make([]float64, len(x.CoverageSorted))
		for i, c := range x.CoverageSorted {
			xs[i], ys[i] = float64(i+1), float64(c)/x.CoverageMean
		}
		cov = append(cov, report.Series{Name: x.Name(), X: xs, Y: ys})
		rx := make([]float64, len(x.RequestsSorted))
		for i := range rx {
			rx[i] = float64(i + 1)
		}
		reqs = append(reqs, report.Series{Name: x.Name(), X: rx, Y: x.RequestsSorted})
		over = append(over, report.Series{Name: x.Name(), X: seconds(len(x.CoverageOverTime)), Y: x.CoverageOverTime})
	}
	return errors.Join(
		report.LinePlot(filepath.Join(dir, plotFleetCoverage), report.LineOptions{Title: "frontends per endpoint at the end, sorted (÷ mean; 1 = even)",
			XLabel: "endpoint (sorted)", YLabel: "frontends ÷ mean"}, cov...),
		report.LinePlot(filepath.Join(dir, plotFleetRequests), report.LineOptions{Title: fmt.Sprintf("requests per endpoint over %v–%v, sorted (÷ mean)", fr.MeasureFrom, fr.Duration),
			XLabel: "endpoint (sorted)", YLabel: "requests ÷ mean"}, reqs...),
		report.LinePlot(filepath.Join(dir, plotFleetTime), report.LineOptions{Title: "frontends per endpoint: max ÷ mean over time",
			XLabel: "virtual time (s)", YLabel: "max ÷ mean",
			Marks: []report.Mark{{X: fr.DeployAt.Seconds(), Label: "deploy"}, {X: fr.deployEnd().Seconds(), Label: "deploy done"}, {X: fr.MeasureFrom.Seconds(), Label: "window"}}},
			over...),
	)
}
