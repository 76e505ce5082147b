package lab

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/workload"
)

// The experiments, in the order a full run does them.
const (
	ExpSteps      = "steps"
	ExpHerd       = "herd"
	ExpSubsets    = "subsets"
	ExpLB         = "lb"
	ExpResilience = "resilience"
	ExpSpread     = "spread"
	ExpFleet      = "fleet"
	// ExpPayments is opt-in: Select("payments") runs it, the default run
	// does not (Experiments leaves it out).
	ExpPayments = "payments"
)

// Experiments lists every experiment name.
func Experiments() []string {
	return []string{ExpSteps, ExpHerd, ExpSubsets, ExpLB, ExpResilience, ExpSpread, ExpFleet}
}

// Scale chooses the fleet size of the fleet experiments.
type Scale string

// The scales.
const (
	// ScaleSmall is the default: 10 gateways × 16 loops × 800 endpoints.
	// Every ratio the lab reports depends on loops, endpoints and the
	// traffic per gateway, not on the gateway count, so it shows the shape
	// of the full fleet in a tenth of the work.
	ScaleSmall Scale = "small"
	// ScaleFull is Zuul's fleet (docs/spec.md): 100 gateways × 16 loops × 800
	// endpoints (1.28 M per-loop pools in step 2).
	ScaleFull Scale = "full"
)

// ParseScale reads --scale.
func ParseScale(s string) (Scale, error) {
	switch Scale(s) {
	case ScaleSmall, "":
		return ScaleSmall, nil
	case ScaleFull:
		return ScaleFull, nil
	}
	return "", fmt.Errorf("--scale %q: want small or full", s)
}

// Scenario is every parameter of a lab run. DefaultScenario returns the
// embedded one; tests shrink it.
type Scenario struct {
	Scale Scale  `json:"scale"`
	Seed  uint64 `json:"seed"`
	// Run lists the experiments to run (Experiments' names).
	Run []string     `json:"run"`
	Mix workload.Mix `json:"workload"`

	Fleet      FleetScenario      `json:"fleet"`
	Steps      StepsScenario      `json:"steps"`
	Herd       HerdScenario       `json:"herd"`
	Subsets    SubsetsScenario    `json:"subsets"`
	LB         LBScenario         `json:"lb"`
	Resilience ResilienceScenario `json:"resilience"`
	Spread     SpreadScenario     `json:"spread"`
	FleetRings FleetRingsScenario `json:"fleet_rings"`
	Payments   PaymentsScenario   `json:"payments"`
}

// FleetScenario is the fleet the steps, the herd and the subset ranking run
// on.
type FleetScenario struct {
	Gateways  int `json:"gateways"`
	Loops     int `json:"loops"`
	Endpoints int `json:"endpoints"`
	// SubsetSize is subset.size for the subsetting steps; 0 is automatic
	// (25–50 endpoints per subset).
	SubsetSize int `json:"subset_size"`
	// Workers per origin instance.
	Workers int `json:"workers"`
	// RatePerGateway is the request rate each gateway receives (req/s):
	// enough that every (loop, endpoint) pair of step 2 sees a request
	// more often than its idle timeout, as a busy Zuul fleet does.
	RatePerGateway float64 `json:"rate_per_gateway"`
	// DialLatency stands for a TCP + TLS handshake.
	DialLatency time.Duration `json:"dial_latency_ns"`
	// Streams is the HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS of an origin.
	Streams int `json:"h2_streams"`
	// Warmup is the cold start of every instance that joins (deploy,
	// autoscale).
	Warmup workload.Warmup `json:"warmup"`
}

// StepsScenario is the timeline of the steps experiment.
type StepsScenario struct {
	Duration time.Duration `json:"duration_ns"`
	// SteadyFrom..SteadyTo is the window of the steady figures: pools
	// filled, no event.
	SteadyFrom time.Duration `json:"steady_from_ns"`
	SteadyTo   time.Duration `json:"steady_to_ns"`
	// The rolling origin deploy replaces every instance by a new (cold)
	// one, DeployBatch at a time, every DeployEvery, from DeployAt.
	DeployAt    time.Duration `json:"deploy_at_ns"`
	DeployBatch int           `json:"deploy_batch"`
	DeployEvery time.Duration `json:"deploy_every_ns"`
	// AutoscaleAt the origin grows by AutoscaleAdd (cold) instances.
	AutoscaleAt  time.Duration `json:"autoscale_at_ns"`
	AutoscaleAdd int           `json:"autoscale_add"`
	// AggressiveIdle is step 5's aggressive idle timeout, shorter than the
	// gap between two requests of one pool.
	AggressiveIdle time.Duration `json:"aggressive_idle_ns"`
}

