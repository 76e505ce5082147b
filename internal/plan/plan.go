// Package plan is corput's capacity planner: given an origin of N endpoints
// behind G gateways with K loops each, it chooses the subset size and
// predicts what that size costs and buys — connections per gateway and
// fleet-wide, the churn of one endpoint change and of a fleet deploy, the
// share of a loop's capacity left when f endpoints of its subset fail (gw-04,
// "Subset size is a resilience knob", docs/spec.md), and the TLS handshake CPU saved
// against no subsetting.
//
// Every figure comes from the subset engine that serves traffic
// (internal/subset), never from a separate formula: subset sizes, subset
// counts and per-loop members from a Ringsteady placement of N endpoints for
// the fleet, churn from subset.Compare (so `corput plan` and `corput
// subsets --size S` print the same churn for the same inputs), and the
// no-subsetting baseline from the engine's none placement. The only
// arithmetic added here is turning pools into connections: an HTTP/1.1
// pool needs one connection per in-flight request, an HTTP/2 pool one per
// H2Streams of them, and every pool keeps at least one warm.
//
// docs/planner.md explains the inputs, the outputs and the recommendation
// rule.
package plan

import (
	"fmt"
	"math"
	"time"

	"github.com/corput/corput/internal/subset"
)

// Input is what the planner is asked. The zero values of the optional
// fields take the defaults of Defaults.
type Input struct {
	Origins      int           `json:"origins"`       // N endpoints of the origin
	Gateways     int           `json:"gateways"`      // G gateway instances
	Loops        int           `json:"loops"`         // K loops per gateway
	Subset       int           `json:"subset"`        // config subset.size to plan for; 0 = recommend one
	Failures     int           `json:"failures"`      // f endpoints of one subset that fail together
	FloorPercent int           `json:"floor_percent"` // capacity a loop must keep with f failed, in percent
	Concurrency  int           `json:"concurrency"`   // peak in-flight requests per loop to this origin
	H2Streams    int           `json:"h2_streams"`    // concurrent streams one h2 connection carries
	HandshakeMs  float64       `json:"handshake_ms"`  // CPU per TLS handshake, gateway and origin together
	Lifetime     time.Duration `json:"lifetime_ns"`   // pool.max_lifetime: each connection is re-made this often
	// HealthInterval is health_check.interval: each gateway probes every
	// endpoint its loops hold once per interval (0: no health checks).
	HealthInterval time.Duration `json:"health_interval_ns"`
	Trials         int           `json:"trials"` // memberships subset.Compare averages churn over
	Seed           uint64        `json:"seed"`   // seeds subset.Compare
}

// Defaults are the planner's defaults. Trials and Seed are those of
// `corput subsets`, so both commands measure the same memberships.
var Defaults = Input{
	Failures:       2,
	FloorPercent:   80,
	Concurrency:    64,
	H2Streams:      100,
	HandshakeMs:    2,
	Lifetime:       10 * time.Minute,
	HealthInterval: 5 * time.Second,
	Trials:         10,
	Seed:           1,
}

// withDefaults fills the optional fields whose zero means nothing: the
// floor, concurrency, h2 streams and trials. Failures, HandshakeMs, Lifetime
// and Seed keep a zero (no failures, free handshakes, no recycling); the CLI
// starts from Defaults.
func (in Input) withDefaults() Input {
	d := Defaults
	if in.FloorPercent == 0 {
		in.FloorPercent = d.FloorPercent
	}
	if in.Concurrency == 0 {
		in.Concurrency = d.Concurrency
	}
	if in.H2Streams == 0 {
		in.H2Streams = d.H2Streams
	}
	if in.Trials == 0 {
		in.Trials = d.Trials
	}
	return in
}

