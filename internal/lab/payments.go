package lab

import (
	"context"
	"fmt"
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

// PaymentsScenario is seed 002's own drill at the seed's scale (its next
// step 3), run only when asked for (`corput lab --scenario payments`): the
// payment cluster — pods in three zones behind zone-aware gateways, the
// 70/30 mix at the seed's peak rate — loses Kill random pods at KillAt.
type PaymentsScenario struct {
	// Zones is the number of pods in each zone (us-east-1a, -1b, -1c).
	Zones []int `json:"zones"`
	// Workers per pod: the seed gives no pod size (see docs/lab.md).
	Workers int `json:"workers"`
	// Rate is the arrival rate over every gateway, req/s.
	Rate float64 `json:"rate"`
	// GatewaysPerZone gateways stand in each zone (zone.local), each with
	// Loops loops; every loop sees every pod (80 pods need no subsets).
	GatewaysPerZone int `json:"gateways_per_zone"`
	Loops           int `json:"loops"`
	// Kill random pods are terminated at KillAt; the percentiles are split
	// into before [From, KillAt), during [KillAt, KillAt+During) and after
	// [KillAt+During, Duration) by arrival.
	Kill     int           `json:"kill"`
	KillAt   time.Duration `json:"kill_at_ns"`
	During   time.Duration `json:"during_ns"`
	From     time.Duration `json:"from_ns"`
	Duration time.Duration `json:"duration_ns"`
	// Timeout is the gateway's request timeout; the run goes on that long
	// after the last arrival, so that every request is answered.
	Timeout time.Duration `json:"timeout_ns"`
	// EjectWithin is the seed's bound on ejecting a dead pod (MC-LB-…:
	// "rapid outlier ejection (< 500 ms)"), checked on every gateway.
	EjectWithin time.Duration `json:"eject_within_ns"`
}

// paymentsZones name the seed's three zones.
var paymentsZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// defaultPayments is seed 002's cluster.
func defaultPayments() PaymentsScenario {
	return PaymentsScenario{
		Zones: []int{27, 27, 26}, Workers: 40, Rate: 36000, GatewaysPerZone: 2, Loops: 4,
		Kill: 10, KillAt: 20 * time.Second, During: 5 * time.Second, From: 5 * time.Second, Duration: 40 * time.Second,
		Timeout: 5 * time.Second, EjectWithin: 500 * time.Millisecond,
	}
}

func (p PaymentsScenario) pods() int {
	n := 0
	for _, z := range p.Zones {
		n += z
	}
	return n
}

func (p PaymentsScenario) validate(bad func(ok bool, format string, args ...any)) {
	bad(len(p.Zones) >= 1 && len(p.Zones) <= len(paymentsZones) && !slices.Contains(p.Zones, 0) && !slices.ContainsFunc(p.Zones, func(n int) bool { return n < 0 }),
		"lab payments.zones: want 1 to %d zones of at least one pod each", len(paymentsZones))
	bad(p.Workers > 0 && p.Rate > 0 && p.GatewaysPerZone > 0 && p.Loops > 0, "lab payments: workers, rate, gateways_per_zone and loops must be positive")
	bad(p.Kill >= 1 && p.Kill < p.pods(), "lab payments.kill: want 1 to pods − 1 pods killed")
	bad(p.From < p.KillAt && p.KillAt+p.During < p.Duration && p.During > 0, "lab payments: want from < kill_at < kill_at + during < duration")
	bad(p.Timeout > 0 && p.EjectWithin > 0, "lab payments: timeout and eject_within must be positive")
}

// paymentsRun is one policy on one service-time model.
type paymentsRun struct {
	policy   balance.Policy
	variance bool
}

func paymentsRuns() []paymentsRun {
	var runs []paymentsRun
	for _, v := range []bool{false, true} {
		for _, p := range lbPolicies {
			runs = append(runs, paymentsRun{policy: p, variance: v})
		}
	}
	return runs
}

// The phases of the payments run.
var paymentPhases = []string{"before", "during", "after"}

// PaymentsResult is one run of the drill.
type PaymentsResult struct {
	Policy string `json:"policy"`
	Model  string `json:"service_times"`
	// Classes: per class and phase (before, during, after the kill), the
	// latency of the requests the pods answered.
	Classes map[string]map[string]Percentiles `json:"classes"`
	// Requests arrived; Answered by the pods or the gateway; Unanswered is
	// the difference once the run has drained (must be 0: never silence).
	Requests   int64 `json:"requests"`
	Answered   int64 `json:"answered"`
	Unanswered int64 `json:"unanswered"`
	// GatewayAnswers are the requests the gateways answered themselves, by
	// status and reason ("502 upstream_reset": a POST whose pod died under
	// it).
	GatewayAnswers map[string]int64 `json:"gateway_answers"`
	Errors         int64            `json:"errors_5xx"` // from the pods, timeouts included
	Killed         []KilledPod      `json:"killed"`
	// EjectionMaxMs is the slowest ejection of a killed pod on any
	// gateway, ms after its termination; -1 when one was never ejected.
	EjectionMaxMs float64 `json:"ejection_max_ms"`
	Panic         bool    `json:"panic_entered"`
	// ZoneLocal is the share of picks that stayed in the gateway's zone,
	// per phase.
	ZoneLocal map[string]float64 `json:"zone_local_share"`
	// FailedAuthorizations and FailedInquiries are the authorizations
	// (every class above the lightest, POSTs) and balance inquiries (the
	// lightest, GETs) not served: answered by a gateway itself or with a
	// 5xx.
	FailedAuthorizations int64 `json:"failed_authorizations"`
	FailedInquiries      int64 `json:"failed_inquiries"`
	// Retried is the requests that went again after a failed attempt;
	// Twice those of them that reached a pod twice or more (replayed after
	// their pod died under them: the idempotency key makes it harmless).
	Retried int64 `json:"retried"`
	Twice   int64 `json:"reached_a_pod_twice"`
}

// KilledPod is one terminated pod and when each gateway ejected it, ms
// after the termination (-1: not ejected by the end of the run).
type KilledPod struct {
	Address   string    `json:"address"`
	Zone      string    `json:"zone"`
	EjectedMs []float64 `json:"ejected_ms_per_gateway"`
}

// payObserver is one gateway's balance.Observer: when it ejected each
// killed pod, whether it entered panic, its zone-local picks per phase.
type payObserver struct {
	balance.NopObserver
	t  *payTrack
	gw int
}

type payTrack struct {
	e       *engine
	p       PaymentsScenario
	killed  map[string]int // address → index in ejected
	ejected [][]time.Duration
	panic   bool
	local   [3][2]int64 // phase → [remote, local] picks
}

func (o payObserver) Ejected(addr, _ string, _ time.Duration) {
	t := o.t
	if i, ok := t.killed[addr]; ok && t.ejected[i][o.gw] < 0 {
		t.ejected[i][o.gw] = t.e.now() - t.p.KillAt
	}
}

func (o payObserver) PanicMode(on bool) { o.t.panic = o.t.panic || on }

func (o payObserver) ZonePick(local bool) {
	k := 0
	if local {
		k = 1
	}
	o.t.local[o.t.phase(o.t.e.now())][k]++
}

func (t *payTrack) phase(at time.Duration) int {
	switch {
	case at < t.p.KillAt:
		return 0
	case at < t.p.KillAt+t.p.During:
		return 1
	}
	return 2
}

// runPayments simulates one run of the drill.
func runPayments(ctx context.Context, sc *Scenario, run paymentsRun, tick func()) (PaymentsResult, error) {
	p := sc.Payments
	bc := balance.DefaultConfig()
	bc.Policy = run.policy
	variance := 0.0
	if run.variance {
		variance = sc.LB.Variance
	}
	gateways := p.GatewaysPerZone * len(p.Zones)
	t := &payTrack{p: p, killed: map[string]int{}}
	// Every class above the lightest is an authorization, a POST with a
	// body and an idempotency key, as a payments client sends it: retried
	// when nothing was sent, replayed when its pod died under it. The
	// lightest (balance inquiries) are GETs.
	var heavy []bool
	for _, c := range sc.Mix.Costs() {
		heavy = append(heavy, c > 1)
	}
	e := newEngine(sc.Seed, sc.Mix, fleetOptions{
		gateways: gateways, loops: p.Loops, algorithm: subset.NameNone, scope: perLoop,
		pool: fleetPool(), conn: memconn.Config{Streams: sc.Fleet.Streams, DialLatency: sc.Fleet.DialLatency},
		balance: bc, workers: p.Workers, timeout: p.Timeout, retries: 1, variance: variance,
		zoneOf:   func(g int) string { return paymentsZones[g/p.GatewaysPerZone] },
		observer: func(g int) balance.Observer { return payObserver{t: t, gw: g} },
		oneShot:  heavy, keyed: true,
	})
	t.e = e
	e.rec.from, e.rec.until, e.rec.keepAnswers = 0, p.Duration, true
	e.rec.phaseEnds = []time.Duration{p.KillAt, p.KillAt + p.During}
	var pods []*instance
	for z, n := range p.Zones {
		for range n {
			in := e.newInstance(address(0, len(pods)), 1, workload.Warmup{}, 0)
			in.zone = paymentsZones[z]
			pods = append(pods, in)
		}
	}
	// The same pods die in every run of a seed.
	victims := pickDistinct(rng.New(rng.Mix64(sc.Seed^0x6b696c6c)), len(pods), p.Kill)
	for i, v := range victims {
		t.killed[pods[v].addr] = i
		t.ejected = append(t.ejected, slices.Repeat([]time.Duration{-1}, gateways))
	}
	if err := e.place(pods); err != nil {
		return PaymentsResult{}, fmt.Errorf("payments %s: %w", run.policy, err)
	}
	for _, g := range e.gws {
		g.start(p.Rate / float64(gateways))
	}
	e.clk.AfterFunc(p.KillAt, func() {
		for _, v := range victims {
			pods[v].kill()
		}
	})
	e.clk.AfterFunc(p.Duration, func() {
		for _, g := range e.gws {
			g.next.Stop()
		}
	})
	if err := e.run(ctx, p.Duration+p.Timeout+time.Second, tick); err != nil {
		return PaymentsResult{}, fmt.Errorf("payments %s: %w", run.policy, err)
	}
	return paymentsResult(e, run, t, pods, victims), nil
}

func paymentsResult(e *engine, run paymentsRun, t *payTrack, pods []*instance, victims []int) PaymentsResult {
	r := PaymentsResult{
		Policy: string(run.policy), Model: modelConstant,
		Classes:  map[string]map[string]Percentiles{},
		Requests: e.rec.arrivals, Answered: e.rec.done, Unanswered: e.rec.arrivals - e.rec.done,
		GatewayAnswers: map[string]int64{}, Errors: e.rec.errors, Panic: t.panic,
		ZoneLocal: map[string]float64{},
	}
	if e.o.variance > 0 {
		r.Model = modelVariance
	}
	for ph, name := range paymentPhases {
		for c, cl := range e.mix.Classes {
			if r.Classes[cl.Name] == nil {
				r.Classes[cl.Name] = map[string]Percentiles{}
			}
			var lat []float64
			if ph < len(e.rec.byPhase) && c < len(e.rec.byPhase[ph]) {
				lat = e.rec.byPhase[ph][c]
			}
			r.Classes[cl.Name][name] = percentiles(lat)
		}
		if n := t.local[ph][0] + t.local[ph][1]; n > 0 {
			r.ZoneLocal[name] = round4(float64(t.local[ph][1]) / float64(n))
		}
	}
	for reason, n := range e.rec.answers {
		r.GatewayAnswers[reason] = n
	}
	light := slices.Index(e.mix.Costs(), slices.Min(e.mix.Costs()))
	for c, n := range e.rec.failed {
		if c == light {
			r.FailedInquiries += n
		} else {
			r.FailedAuthorizations += n
		}
	}
	r.Retried, r.Twice = e.rec.retried, e.rec.twice
	for i, v := range victims {
		k := KilledPod{Address: pods[v].addr, Zone: pods[v].zone}
		for _, d := range t.ejected[i] {
			ms := -1.0
			if d >= 0 {
				ms = round2(float64(d) / float64(time.Millisecond))
			}
			k.EjectedMs = append(k.EjectedMs, ms)
			switch {
			case ms < 0 || r.EjectionMaxMs < 0:
				r.EjectionMaxMs = -1
			default:
				r.EjectionMaxMs = max(r.EjectionMaxMs, ms)
			}
		}
		r.Killed = append(r.Killed, k)
	}
	return r
}

// pickDistinct returns k distinct indices of [0, n), sorted.
func pickDistinct(r *rng.Source, n, k int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	for i := range k {
		j := i + r.IntN(n-i)
		idx[i], idx[j] = idx[j], idx[i]
	}
	out := slices.Clone(idx[:k])
	slices.Sort(out)
	return out
}

// paymentsChecks adds the drill's checks, for every run, when it ran.
func (r *Results) paymentsChecks(add func(name string, ok, skipped bool, format string, args ...any)) {
	if len(r.Payments) == 0 {
		return // opt-in: no SKIP lines in the default run
	}
	p := r.Scenario.Payments
	silent, slow, panicked := []string{}, []string{}, []string{}
	for _, x := range r.Payments {
		label := x.Policy + " (" + x.Model + ")"
		if x.Unanswered != 0 {
			silent = append(silent, fmt.Sprintf("%s: %d", label, x.Unanswered))
		}
		if x.EjectionMaxMs < 0 || x.EjectionMaxMs > float64(p.EjectWithin)/float64(time.Millisecond) {
			slow = append(slow, fmt.Sprintf("%s: %s", label, ejectionLabel(x.EjectionMaxMs)))
		}
		if x.Panic {
			panicked = append(panicked, label)
		}
	}
	worst := 0.0
	for _, x := range r.Payments {
		if x.EjectionMaxMs < 0 {
			worst = -1
			break
		}
		worst = max(worst, x.EjectionMaxMs)
	}
	add("payments: every request answered (a 502 with a reason at most), every policy", len(silent) == 0, false,
		"%d runs; unanswered: %s", len(r.Payments), orNone(silent))
	add(fmt.Sprintf("payments: each killed pod ejected within %v on every gateway, every policy", p.EjectWithin), len(slow) == 0, false,
		"slowest %s; over: %s", ejectionLabel(worst), orNone(slow))
	add(fmt.Sprintf("payments: no panic routing (%d of %d pods killed)", p.Kill, p.pods()), len(panicked) == 0, false, "entered by: %s", orNone(panicked))
	var lost []string
	runs := 0
	for _, x := range r.Payments {
		if x.Policy != string(balance.LeastWork) {
			continue
		}
		runs++
		if x.FailedAuthorizations != 0 || x.FailedInquiries != 0 {
			lost = append(lost, fmt.Sprintf("%s: %d authorizations, %d inquiries", x.Model, x.FailedAuthorizations, x.FailedInquiries))
		}
	}
	add("payments: least_work loses no authorization and no inquiry (retried when nothing was sent, replayed with their idempotency key), both service-time models",
		runs > 0 && len(lost) == 0, runs == 0, "%d runs; failed: %s", runs, orNone(lost))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func ejectionLabel(ms float64) string {
	if ms < 0 {
		return "never"
	}
	return f1(ms) + " ms"
}

func (r *Results) paymentsSection() report.Section {
	p := r.Scenario.Payments
	main := report.Table{
		Title: fmt.Sprintf("Payments drill: %d pods in %d zones %v × %d workers, %d gateways × %d loops (zone-local), %.0f req/s; %d pods killed at %v",
			p.pods(), len(p.Zones), p.Zones, p.Workers, p.GatewaysPerZone*len(p.Zones), p.Loops, p.Rate, p.Kill, p.KillAt),
		Header: []string{"policy", "service times", "requests", "unanswered", "gateway answers", "5xx", "failed authorizations", "failed inquiries", "retried", "reached a pod twice", "slowest ejection", "panic", "zone-local before / during / after"},
		Note:   fmt.Sprintf("before: arrivals %v–%v; during: %v–%v; after: %v–%v", p.From, p.KillAt, p.KillAt, p.KillAt+p.During, p.KillAt+p.During, p.Duration),
	}
	classes := report.Table{Title: "Payments drill: latency per class and phase (ms: p50 / p90 / p99 / max)", Header: []string{"policy", "service times", "class"}}
	classes.Header = append(classes.Header, paymentPhases...)
	for _, x := range r.Payments {
		var answers []string
		for _, k := range sortedKeys(x.GatewayAnswers) {
			answers = append(answers, fmt.Sprintf("%s: %d", k, x.GatewayAnswers[k]))
		}
		var zl []string
		for _, ph := range paymentPhases {
			zl = append(zl, pct(x.ZoneLocal[ph]))
		}
		main.Rows = append(main.Rows, []string{x.Policy, x.Model, strconv.FormatInt(x.Requests, 10), strconv.FormatInt(x.Unanswered, 10),
			orNone(answers), strconv.FormatInt(x.Errors, 10), strconv.FormatInt(x.FailedAuthorizations, 10), strconv.FormatInt(x.FailedInquiries, 10),
			strconv.FormatInt(x.Retried, 10), strconv.FormatInt(x.Twice, 10), ejectionLabel(x.EjectionMaxMs), yesNo(x.Panic), strings.Join(zl, " / ")})
		for _, c := range r.Scenario.Mix.Classes {
			row := []string{x.Policy, x.Model, c.Name}
			for _, ph := range paymentPhases {
				q := x.Classes[c.Name][ph]
				row = append(row, fmt.Sprintf("%s / %s / %s / %s", f1(q.P50), f1(q.P90), f1(q.P99), f1(q.Max)))
			}
			classes.Rows = append(classes.Rows, row)
		}
	}
	tables := []report.Table{main, classes}
	if len(r.Payments) > 0 {
		kills := report.Table{Title: "Payments drill: killed pods, ejection per gateway (ms after the kill), first run", Header: []string{"pod", "zone", "ejected ms per gateway"}}
		for _, k := range r.Payments[0].Killed {
			var ms []string
			for _, v := range k.EjectedMs {
				ms = append(ms, ejectionLabel(v))
			}
			kills.Rows = append(kills.Rows, []string{k.Address, k.Zone, strings.Join(ms, ", ")})
		}
		tables = append(tables, kills)
	}
	return report.Section{Title: "Payments drill (seed 002, opt-in)", Tables: tables,
		Text: "Latency of the requests the pods answered, by arrival phase; the gateways' own answers are counted apart. Authorizations carry an idempotency key: one whose pod died under it is replayed on another (reached a pod twice), one sent to a dead pod goes elsewhere."}
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
