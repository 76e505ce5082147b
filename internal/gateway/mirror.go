package gateway

import (
	"sync/atomic"

	"github.com/corput/corput/internal/proxy"
)

// setMirrors gives st's table the routes' mirrorings (routes[].mirror;
// docs/gateway.md, "Mirroring"), their counters bound once here: a
// request looks no label up. A route of prev (the state a reload
// replaces) with the same name and shadow keeps its count of mirrors in
// flight, so that max_in_flight holds across the reload.
func (g *Gateway) setMirrors(st *state, prev *state) {
	cfg := st.cfg
	kept := map[string]*atomic.Int64{}
	if prev != nil {
		for i, rt := range prev.cfg.Routes {
			if i < len(prev.table.Mirrors) && prev.table.Mirrors[i] != nil && rt.Mirror != nil {
				kept[rt.RouteName()+"\x00"+rt.Mirror.Origin] = prev.table.Mirrors[i].InFlight
			}
		}
	}
	st.shadowOnly = map[string]bool{}
	for _, rt := range cfg.Routes {
		if rt.Mirror != nil {
			st.shadowOnly[rt.Mirror.Origin] = true
		}
	}
	for _, rt := range cfg.Routes {
		for _, o := range rt.Origins() {
			delete(st.shadowOnly, o)
		}
	}
	st.table.Mirrors = make([]*proxy.Mirror, len(cfg.Routes))
	for i, rt := range cfg.Routes {
		mc := rt.Mirror
		if mc == nil || st.origins[mc.Origin] == nil {
			continue
		}
		name := rt.RouteName()
		m := &proxy.Mirror{
			Shadow: st.origins[mc.Origin], MaxInFlight: int64(mc.MaxInFlight), MaxBody: int64(mc.MaxBodyBytes),
			InFlight: kept[name+"\x00"+mc.Origin], Runner: g.shadows,
			Mirrored: g.metrics.RouteMirrored.WithLabelValues(name, mc.Origin),
		}
		if m.InFlight == nil {
			m.InFlight = new(atomic.Int64)
		}
		for why, reason := range proxy.DropReasons {
			m.Dropped[why] = g.metrics.RouteMirrorDropped.WithLabelValues(name, mc.Origin, reason)
		}
		m.SetPercent(mc.Percent)
		st.table.Mirrors[i] = m
	}
}