// Validate reports an input the planner cannot answer, naming the flag.
// Optional fields left at zero take their defaults first.
func (in Input) Validate() error {
	in = in.withDefaults()
	if err := in.scenario(0).Validate(); err != nil {
		return err
	}
	switch {
	case in.Subset == 1 || in.Subset < 0:
		return fmt.Errorf("--subset %d: must be 0 (recommend one) or at least 2", in.Subset)
	case in.Subset > in.Origins:
		return fmt.Errorf("--subset %d: larger than --origins %d; use at most %d", in.Subset, in.Origins, in.Origins)
	case in.Failures < 0 || in.Failures >= in.Origins:
		return fmt.Errorf("--failures %d: must be between 0 and %d (fewer than --origins)", in.Failures, in.Origins-1)
	case in.FloorPercent < 1 || in.FloorPercent > 100:
		return fmt.Errorf("--floor %d: must be a percentage between 1 and 100", in.FloorPercent)
	case in.Concurrency < 1:
		return fmt.Errorf("--concurrency %d: must be at least 1 (peak in-flight requests per loop)", in.Concurrency)
	case in.H2Streams < 1:
		return fmt.Errorf("--h2-streams %d: must be at least 1", in.H2Streams)
	case in.HandshakeMs < 0 || math.IsNaN(in.HandshakeMs):
		return fmt.Errorf("--handshake-ms %g: must be zero or more", in.HandshakeMs)
	case in.Lifetime < 0:
		return fmt.Errorf("--lifetime %s: must be zero (never recycle) or more", in.Lifetime)
	case in.HealthInterval < 0:
		return fmt.Errorf("--health-interval %s: must be zero (no health checks) or more", in.HealthInterval)
	}
	return nil
}

func (in Input) fleet() subset.Fleet { return subset.Fleet{Gateways: in.Gateways, Loops: in.Loops} }

// scenario is the subset.Compare scenario behind `corput subsets
// --origins N --gateways G --loops K --size size`.
func (in Input) scenario(size int) subset.Scenario {
	return subset.Scenario{Endpoints: in.Origins, Fleet: in.fleet(), Size: size, Trials: in.Trials, Seed: in.Seed}
}

// Conns is a number of connections (or of handshakes, or of CPU) for
// HTTP/1.1 pools at the input's concurrency and for HTTP/2 pools.
type Conns struct {
	H1 float64 `json:"h1"`
	H2 float64 `json:"h2"`
}

func (c Conns) scale(k float64) Conns { return Conns{H1: c.H1 * k, H2: c.H2 * k} }
func (c Conns) minus(d Conns) Conns   { return Conns{H1: c.H1 - d.H1, H2: c.H2 - d.H2} }

// Candidate is one subset size the ring can produce for the input: the
// config value subset.size = Size gives Subsets subsets of SubsetMin to
// SubsetMax endpoints.
type Candidate struct {
	Size                int     `json:"size"` // config subset.size
	Subsets             int     `json:"subsets"`
	SubsetMin           int     `json:"subset_min"`
	SubsetMax           int     `json:"subset_max"`
	LoopsPerSubsetMin   int     `json:"loops_per_subset_min"` // fleet-wide loops sharing one subset
	LoopsPerSubsetMax   int     `json:"loops_per_subset_max"`
	CapacityLeftPercent float64 `json:"capacity_left_percent"` // worst loop, f of its subset failed
	MeetsFloor          bool    `json:"meets_floor"`
	PerGateway          Conns   `json:"connections_per_gateway"` // the busiest gateway
	Fleet               Conns   `json:"connections_fleet"`
}

// Change is one event's churn: the engine's pool churn (subset.Churn, in
// (loop, endpoint) pairs, fleet-wide) and the connections the created pools
// open.
type Change struct {
	subset.Churn
	ConnectionsCreated Conns `json:"connections_created"`
}

// Figures are one placement's costs.
type Figures struct {
	Algorithm      string  `json:"algorithm"`
	PerGateway     Conns   `json:"connections_per_gateway"` // the busiest gateway
	Fleet          Conns   `json:"connections_fleet"`
	AddEndpoint    Change  `json:"add_endpoint"`
	RemoveEndpoint Change  `json:"remove_endpoint"`
	AddGateway     Change  `json:"add_gateway"`
	FleetDeploy    Conns   `json:"fleet_deploy"`             // connections re-made when every gateway restarts
	RecyclePerSec  Conns   `json:"recycle_handshakes_per_s"` // fleet-wide, from Lifetime; 0 without one
	SubsetSizeMean float64 `json:"subset_size_mean"`         // endpoints per loop
	Probes         Probes  `json:"health_probes"`            // zero without HealthInterval
}

