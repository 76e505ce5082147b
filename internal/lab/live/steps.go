package live

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Step is one configuration of the fleet's upstream side: the spec's
// connection-pool techniques (gw-04, docs/spec.md) added one at a time.
type Step struct {
	ID    string `json:"id"`    // "0" … "5b"
	Title string `json:"title"` // what the step adds
	// Loops per gateway; 1 is one shared pool per endpoint.
	Loops int `json:"loops"`
	// Protocol towards the origins: h1 or h2c.
	Protocol string `json:"protocol"`
	// Subset is the subsetting algorithm: none or ringsteady.
	Subset string `json:"subset"`
	// SubsetSize is the endpoints each loop uses (ringsteady only).
	SubsetSize int `json:"subset_size,omitempty"`
	// Prewarm is pool.prewarm: the connections every (endpoint, loop) pool
	// opens before ready and keeps through idle eviction.
	Prewarm int `json:"prewarm"`
	// IdleTimeout and MaxLifetime are pool.idle_timeout and
	// pool.max_lifetime.
	IdleTimeout time.Duration `json:"idle_timeout_ns"`
	MaxLifetime time.Duration `json:"max_lifetime_ns"`
}

// Step IDs, in the order the spec adds the techniques (gw-04, docs/spec.md).
const (
	StepPerRequest = "0"
	StepShared     = "1"
	StepPerLoop    = "2"
	StepH2         = "3"
	StepSubset     = "4"
	StepIdleEager  = "5a"
	StepIdleTuned  = "5b"
)

// AggressiveIdle is step 5a's idle timeout: eviction well inside the
// traffic's inter-request gap.
const AggressiveIdle = 200 * time.Millisecond

// perRequestLifetime is step 0's pool.max_lifetime: a connection is older
// than this before its first response arrives, so it drains after that one
// request.
const perRequestLifetime = time.Millisecond

// StepIDs lists every step in order.
func StepIDs() []string {
	return []string{StepPerRequest, StepShared, StepPerLoop, StepH2, StepSubset, StepIdleEager, StepIdleTuned}
}

// Steps returns the steps for the run's scale, in order. Step 5b's idle
// timeout is tuned to the traffic: ten times the mean gap between two
// requests to one (endpoint, loop) pool of step 4, rounded up to a second,
// so a pool that carries traffic almost never sits idle that long.
func (o Options) steps() []Step {
	k, s := o.Loops, o.SubsetSize
	const defIdle, defLife = 60 * time.Second, 10 * time.Minute
	subset := Step{Loops: k, Protocol: "h2c", Subset: "ringsteady", SubsetSize: s, Prewarm: 1, IdleTimeout: defIdle, MaxLifetime: defLife}
	gap := o.meanGap(o.Gateways * subset.poolsPerGateway(o.Endpoints)).Round(time.Millisecond)
	eager, tuned := subset, subset
	eager.ID, eager.Prewarm, eager.IdleTimeout = StepIdleEager, 0, AggressiveIdle
	eager.Title = fmt.Sprintf("step 4, idle timeout %v vs a %v gap per pool (prewarm 0)", AggressiveIdle, gap)
	tuned.ID, tuned.Prewarm, tuned.IdleTimeout = StepIdleTuned, 0, o.tunedIdle()
	tuned.Title = fmt.Sprintf("step 4, idle timeout tuned to 10 gaps: %v (prewarm 0)", tuned.IdleTimeout)
	subset.ID, subset.Title = StepSubset, fmt.Sprintf("+ Ringsteady subsetting (%d of %d endpoints per loop)", s, o.Endpoints)
	return []Step{
		{ID: StepPerRequest, Title: "a connection per request (no reuse)", Loops: k, Protocol: "h1", Subset: "none",
			Prewarm: 0, IdleTimeout: perRequestLifetime, MaxLifetime: perRequestLifetime},
		{ID: StepShared, Title: "reuse, one shared pool per endpoint (1 loop)", Loops: 1, Protocol: "h1", Subset: "none",
			Prewarm: 1, IdleTimeout: defIdle, MaxLifetime: defLife},
		{ID: StepPerLoop, Title: fmt.Sprintf("per-loop pools (%d loops): the Zuul baseline G×K×N", k), Loops: k, Protocol: "h1", Subset: "none",
			Prewarm: 1, IdleTimeout: defIdle, MaxLifetime: defLife},
		{ID: StepH2, Title: "+ HTTP/2 multiplexing (h2c)", Loops: k, Protocol: "h2c", Subset: "none",
			Prewarm: 1, IdleTimeout: defIdle, MaxLifetime: defLife},
		subset, eager, tuned,
	}
}

// poolsPerGateway is the number of (endpoint, loop) pools one gateway of
// the step keeps.
func (st Step) poolsPerGateway(endpoints int) int {
	if st.Subset == "ringsteady" {
		return st.Loops * min(st.SubsetSize, endpoints)
	}
	return st.Loops * endpoints
}

// meanGap is the mean time between two requests to one pool of a step
// with this many pools across the fleet.
func (o Options) meanGap(pools int) time.Duration {
	return time.Duration(float64(pools) / o.Rate * float64(time.Second))
}

// tunedIdle is step 5b's idle timeout (see steps).
func (o Options) tunedIdle() time.Duration {
	gap := o.meanGap(o.Gateways * o.Loops * min(o.SubsetSize, o.Endpoints))
	return time.Duration(math.Ceil((10 * gap).Seconds())) * time.Second
}

// gatewayConfig is the YAML of gateway i of the step: every endpoint
// listed statically, one route, the step's loops, protocol, subset and
// pool settings; everything else at its default.
func (st Step) gatewayConfig(i, gateways int, endpoints []string) []byte {
	return st.config(fmt.Sprintf("step %s: %s", st.ID, st.Title), i, gateways, endpoints, nil, 0)
}

// config is the YAML of gateway i: routes are path prefixes added after
// the catch-all route, maxConns is pool.max_connections (0: the default,
// left out).
func (st Step) config(title string, i, gateways int, endpoints, routes []string, maxConns int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# corput lab --live, %s\n", title)
	b.WriteString("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n")
	fmt.Fprintf(&b, "loops: %d\nfleet: {instance: %d, size: %d}\n", st.Loops, i, gateways)
	b.WriteString("shutdown: {drain_timeout: 5s}\n")
	if len(routes) == 0 {
		b.WriteString("routes: [{path_prefix: /, origin: fleet}]\n")
	} else {
		b.WriteString("routes:\n  - {path_prefix: /, origin: fleet}\n")
		for _, r := range routes {
			fmt.Fprintf(&b, "  - {path_prefix: %s, origin: fleet}\n", r)
		}
	}
	b.WriteString("origins:\n  - name: fleet\n")
	fmt.Fprintf(&b, "    protocol: %s\n    endpoints:\n", st.Protocol)
	for _, e := range endpoints {
		fmt.Fprintf(&b, "      - {address: %q}\n", e)
	}
	if st.Subset == "ringsteady" {
		fmt.Fprintf(&b, "    subset: {algorithm: ringsteady, size: %d}\n", st.SubsetSize)
	} else {
		fmt.Fprintf(&b, "    subset: {algorithm: %s}\n", st.Subset)
	}
	fmt.Fprintf(&b, "    pool: {prewarm: %d, idle_timeout: %v, max_lifetime: %v", st.Prewarm, st.IdleTimeout, st.MaxLifetime)
	if maxConns > 0 {
		fmt.Fprintf(&b, ", max_connections: %d", maxConns)
	}
	b.WriteString("}\n")
	return []byte(b.String())
}