// HerdScenario is the gateway fleet deploy.
type HerdScenario struct {
	Duration time.Duration `json:"duration_ns"`
	// Jitter spreads each pool's pre-warm over [0, Jitter).
	Jitter time.Duration `json:"jitter_ns"`
	// Ramp moves traffic to a new gateway linearly over Ramp.
	Ramp time.Duration `json:"ramp_ns"`
}

// SubsetsScenario is the subsetting ranking (subset.Compare).
type SubsetsScenario struct {
	Trials int `json:"trials"`
}

// LBScenario is the load-balancing comparison: one gateway fleet in front of
// a small origin whose endpoints are one degraded, one flaky, and one cold
// that joins mid-run.
type LBScenario struct {
	Gateways  int     `json:"gateways"`
	Loops     int     `json:"loops"`
	Endpoints int     `json:"endpoints"` // warm ones at start, the degraded and flaky included
	Workers   int     `json:"workers"`
	Rate      float64 `json:"rate"` // req/s, fleet-wide
	// Slowdown of the degraded endpoint.
	Slowdown float64 `json:"slowdown"`
	// ErrorRate of the flaky endpoint's injected 500s.
	ErrorRate float64 `json:"error_rate"`
	// ColdAt the cold endpoint joins, warming up along Warmup.
	ColdAt   time.Duration   `json:"cold_at_ns"`
	Warmup   workload.Warmup `json:"warmup"`
	Duration time.Duration   `json:"duration_ns"`
	// Timeout is the gateway's request timeout (timeouts.request).
	Timeout time.Duration `json:"timeout_ns"`
	// ColdWindow is how long after joining the cold endpoint is watched.
	ColdWindow time.Duration `json:"cold_window_ns"`
	// Variance is the σ of the variance model every policy also runs on:
	// each service time log-normal around its class's mean, e^(σN − σ²/2)
	// × the mean (docs/lab.md, "Load balancing").
	Variance float64 `json:"variance_sigma"`
}

// SpreadScenario is the even-load experiment: identical, healthy
// endpoints behind one gateway, on a single path (it measures where
// requests go, not latency: no balancer evidence, so no 70/30 mix).
type SpreadScenario struct {
	Loops     int           `json:"loops"`
	Endpoints int           `json:"endpoints"`
	Workers   int           `json:"workers"`
	Rate      float64       `json:"rate"`
	Latency   time.Duration `json:"latency_ns"`
	Duration  time.Duration `json:"duration_ns"`
	// Noise is the log-normal σ of the noisy service-time model (each
	// service time is Latency × e^(σN), N standard normal).
	Noise float64 `json:"noise"`
}

// FleetRingsScenario is the fleet experiment (--scenario fleet): a gateway
// fleet whose gateways each hold their own ring, through a rolling deploy
// of every endpoint during which a share of the gateways restart, with
// local placement and with shared indices. The origin's instances are
// Fleet's (workers, dial latency, h2 streams, warm-up).
type FleetRingsScenario struct {
	Gateways       int     `json:"gateways"`
	Loops          int     `json:"loops"`
	Endpoints      int     `json:"endpoints"`
	RatePerGateway float64 `json:"rate_per_gateway"`
	// Variants are the sizings and deploy styles compared, each with local
	// placement and with shared indices.
	Variants []FleetVariant `json:"variants"`
	// Restart is the share of the gateways that restart, each at a seeded
	// uniform instant during the deploy.
	Restart float64 `json:"restart_share"`
	// The rolling deploy replaces every endpoint by a new (cold) one,
	// DeployBatch at a time, every DeployEvery, from DeployAt.
	DeployAt    time.Duration `json:"deploy_at_ns"`
	DeployBatch int           `json:"deploy_batch"`
	DeployEvery time.Duration `json:"deploy_every_ns"`
	// SurgeOverlap is, in a surge deploy, how long a batch's new endpoints
	// serve beside the old ones before those leave.
	SurgeOverlap time.Duration `json:"surge_overlap_ns"`
	// MeasureFrom..Duration is the window whose requests per endpoint are
	// counted. It starts once the balancers have forgotten the deploy's
	// cold starts: past the last batch's slow start and warm-up, each
	// gateway's mean latency of an endpoint averages its last 64 samples,
	// and at 0.8 req/s per (gateway, endpoint) the queueing of a cold
	// endpoint at full scale (80 req/s on 8 workers at 10× service time)
	// still weighs in it two minutes later. It lasts long enough that the
	// count's own noise stays well under the limit (about 2 000 requests
	// per endpoint at the small scale).
	MeasureFrom time.Duration `json:"measure_from_ns"`
	Duration    time.Duration `json:"duration_ns"`
	// Limit is the checks' bound on max/mean with shared indices.
	Limit float64 `json:"limit"`
}

