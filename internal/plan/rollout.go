package plan

import (
	"fmt"
	"slices"

	"github.com/corput/corput/internal/subset"
)

// Rollout is what replacing one gateway costs in (loop, endpoint) pools
// opened, averaged over the position replaced, two ways:
//
//   - a StatefulSet's: the new pod comes back at the old one's ordinal and
//     pre-warms that position's pools; no other gateway moves.
//   - a Deployment's, positions from the control plane
//     (docs/deployment.md): the new pod joins at the end (size G+1, every
//     gateway re-subset at the new size), then the old pod's position is
//     released and the new pod moves into it (size G again).
//
// Both come from the ring that serves traffic (subset.Ringsteady's
// SetFleet, the path a gateway's resize takes); nothing is counted twice:
// the new pod's pools are those it pre-warms at the end plus those its move
// adds.
type Rollout struct {
	StatefulSetNew  float64 `json:"statefulset_new_gateway_pools"`
	ControlPlaneNew float64 `json:"control_plane_new_gateway_pools"`
	// ControlPlaneOthers is opened at the G−1 gateways that stay: 0 while
	// loops × size caps no subset count, G+1 included.
	ControlPlaneOthers float64 `json:"control_plane_other_gateways_pools"`
}

// rollout measures Rollout for a ring of addrs at config subset.size size.
func rollout(in Input, addrs []string, size int) (Rollout, error) {
	G, K := in.Gateways, in.Loops
	pl, err := subset.Ringsteady.Place(subset.Params{Origin: "plan", Fleet: in.fleet(), Sizing: subset.FixedSize(size), Seed: in.Seed}, addrs)
	if err != nil {
		return Rollout{}, fmt.Errorf("plan: rollout: %w", err)
	}
	at := func(gateways int) ([][]string, error) {
		if err := pl.SetFleet(subset.Fleet{Gateways: gateways, Loops: K}); err != nil {
			return nil, fmt.Errorf("plan: rollout at %d gateways: %w", gateways, err)
		}
		return clone(pl.Assignment()), nil
	}
	before := clone(pl.Assignment())
	surged, err := at(G + 1)
	if err != nil {
		return Rollout{}, err
	}
	after, err := at(G)
	if err != nil {
		return Rollout{}, err
	}
	// Pools the gateway at position g opens through both resizes.
	moved := make([]float64, G)
	total := 0.0
	for g := range G {
		for l := range K {
			f := g*K + l
			moved[g] += float64(opened(before[f], surged[f]) + opened(surged[f], after[f]))
		}
		total += moved[g]
	}
	var r Rollout
	for k := range G { // the position replaced
		r.ControlPlaneOthers += total - moved[k]
		for l := range K {
			r.StatefulSetNew += float64(len(before[k*K+l]))
			joined := surged[G*K+l]
			r.ControlPlaneNew += float64(len(joined) + opened(joined, after[k*K+l]))
		}
	}
	n := float64(G)
	return Rollout{StatefulSetNew: r.StatefulSetNew / n, ControlPlaneNew: r.ControlPlaneNew / n, ControlPlaneOthers: r.ControlPlaneOthers / n}, nil
}

// opened counts the members of after that before lacks.
func opened(before, after []string) int {
	had := make(map[string]bool, len(before))
	for _, b := range before {
		had[b] = true
	}
	n := 0
	for _, a := range after {
		if !had[a] {
			n++
		}
	}
	return n
}

// clone copies an assignment (a placement's may be shared and change).
func clone(a [][]string) [][]string {
	out := make([][]string, len(a))
	for i, ms := range a {
		out[i] = slices.Clone(ms)
	}
	return out
}