// Probes are the active health checks' probes at HealthInterval when no
// live traffic makes them needless (the most they cost): a gateway probes
// each endpoint of the union of its loops' subsets once per interval.
// PerLoop is what probing once per loop (each loop its own subset) would
// cost instead, for comparison.
type Probes struct {
	PerEndpointMean float64 `json:"per_endpoint_per_s_mean"`
	PerEndpointMax  float64 `json:"per_endpoint_per_s_max"`
	Fleet           float64 `json:"fleet_per_s"`
	PerLoopMean     float64 `json:"per_loop_per_endpoint_per_s_mean"`
}

// Savings are what the plan saves against no subsetting, in handshake CPU
// (HandshakeMs per connection created) and in open connections.
type Savings struct {
	OpenConnections      Conns `json:"open_connections"`
	DeployCPUSeconds     Conns `json:"deploy_cpu_seconds"`       // one fleet deploy
	AddEndpointCPUSecond Conns `json:"add_endpoint_cpu_seconds"` // one endpoint added
	RecycleCores         Conns `json:"recycle_cpu_cores"`        // continuously, from Lifetime
	DeployHandshakes     Conns `json:"deploy_handshakes"`        // one fleet deploy
	RecycleHandshakes    Conns `json:"recycle_handshakes_per_s"` // continuously
}

// StickyCost is what a sticky origin (balancer.policy maglev or
// ring_hash) costs in connections: its key table spans the whole origin, so
// that a key reaches one endpoint from every loop and gateway, and every
// loop holds a pool per endpoint — the no-subsetting placement's
// connections, Times those of the chosen subset size.
type StickyCost struct {
	PerGateway Conns `json:"connections_per_gateway"`
	Fleet      Conns `json:"connections_fleet"`
	Times      Conns `json:"times_subsetting"`
}

// Plan is the planner's answer for one input.
type Plan struct {
	Input       Input           `json:"input"`
	Recommended bool            `json:"recommended"` // Size was chosen by the planner, not given
	Size        int             `json:"size"`        // config subset.size of the plan
	Chosen      Candidate       `json:"chosen"`
	Coverage    subset.Coverage `json:"coverage"` // loops per endpoint, from subset.Compare
	Subsetting  Figures         `json:"subsetting"`
	None        Figures         `json:"no_subsetting"`
	Saved       Savings         `json:"saved"`
	Sticky      StickyCost      `json:"sticky"`
	Rollout     Rollout         `json:"rollout"`    // one gateway replaced: StatefulSet or control plane
	Candidates  []Candidate     `json:"candidates"` // every size the ring can produce, largest first
	// SameAs is the `corput subsets` command whose ringsteady row has this
	// plan's churn and coverage.
	SameAs string `json:"same_as"`
}

