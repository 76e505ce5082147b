package balance

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corput/corput/internal/config"
)

// Policy names a picking algorithm (config key balancer.policy).
type Policy string

// The policies. LeastWork is the default: it met every target where
// PeakEWMA, the seed's "Weighted Least Request with Peak EWMA" (LB-PAY-001,
// Option C), missed the tail under uneven work and cold joins
// (docs/decisions.md, "The default policy").
const (
	RoundRobin   Policy = "round_robin"   // baseline: weighted rotation
	Random       Policy = "random"        // baseline: weighted uniform draw
	P2C          Policy = "p2c"           // fewest (active+1)/weight of k distinct random endpoints
	LeastRequest Policy = "least_request" // equal weights: p2c; unequal: EDF on weight/(active+1)^bias
	PeakEWMA     Policy = "peak_ewma"     // fewest ewma×(active+1)/weight of k distinct random endpoints
	LeastWork    Policy = "least_work"    // least slowness × (work in flight / capacity + cost) of k candidates
	Maglev       Policy = "maglev"        // a key's endpoint by Maglev's lookup table, under bounded load
	RingHash     Policy = "ring_hash"     // a key's endpoint by a ketama ring, under bounded load
)

// Policies lists every policy that needs no key, the fallback's default
// first: the fallbacks a sticky policy may take.
func Policies() []Policy { return []Policy{PeakEWMA, LeastWork, LeastRequest, P2C, RoundRobin, Random} }

// StickyPolicies lists the policies that route a request by its key.
func StickyPolicies() []Policy { return []Policy{Maglev, RingHash} }

// Sticky reports whether p routes a request by its key (maglev, ring_hash).
func (p Policy) Sticky() bool { return p == Maglev || p == RingHash }

// CodeUnboundedQueue is the diagnostic for a pending bound that is not in
// 1..MaxPendingCeiling: the seed allows at most 50 pending requests per
// host and rejects an unbounded queue (INV-LB-05, ADV-UQ-01).
const CodeUnboundedQueue = config.CodeUnboundedQueue

// MaxPendingCeiling is the largest pending bound per endpoint the seed allows.
const MaxPendingCeiling = config.MaxPendingCeiling

// ErrUnboundedQueue is wrapped by Config.Validate (and so by NewOrigin) when
// MaxPending is zero, negative or above MaxPendingCeiling.
var ErrUnboundedQueue = errors.New(CodeUnboundedQueue)

// Config is everything an Origin needs to know about balancing. Start from
// DefaultConfig (or FromConfig): a zero field is a value, not "use the
// default", so a zero MaxPending is refused rather than silently raised.
type Config struct {
	Policy Policy
	// Choices is how many distinct endpoints p2c, least_request (equal
	// weights) and peak_ewma sample per pick; 2 is "power of two choices".
	Choices int
	// EWMADecay is Peak EWMA's time constant τ: an estimate left alone for
	// τ falls to 1/e of its value, so an idle slow endpoint is tried again.
	EWMADecay time.Duration
	// DefaultRTT is the Peak EWMA estimate of an endpoint never measured
	// (linkerd's 30 ms).
	DefaultRTT time.Duration
	// TieRatio: peak_ewma compares two candidates by latency only when
	// their mean latencies differ by at least this factor; closer, the
	// one with fewer requests in flight per weight wins (see peakEWMA).
	// 1 always compares latency.
	TieRatio float64
	// ActiveRequestBias is least_request's exponent on (active+1) for
	// unequal weights (Envoy's active_request_bias, 1.0).
	ActiveRequestBias float64

	SlowStart SlowStartConfig
	Outlier   OutlierConfig
	// PanicThresholdPercent: while fewer than this share of the origin's
	// endpoints are healthy, every loop routes over its whole subset,
	// ejected endpoints included. 0 disables panic routing.
	PanicThresholdPercent int
	Zone                  ZoneConfig
	// MaxPending bounds the requests admitted to one endpoint and not yet
	// finished with admission (Endpoint.TryAdmit); 1..50.
	MaxPending int

	// The sticky policies (maglev, ring_hash; sticky.go).

	// BalanceFactor is bounded load's c: an endpoint takes a keyed request
	// only while its requests in flight stay under ⌈c·(m+1)·w/W⌉ (m: the
	// origin's requests in flight; w/W: its share of the candidates'
	// weight, 1/n for equal weights); 1..100.
	BalanceFactor float64
	// Fallback is the policy of requests without a key (not sticky).
	Fallback Policy
	// TableSize is maglev's lookup table size M, a prime; a membership of
	// more than M/100 endpoints takes the next prime ≥ 100·N.
	TableSize int
}