// FleetVariant is one configuration of the fleet experiment.
type FleetVariant struct {
	// SubsetSize is subset.size; 0 is automatic (the default sizing).
	SubsetSize int `json:"subset_size"`
	// Surge deploys each batch by adding the new endpoints first and
	// removing the old ones SurgeOverlap later; otherwise a batch is
	// replaced in one update.
	Surge bool `json:"surge"`
}

// ResilienceScenario is the subset-size resilience table.
type ResilienceScenario struct {
	Sizes       []int `json:"sizes"`
	MaxFailures int   `json:"max_failures"`
	Trials      int   `json:"trials"`
}

// DefaultScenario returns the embedded scenario at scale, running every
// experiment.
func DefaultScenario(scale Scale, seed uint64) Scenario {
	sc := Scenario{
		Scale: ScaleSmall,
		Seed:  seed,
		Run:   Experiments(),
		Mix:   workload.Default(),
		Fleet: FleetScenario{
			Gateways: 10, Loops: 16, Endpoints: 800, Workers: 8,
			RatePerGateway: 640,
			DialLatency:    5 * time.Millisecond,
			Streams:        100,
			Warmup:         workload.Cold(),
		},
		Steps: StepsScenario{
			Duration:   300 * time.Second,
			SteadyFrom: 90 * time.Second, SteadyTo: 150 * time.Second,
			DeployAt: 150 * time.Second, DeployBatch: 80, DeployEvery: 5 * time.Second,
			AutoscaleAt: 240 * time.Second, AutoscaleAdd: 80,
			AggressiveIdle: time.Second,
		},
		Herd:    HerdScenario{Duration: 60 * time.Second, Jitter: 10 * time.Second, Ramp: 30 * time.Second},
		Subsets: SubsetsScenario{Trials: 10},
		LB: LBScenario{
			Gateways: 4, Loops: 4, Endpoints: 8, Workers: 8, Rate: 500,
			Slowdown: 5, ErrorRate: 0.1,
			ColdAt: 60 * time.Second, Warmup: workload.Cold(),
			Duration: 300 * time.Second, Timeout: 15 * time.Second,
			ColdWindow: 30 * time.Second,
			Variance:   0.5,
		},
		Spread: SpreadScenario{
			Loops: 16, Endpoints: 800, Workers: 8, Rate: 4000,
			Latency: 15 * time.Millisecond, Duration: 30 * time.Second, Noise: 0.1,
		},
		Resilience: ResilienceScenario{Sizes: []int{13, 25, 50, 100, 200}, MaxFailures: 10, Trials: 50},
		Payments:   defaultPayments(),
		FleetRings: FleetRingsScenario{
			Gateways: 10, Loops: 16, Endpoints: 800, RatePerGateway: 640,
			Variants: []FleetVariant{{}, {SubsetSize: 25}, {Surge: true}}, Restart: 0.3,
			DeployAt: 30 * time.Second, DeployBatch: 80, DeployEvery: 5 * time.Second, SurgeOverlap: 2500 * time.Millisecond,
			MeasureFrom: 260 * time.Second, Duration: 500 * time.Second,
			Limit: 1.05,
		},
	}
	if scale == ScaleFull {
		sc.Scale = ScaleFull
		sc.Fleet.Gateways = 100
		sc.FleetRings.Gateways = 100
	}
	return sc
}

// sizing is the subset sizing of the fleet experiments.
func (f FleetScenario) sizing() subset.Sizing {
	if f.SubsetSize == 0 {
		return subset.DefaultSizing
	}
	return subset.FixedSize(f.SubsetSize)
}

// Select keeps only the named experiment; "" and "default" keep them all.
func (sc *Scenario) Select(name string) error {
	switch name {
	case "", "default":
		sc.Run = Experiments()
		return nil
	}
	if !slices.Contains(Experiments(), name) && name != ExpPayments {
		return fmt.Errorf("--scenario %q: want default or one of %s, or %s (opt-in)", name, strings.Join(Experiments(), ", "), ExpPayments)
	}
	sc.Run = []string{name}
	return nil
}

// Runs reports whether experiment name is selected.
func (sc *Scenario) Runs(name string) bool { return slices.Contains(sc.Run, name) }