// Make plans in: it lists the subset sizes the ring can produce, picks
// in.Subset or else the smallest size whose worst loop keeps FloorPercent of
// its capacity with Failures endpoints down, and measures that size.
func Make(in Input) (Plan, error) {
	in = in.withDefaults()
	if err := in.Validate(); err != nil {
		return Plan{}, err
	}
	addrs := endpoints(in.Origins)
	cands, err := candidates(in, addrs)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Input: in, Candidates: cands, Size: in.Subset}
	if p.Size == 0 {
		p.Recommended = true
		p.Size = recommend(cands)
	}
	ring, err := placement(in, subset.Ringsteady, addrs, p.Size)
	if err != nil {
		return Plan{}, err
	}
	p.Chosen = in.candidate(ring, p.Size)
	if p.Rollout, err = rollout(in, addrs, p.Size); err != nil {
		return Plan{}, err
	}
	rep, err := subset.Compare(in.scenario(p.Size), []subset.Algorithm{subset.Ringsteady})
	if err != nil {
		return Plan{}, err
	}
	p.Coverage = rep.Algorithms[0].Coverage
	p.Subsetting = figures(in, subset.NameRingsteady, ring, rep.Algorithms[0].Churn)

	none, err := placement(in, subset.None, addrs, p.Size)
	if err != nil {
		return Plan{}, err
	}
	// none is deterministic for a membership: one trial measures it.
	sc := in.scenario(p.Size)
	sc.Trials = 1
	rep, err = subset.Compare(sc, []subset.Algorithm{subset.None})
	if err != nil {
		return Plan{}, err
	}
	p.None = figures(in, subset.NameNone, none, rep.Algorithms[0].Churn)
	p.Saved = savings(in, p.Subsetting, p.None)
	p.Sticky = StickyCost{PerGateway: p.None.PerGateway, Fleet: p.None.Fleet,
		Times: Conns{H1: ratio(p.None.Fleet.H1, p.Subsetting.Fleet.H1), H2: ratio(p.None.Fleet.H2, p.Subsetting.Fleet.H2)}}
	p.SameAs = fmt.Sprintf("corput subsets --origins %d --gateways %d --loops %d --size %d --trials %d --seed %d",
		in.Origins, in.Gateways, in.Loops, p.Size, in.Trials, in.Seed)
	return p, nil
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// endpoints returns n distinct synthetic addresses; the ring's counts do not
// depend on what the addresses are.
func endpoints(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.%d.%d.%d:8080", byte(i>>16), byte(i>>8), byte(i))
	}
	return out
}

// candidates returns one Candidate per subset count the ring's sizing rule
// can reach for the input, largest subsets first. The config value of each
// is the largest subset it produces, and the engine's Sizing confirms that
// the value yields that count.
func candidates(in Input, addrs []string) ([]Candidate, error) {
	var out []Candidate
	for count := 1; count <= in.Origins && count <= in.fleet().Frontends(); count *= 2 {
		size := (in.Origins + count - 1) / count
		if size < 2 {
			break
		}
		if subset.FixedSize(size).Subsets(in.Origins, in.fleet().Frontends(), 0) != count {
			continue
		}
		p, err := placement(in, subset.Ringsteady, addrs, size)
		if err != nil {
			return nil, err
		}
		out = append(out, in.candidate(p, size))
	}
	return out, nil
}

// recommend returns the smallest candidate size that meets the floor, or
// the largest size (the most capacity the origin can give) when none does.
func recommend(cands []Candidate) int {
	best := cands[0].Size
	for _, c := range cands {
		if c.MeetsFloor {
			best = c.Size
		}
	}
	return best
}

// placed is a placement's connection counts.
type placed struct {
	snap       *subset.Snapshot
	pairs      int   // (loop, endpoint) pools, fleet-wide
	holders    []int // per endpoint, the gateways whose loops hold it
	perGateway Conns // the busiest gateway
	fleet      Conns
}

// placement places addrs with alg at config subset.size = size and counts
// the connections every loop's pools hold.
func placement(in Input, alg subset.Algorithm, addrs []string, size int) (placed, error) {
	pl, err := alg.Place(subset.Params{Origin: "plan", Fleet: in.fleet(), Sizing: subset.FixedSize(size), Seed: in.Seed}, addrs)
	if err != nil {
		return placed{}, fmt.Errorf("plan: place %s: %w", alg.Name(), err)
	}
	p := placed{snap: pl.Snapshot(), holders: make([]int, len(addrs))}
	index := make(map[string]int, len(addrs))
	for i, a := range addrs {
		index[a] = i
	}
	for g := range in.Gateways {
		var gw Conns
		for a := range p.snap.Homes(g) {
			p.holders[index[a]]++
		}
		for l := range in.Loops {
			n := len(p.snap.Members(g, l))
			p.pairs += n
			gw = gw.plus(in.pairConns(n).scale(float64(n)))
		}
		p.fleet = p.fleet.plus(gw)
		p.perGateway.H1 = max(p.perGateway.H1, gw.H1)
		p.perGateway.H2 = max(p.perGateway.H2, gw.H2)
	}
	return p, nil
}

