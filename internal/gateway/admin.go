package gateway

import "github.com/corput/corput/internal/cluster"

// Origins implements telemetry.AdminSource.
func (g *Gateway) Origins() any {
	out := make([]cluster.OriginView, 0, len(g.list))
	for _, o := range g.list {
		out = append(out, o.View())
	}
	return out
}

// Subsets implements telemetry.AdminSource.
func (g *Gateway) Subsets(name string) (any, bool) {
	o, ok := g.origins[name]
	if !ok {
		return nil, false
	}
	return o.Subsets(), true
}

// refreshGauges brings the state gauges up to date before a scrape.
func (g *Gateway) refreshGauges() {
	for _, o := range g.list {
		o.RefreshGauges()
	}
}