// Validate refuses a scenario that cannot run or whose figures would not be
// evidence: above all a workload without cost skew
// (ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED).
func (sc *Scenario) Validate() error {
	if err := sc.Mix.Validate(); err != nil {
		return fmt.Errorf("lab workload: %w", err)
	}
	var errs []error
	bad := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	f := sc.Fleet
	bad(f.Gateways > 0 && f.Loops > 0 && f.Endpoints > 0, "lab fleet: gateways, loops and endpoints must be positive (got %d × %d × %d)", f.Gateways, f.Loops, f.Endpoints)
	bad(f.Workers > 0, "lab fleet.workers: must be positive")
	bad(f.RatePerGateway > 0, "lab fleet.rate_per_gateway: must be positive")
	bad(f.Streams > 1, "lab fleet.h2_streams: must be above 1 (got %d)", f.Streams)
	bad(f.SubsetSize == 0 || f.SubsetSize >= 2, "lab fleet.subset_size: want 0 (automatic) or at least 2")
	s := sc.Steps
	bad(s.SteadyFrom < s.SteadyTo && s.SteadyTo <= s.Duration && s.SteadyTo >= s.SteadyFrom+time.Second,
		"lab steps: want steady_from < steady_to ≤ duration with at least 1s of window")
	bad(s.DeployBatch > 0 && s.DeployEvery > 0, "lab steps: deploy_batch and deploy_every must be positive")
	bad(s.AggressiveIdle > 0, "lab steps.aggressive_idle: must be positive")
	l := sc.LB
	bad(l.Gateways > 0 && l.Loops > 0 && l.Endpoints >= 3, "lab lb: want gateways, loops > 0 and at least 3 endpoints (degraded, flaky, one warm)")
	bad(l.Workers > 0 && l.Rate > 0, "lab lb: workers and rate must be positive")
	bad(l.ColdWindow >= time.Second && l.ColdAt+l.ColdWindow <= l.Duration, "lab lb: the cold endpoint's window must last at least 1s and end before the run")
	bad(l.Variance > 0 && l.Variance <= 2, "lab lb.variance_sigma: want a log-normal σ in (0, 2], e.g. 0.5")
	sc.Payments.validate(bad)
	sp := sc.Spread
	bad(sp.Loops > 0 && sp.Endpoints > 0 && sp.Workers > 0 && sp.Rate > 0 && sp.Latency > 0 && sp.Duration >= time.Second && sp.Noise >= 0,
		"lab spread: loops, endpoints, workers, rate, latency must be positive, duration at least 1s, noise not negative")
	fr := sc.FleetRings
	bad(fr.Gateways > 0 && fr.Loops > 0 && fr.Endpoints > 0 && fr.RatePerGateway > 0,
		"lab fleet_rings: gateways, loops, endpoints and rate_per_gateway must be positive")
	bad(len(fr.Variants) > 0 && !slices.ContainsFunc(fr.Variants, func(v FleetVariant) bool { return v.SubsetSize < 0 || v.SubsetSize == 1 }),
		"lab fleet_rings.variants: want at least one, each subset_size 0 (automatic) or at least 2")
	bad(!slices.ContainsFunc(fr.Variants, func(v FleetVariant) bool { return v.Surge }) || (fr.SurgeOverlap > 0 && fr.SurgeOverlap < fr.DeployEvery),
		"lab fleet_rings.surge_overlap: a surge deploy needs 0 < surge_overlap < deploy_every")
	bad(fr.Restart >= 0 && fr.Restart <= 1, "lab fleet_rings.restart_share: want 0..1")
	bad(fr.DeployBatch > 0 && fr.DeployEvery > 0 && fr.DeployAt >= 0, "lab fleet_rings: deploy_batch and deploy_every must be positive")
	bad(fr.MeasureFrom >= fr.deployEnd() && fr.MeasureFrom+time.Second <= fr.Duration,
		"lab fleet_rings: want the deploy over before measure_from and at least 1s of window before duration")
	bad(fr.Limit >= 1, "lab fleet_rings.limit: want at least 1")
	h := sc.Herd
	bad(h.Duration > 0 && h.Jitter > 0 && h.Ramp > 0, "lab herd: duration, jitter and ramp must be positive")
	r := sc.Resilience
	bad(len(r.Sizes) > 0 && r.MaxFailures > 0 && r.Trials > 0, "lab resilience: want sizes, max_failures and trials")
	for _, n := range sc.Run {
		bad(slices.Contains(Experiments(), n) || n == ExpPayments, "lab: unknown experiment %q", n)
	}
	return errors.Join(errs...)
}