func (c Conns) plus(d Conns) Conns { return Conns{H1: c.H1 + d.H1, H2: c.H2 + d.H2} }

// pairConns is the connections one (loop, endpoint) pool holds when the
// loop's Concurrency in-flight requests spread over members endpoints: one
// per request for h1, one per H2Streams requests for h2, and at least one
// kept warm.
func (in Input) pairConns(members int) Conns {
	if members == 0 {
		return Conns{}
	}
	perEndpoint := (in.Concurrency + members - 1) / members
	return Conns{
		H1: float64(max(1, perEndpoint)),
		H2: float64(max(1, (perEndpoint+in.H2Streams-1)/in.H2Streams)),
	}
}

// candidate reads a ring placement at config subset.size = size: its
// subsets, their users, the connections they hold and the capacity its worst
// loop keeps with Failures endpoints down.
func (in Input) candidate(p placed, size int) Candidate {
	c := Candidate{Size: size, Subsets: p.snap.Subsets(), SubsetMin: math.MaxInt, LoopsPerSubsetMin: math.MaxInt,
		PerGateway: p.perGateway, Fleet: p.fleet}
	for j := range c.Subsets {
		n, users := len(p.snap.Subset(j)), len(p.snap.Users(j))
		c.SubsetMin, c.SubsetMax = min(c.SubsetMin, n), max(c.SubsetMax, n)
		c.LoopsPerSubsetMin, c.LoopsPerSubsetMax = min(c.LoopsPerSubsetMin, users), max(c.LoopsPerSubsetMax, users)
	}
	left := max(0, c.SubsetMin-in.Failures)
	c.CapacityLeftPercent = 100 * float64(left) / float64(c.SubsetMin)
	c.MeetsFloor = left*100 >= in.FloorPercent*c.SubsetMin
	return c
}

// figures turns a placement's connection counts and the engine's churn into
// connections created per event.
func figures(in Input, name string, p placed, ch subset.ChurnSet) Figures {
	f := Figures{Algorithm: name, PerGateway: p.perGateway, Fleet: p.fleet, FleetDeploy: p.fleet,
		SubsetSizeMean: float64(p.pairs) / float64(in.fleet().Frontends())}
	perPair := in.pairConns(int(math.Round(f.SubsetSizeMean)))
	change := func(c subset.Churn) Change {
		return Change{Churn: c, ConnectionsCreated: perPair.scale(c.PairsCreated)}
	}
	f.AddEndpoint, f.RemoveEndpoint, f.AddGateway = change(ch.AddEndpoint), change(ch.RemoveEndpoint), change(ch.AddGateway)
	if in.Lifetime > 0 {
		f.RecyclePerSec = p.fleet.scale(1 / in.Lifetime.Seconds())
	}
	if in.HealthInterval > 0 {
		f.Probes = probes(in, p)
	}
	return f
}

// probes counts a placement's health-check probes per second.
func probes(in Input, p placed) Probes {
	per := 1 / in.HealthInterval.Seconds()
	var sum, most int
	for _, h := range p.holders {
		sum += h
		most = max(most, h)
	}
	n := float64(len(p.holders))
	return Probes{
		PerEndpointMean: float64(sum) / n * per,
		PerEndpointMax:  float64(most) * per,
		Fleet:           float64(sum) * per,
		PerLoopMean:     float64(p.pairs) / n * per,
	}
}

// savings compares the subsetting figures with the none baseline.
func savings(in Input, sub, none Figures) Savings {
	cpu := in.HandshakeMs / 1000
	s := Savings{
		OpenConnections:   none.Fleet.minus(sub.Fleet),
		DeployHandshakes:  none.FleetDeploy.minus(sub.FleetDeploy),
		RecycleHandshakes: none.RecyclePerSec.minus(sub.RecyclePerSec),
	}
	s.DeployCPUSeconds = s.DeployHandshakes.scale(cpu)
	s.AddEndpointCPUSecond = none.AddEndpoint.ConnectionsCreated.minus(sub.AddEndpoint.ConnectionsCreated).scale(cpu)
	s.RecycleCores = s.RecycleHandshakes.scale(cpu)
	return s
}
