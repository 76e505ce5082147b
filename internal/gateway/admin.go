package gateway

import "github.com/corput/corput/internal/cluster"

// Origins implements telemetry.AdminSource.
func (g *Gateway) Origins() any {
	list := g.st().list
	out := make([]cluster.OriginView, 0, len(list))
	for _, o := range list {
		out = append(out, o.View())
	}
	return out
}

// Subsets implements telemetry.AdminSource.
func (g *Gateway) Subsets(name string) (any, bool) {
	o, ok := g.st().origins[name]
	if !ok {
		return nil, false
	}
	return o.Subsets(), true
}

// refreshGauges brings the state gauges up to date before a scrape.
func (g *Gateway) refreshGauges() {
	for _, o := range g.st().list {
		o.RefreshGauges()
	}
}