// SlowStartConfig ramps an endpoint that joined or returned from ejection:
// effective weight = weight × max(MinWeightPercent/100, (t/Window)^(1/Aggression)).
type SlowStartConfig struct {
	Window           time.Duration // 0 disables slow start
	MinWeightPercent int           // 1..100
	Aggression       float64       // > 0; 1.0 is linear
}

// OutlierConfig is passive ejection on consecutive failures.
type OutlierConfig struct {
	// Consecutive5xx failures (5xx responses or connect failures) in a row
	// eject an endpoint, synchronously inside the failing Done call.
	Consecutive5xx int
	// The n-th ejection in a row lasts BaseEjectionTime × n, at most
	// MaxEjectionTime. The count n drops by one for every
	// BaseEjectionTime the endpoint spends back in service.
	BaseEjectionTime time.Duration
	MaxEjectionTime  time.Duration
	// MaxEjectionPercent caps ejected endpoints at this share of the origin;
	// one endpoint may always be ejected.
	MaxEjectionPercent int
}

// ZoneConfig is zone-aware routing.
type ZoneConfig struct {
	// Local is the gateway's zone; "" turns zone routing and zone counting
	// off.
	Local string
	// LocalPercent of requests stay in the local zone while all of its
	// endpoints are healthy; the share shrinks with the local zone's
	// healthy capacity and the rest spills to the other zones.
	LocalPercent int
	// MinOriginSize: an origin with fewer endpoints is not zone-routed
	// (Envoy's min_cluster_size, 6): its zones are too small to prefer.
	MinOriginSize int
}

// Defaults of the two keys the configuration file does not have.
const (
	defaultActiveRequestBias = 1.0 // Envoy's active_request_bias
	defaultMinOriginSize     = 6   // Envoy's zone-aware min_cluster_size
)

// DefaultConfig returns the defaults of the payment cluster's seed
// (LB-PAY-001, docs/spec.md) and of docs/references.md:
// those of config.DefaultOrigin, the one place they are written, plus the
// keys the file does not have.
func DefaultConfig() Config {
	o := config.DefaultOrigin()
	return FromConfig(&o)
}

// FromConfig maps an origin of the configuration file onto a Config. Keys
// the file does not have (active_request_bias, the zone minimum) take their
// defaults.
func FromConfig(o *config.Origin) Config {
	return Config{
		Policy:                Policy(o.Balancer.Policy),
		Choices:               o.Balancer.Choices,
		EWMADecay:             o.Balancer.EWMADecay,
		DefaultRTT:            o.Balancer.DefaultRTT,
		TieRatio:              o.Balancer.TieRatio,
		ActiveRequestBias:     defaultActiveRequestBias,
		SlowStart:             SlowStartConfig(o.SlowStart),
		Outlier:               OutlierConfig(o.Outlier),
		PanicThresholdPercent: o.PanicThresholdPercent,
		Zone:                  ZoneConfig{Local: o.Zone.Local, LocalPercent: o.Zone.LocalPercent, MinOriginSize: defaultMinOriginSize},
		MaxPending:            int(o.Pool.MaxPending),
		BalanceFactor:         o.Balancer.BalanceFactor,
		Fallback:              Policy(o.Balancer.Fallback),
		TableSize:             o.Balancer.TableSize,
	}
}

// maxChoices bounds Choices so that sampling fits a fixed array on the stack.
const maxChoices = 16

