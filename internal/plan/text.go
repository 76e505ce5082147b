package plan

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// WriteText prints the plan for people: the sizes the ring can produce,
// then the chosen size's costs next to no subsetting.
func (p Plan) WriteText(w io.Writer) error {
	in := p.Input
	fmt.Fprintf(w, "corput plan: %d endpoints, %d gateways × %d loops = %d loops; %d endpoints failing; capacity floor %d %%\n",
		in.Origins, in.Gateways, in.Loops, in.Gateways*in.Loops, in.Failures, in.FloorPercent)
	fmt.Fprintf(w, "h1 pools hold one connection per in-flight request (%d per loop at peak), h2 pools one per %d\n\n",
		in.Concurrency, in.H2Streams)

	fmt.Fprintln(w, "subset sizes the ring can produce:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "subset.size\tsubsets\tendpoints each\tloops each\tcapacity left, %d failed\tconns/gateway h2\th1\t\n", in.Failures)
	for _, c := range p.Candidates {
		mark := ""
		switch {
		case c.Size == p.Size && p.Recommended:
			mark = "  ← recommended"
		case c.Size == p.Size:
			mark = "  ← chosen"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%.1f %%\t%.0f\t%.0f\t%s\n", c.Size, c.Subsets, span(c.SubsetMin, c.SubsetMax),
			span(c.LoopsPerSubsetMin, c.LoopsPerSubsetMax), c.CapacityLeftPercent, c.PerGateway.H2, c.PerGateway.H1, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	c := p.Chosen
	fmt.Fprintln(w)
	switch {
	case p.Recommended && c.MeetsFloor:
		fmt.Fprintf(w, "recommended subset.size: %d — the smallest subset whose loops keep ≥ %d %% of their capacity with %d endpoints down\n",
			p.Size, in.FloorPercent, in.Failures)
	case p.Recommended:
		fmt.Fprintf(w, "no subset size keeps %d %% of a loop's capacity with %d endpoints down; subset.size %d keeps the most (%.1f %%)\n",
			in.FloorPercent, in.Failures, p.Size, c.CapacityLeftPercent)
	case c.MeetsFloor:
		fmt.Fprintf(w, "subset.size %d keeps the %d %% floor with %d endpoints down\n", p.Size, in.FloorPercent, in.Failures)
	default:
		fmt.Fprintf(w, "subset.size %d is BELOW the %d %% floor with %d endpoints down; use a larger size\n", p.Size, in.FloorPercent, in.Failures)
	}
	fmt.Fprintf(w, "  %d subsets of %s endpoints, each used by %s loops of the fleet; loops per endpoint max/mean %.3f\n",
		c.Subsets, span(c.SubsetMin, c.SubsetMax), span(c.LoopsPerSubsetMin, c.LoopsPerSubsetMax), p.Coverage.MaxOverMean)
	fmt.Fprintf(w, "  capacity left when %d endpoints of a loop's subset fail: %.1f %% (%d of %d)\n\n",
		in.Failures, c.CapacityLeftPercent, max(0, c.SubsetMin-in.Failures), c.SubsetMin)

	p.writeCosts(w)
	st := p.Sticky
	fmt.Fprintf(w, "\nsticky origin (balancer.policy maglev or ring_hash): its key table spans the whole origin, so every loop\n")
	fmt.Fprintf(w, "holds a pool per endpoint, whatever subset says: %s / %s connections per gateway (h2 / h1), %s / %s fleet-wide,\n",
		num(st.PerGateway.H2), num(st.PerGateway.H1), num(st.Fleet.H2), num(st.Fleet.H1))
	fmt.Fprintf(w, "%s× / %s× those of subset.size %d: the price of one endpoint per key from every loop and gateway\n",
		num(st.Times.H2), num(st.Times.H1), p.Size)
	s := p.Saved
	fmt.Fprintf(w, "\nhandshake CPU saved at %g ms per handshake (h2 / h1):\n", in.HandshakeMs)
	fmt.Fprintf(w, "  per fleet deploy   %s / %s CPU-seconds (%.0f / %.0f handshakes)\n",
		num(s.DeployCPUSeconds.H2), num(s.DeployCPUSeconds.H1), s.DeployHandshakes.H2, s.DeployHandshakes.H1)
	fmt.Fprintf(w, "  per endpoint added %s / %s CPU-seconds\n", num(s.AddEndpointCPUSecond.H2), num(s.AddEndpointCPUSecond.H1))
	if in.Lifetime > 0 {
		fmt.Fprintf(w, "  continuously       %s / %s CPU cores (every connection re-made each max_lifetime %s)\n",
			num(s.RecycleCores.H2), num(s.RecycleCores.H1), in.Lifetime)
	}
	fmt.Fprintf(w, "\nchurn and coverage are the ringsteady row of: %s\n", p.SameAs)
	return nil
}

// writeCosts prints the chosen size's figures next to no subsetting.
func (p Plan) writeCosts(w io.Writer) {
	sub, none := p.Subsetting, p.None
	line := func(label, a, b string) { fmt.Fprintf(w, "  %-40s %16s %16s\n", label, a, b) }
	conns := func(label string, a, b Conns) {
		line(label+", h2", num(a.H2), num(b.H2))
		line(label+", h1", num(a.H1), num(b.H1))
	}
	line("", fmt.Sprintf("subset.size %d", p.Size), "no subsetting")
	conns("open connections per gateway", sub.PerGateway, none.PerGateway)
	conns("open connections fleet-wide", sub.Fleet, none.Fleet)
	for _, ev := range []struct {
		label string
		a, b  Change
	}{
		{"one endpoint added", sub.AddEndpoint, none.AddEndpoint},
		{"one endpoint removed", sub.RemoveEndpoint, none.RemoveEndpoint},
		{"one gateway added", sub.AddGateway, none.AddGateway},
	} {
		line(ev.label+": pools opened / closed", fmt.Sprintf("%.0f / %.0f", ev.a.PairsCreated, ev.a.PairsRemoved),
			fmt.Sprintf("%.0f / %.0f", ev.b.PairsCreated, ev.b.PairsRemoved))
		line("  loops touched", num(ev.a.FrontendsTouched), num(ev.b.FrontendsTouched))
		conns("  connections created", ev.a.ConnectionsCreated, ev.b.ConnectionsCreated)
	}
	conns("fleet deploy: connections re-made", sub.FleetDeploy, none.FleetDeploy)
	if p.Input.Lifetime > 0 {
		conns(fmt.Sprintf("recycling every %s, handshakes/s", p.Input.Lifetime), sub.RecyclePerSec, none.RecyclePerSec)
	}
	if iv := p.Input.HealthInterval; iv > 0 {
		a, b := sub.Probes, none.Probes
		line(fmt.Sprintf("health probes per endpoint per s, at %s", iv), num(a.PerEndpointMean), num(b.PerEndpointMean))
		line("  the most probed endpoint", num(a.PerEndpointMax), num(b.PerEndpointMax))
		line("  fleet-wide probes per s", num(a.Fleet), num(b.Fleet))
		line("  probing once per loop instead", num(a.PerLoopMean), num(b.PerLoopMean))
	}
	r := p.Rollout
	fmt.Fprintf(w, "\none gateway replaced by a rolling update (subset.size %d), pools opened:\n", p.Size)
	fmt.Fprintf(w, "  StatefulSet (back at its ordinal)               %s at the new gateway, 0 at the others\n", num(r.StatefulSetNew))
	fmt.Fprintf(w, "  Deployment, positions from the control plane   %s at the new gateway, %s at the others\n",
		num(r.ControlPlaneNew), num(r.ControlPlaneOthers))
}

// span prints a..b, or a alone when they are equal.
func span(a, b int) string {
	if a == b {
		return strconv.Itoa(a)
	}
	return fmt.Sprintf("%d–%d", a, b)
}

// num prints a figure with the precision its size deserves: whole numbers
// without decimals.
func num(x float64) string {
	switch {
	case x == math.Trunc(x):
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 100 || x <= -100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10 || x <= -10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
}