// Validate reports every out-of-range field at once, each naming its
// configuration key and a valid value.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf(key+": "+format, args...))
	}
	all := append(Policies(), StickyPolicies()...)
	if !slices.Contains(all, c.Policy) {
		names := make([]string, 0, len(all))
		for _, p := range all {
			names = append(names, string(p))
		}
		bad("balancer.policy", "%q is not a policy; use one of %s", c.Policy, strings.Join(names, ", "))
	}
	if c.Policy.Sticky() {
		if c.Fallback.Sticky() || !slices.Contains(Policies(), c.Fallback) {
			bad("balancer.fallback", "%q is not a policy for requests without a key; use peak_ewma (the default), least_work, least_request, p2c, round_robin or random", c.Fallback)
		}
		if !(c.BalanceFactor >= 1 && c.BalanceFactor <= 100) {
			bad("balancer.balance_factor", "%v is outside 1..100; 1.25 is the default", c.BalanceFactor)
		}
		if c.Policy == Maglev && (c.TableSize > config.MaxTableSize || !config.IsPrime(c.TableSize)) {
			bad("balancer.table_size", "%d is not a prime in 2..%d; %d is the default", c.TableSize, config.MaxTableSize, config.DefaultTableSize)
		}
	}
	if c.Choices < 2 || c.Choices > maxChoices {
		bad("balancer.choices", "%d is outside 2..%d; 2 is the default", c.Choices, maxChoices)
	}
	if c.EWMADecay <= 0 {
		bad("balancer.ewma_decay", "%v must be positive; 10s is the default", c.EWMADecay)
	}
	if !(c.TieRatio >= 1 && c.TieRatio <= 10) {
		bad("balancer.tie_ratio", "%v is outside 1..10; 1.5 is the default", c.TieRatio)
	}
	if c.DefaultRTT <= 0 {
		bad("balancer.default_rtt", "%v must be positive; 30ms is the default", c.DefaultRTT)
	}
	if !(c.ActiveRequestBias >= 0 && c.ActiveRequestBias <= 10) {
		bad("balancer.active_request_bias", "%v is outside [0, 10]; 1.0 is the default", c.ActiveRequestBias)
	}
	ss := c.SlowStart
	if ss.Window < 0 {
		bad("slow_start.window", "%v is negative; 60s is the default, 0 turns slow start off", ss.Window)
	}
	if ss.MinWeightPercent < 1 || ss.MinWeightPercent > 100 {
		bad("slow_start.min_weight_percent", "%d is outside 1..100; 10 is the default", ss.MinWeightPercent)
	}
	if !(ss.Aggression > 0 && ss.Aggression <= 100) {
		bad("slow_start.aggression", "%v is outside (0, 100]; 1.0 (linear) is the default", ss.Aggression)
	}
	od := c.Outlier
	if od.Consecutive5xx < 1 {
		bad("outlier.consecutive_5xx", "%d must be at least 1; 3 is the default", od.Consecutive5xx)
	}
	if od.BaseEjectionTime <= 0 {
		bad("outlier.base_ejection_time", "%v must be positive; 30s is the default", od.BaseEjectionTime)
	}
	if od.MaxEjectionTime < od.BaseEjectionTime {
		bad("outlier.max_ejection_time", "%v is shorter than base_ejection_time %v; 300s is the default", od.MaxEjectionTime, od.BaseEjectionTime)
	}
	if od.MaxEjectionPercent < 0 || od.MaxEjectionPercent > 100 {
		bad("outlier.max_ejection_percent", "%d is outside 0..100; 20 is the default", od.MaxEjectionPercent)
	}
	if c.PanicThresholdPercent < 0 || c.PanicThresholdPercent > 100 {
		bad("panic_threshold_percent", "%d is outside 0..100; 80 is the default", c.PanicThresholdPercent)
	}
	if c.Zone.LocalPercent < 0 || c.Zone.LocalPercent > 100 {
		bad("zone.local_percent", "%d is outside 0..100; 85 is the default", c.Zone.LocalPercent)
	}
	if c.Zone.MinOriginSize < 0 {
		bad("zone.min_origin_size", "%d is negative; 6 is the default", c.Zone.MinOriginSize)
	}
	if c.MaxPending < 1 || c.MaxPending > MaxPendingCeiling {
		errs = append(errs, fmt.Errorf("pool.max_pending: %w: %d pending requests per endpoint is not a bound the seed allows (INV-LB-05); use 1..%d, or leave the key out for %d",
			ErrUnboundedQueue, c.MaxPending, MaxPendingCeiling, MaxPendingCeiling))
	}
	return errors.Join(errs...)
}
