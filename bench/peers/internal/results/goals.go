package results

import "fmt"

// Judge judges docs/performance.md's goals on r, in a fixed order: raw,
// skewed, cold_join, tracing, connections and the TLS origins, overhead,
// then the h2 scenarios. A goal whose figures are missing from r is left
// out.
func (r *Results) Judge() []Goal {
	var gs []Goal
	if c, ok := r.Find(ScRaw, Corput); ok {
		if n, ok := r.Find(ScRaw, Nginx); ok && n.RPS > 0 {
			v := c.RPS / n.RPS
			gs = append(gs, Goal{Name: "raw throughput vs nginx", Target: "≥ 1.0× nginx req/s", Value: Round3(v), Met: v >= 1.0})
		}
	}
	if c, ok := r.Find(ScSkewed, Corput); ok {
		best, _, ok := r.bestOf(ScSkewed, Peers, func(x Result) (float64, bool) { return x.P99MS, x.P99MS > 0 })
		if ok {
			v := c.P99MS / best
			gs = append(gs, Goal{Name: "skewed p99 vs best peer", Target: "≤ 0.25× the best peer's p99", Value: Round3(v), Met: v <= 0.25,
				Note: fmt.Sprintf("corput %.1f ms, best peer %.1f ms", c.P99MS, best)})
		}
		gs = append(gs,
			Goal{Name: "skewed p99", Target: "≤ 150 ms", Value: Round3(c.P99MS), Met: c.P99MS <= 150},
			Goal{Name: "skewed heavy-class p99", Target: "≤ 175 ms", Value: Round3(c.HeavyP99MS), Met: c.HeavyP99MS > 0 && c.HeavyP99MS <= 175},
			Goal{Name: "skewed success", Target: "100 %", Value: Round3(c.SuccessRatio), Met: c.SuccessRatio == 1})
	}
	if c, ok := r.Find(ScColdJoin, Corput); ok && c.Join != nil {
		j := c.Join
		gs = append(gs,
			Goal{Name: "cold_join p99", Target: "≤ 175 ms", Value: Round3(c.P99MS), Met: c.P99MS <= 175},
			Goal{Name: "cold_join: the cold origin's peak in service + waiting, first 30 s", Target: "≤ 10", Value: float64(j.MaxInFlight), Met: j.MaxInFlight <= 10})
		if j.LateFromS < j.WindowS {
			gs = append(gs, Goal{Name: "cold_join: the cold origin's share from 60 s", Target: "≥ 0.8× a fair fifth", Value: Round3(j.LateVsFair), Met: j.LateVsFair >= 0.8,
				Note: fmt.Sprintf("%.1f %% of the requests from %d to %d s", 100*j.LateShare, j.LateFromS, j.WindowS)})
		}
	}
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == ScTracing {
			gs = append(gs, tracingGoals(&r.Scenarios[i])...)
		}
	}
	gs = append(gs, r.connectionGoals()...)
	if c, ok := r.Find(ScOverhead, Corput); ok {
		gs = append(gs, Goal{Name: "proxy-added p99 at half max throughput", Target: "≤ 1.5 ms", Value: Round3(c.AddedP99MS), Met: c.AddedP99MS <= 1.5,
			Note: fmt.Sprintf("corput p99 %.2f ms at %.0f req/s open loop, minus direct-to-origin p99 at the same rate", c.P99MS, c.RateRPS)})
	}
	return append(gs, r.h2Goals()...)
}

// bestOf is the least of f over the named proxies that have a result in
// scenario sc for which f has a figure (ok false when none has).
func (r *Results) bestOf(sc string, proxies []string, f func(Result) (float64, bool)) (best float64, who string, ok bool) {
	for _, p := range proxies {
		x, found := r.Find(sc, p)
		if !found {
			continue
		}
		if v, has := f(x); has && (!ok || v < best) {
			best, who, ok = v, p, true
		}
	}
	return best, who, ok
}

// h2Peers are the peers that speak HTTP/2 upstream (nginx does not).
var h2Peers = []string{HAProxy, Caddy}

// tracingGoals: with a blackholed receiver at 100 % sampling under the
// overhead load, no request fails, p99 stays within 10 % of tracing off,
// and the dropped-span counter rises (docs/tracing.md).
func tracingGoals(s *Scenario) []Goal {
	var off, bh *Result
	for i := range s.Results {
		x := &s.Results[i]
		if x.Tracing == nil || x.Tracing.Load != ScOverhead {
			continue
		}
		switch x.Tracing.Variant {
		case "off":
			off = x
		case "blackholed-100pct":
			bh = x
		}
	}
	if off == nil || bh == nil || off.P99MS <= 0 {
		return nil
	}
	r := bh.P99MS / off.P99MS
	return []Goal{
		{Name: "tracing: blackholed receiver, requests failed", Target: "0", Value: float64(bh.Errors), Met: bh.Errors == 0},
		{Name: "tracing: blackholed receiver, p99 / tracing off p99", Target: "≤ 1.10", Value: Round3(r), Met: r <= 1.10,
			Note: fmt.Sprintf("%.2f ms vs %.2f ms", bh.P99MS, off.P99MS)},
		{Name: "tracing: blackholed receiver, spans dropped", Target: "> 0", Value: bh.Tracing.SpansDropped, Met: bh.Tracing.SpansDropped > 0},
	}
}

// connectionGoals judges the upstream connections corput opens: during
// raw, skewed and cold join against nginx's, in front of TLS origins
// against the best peer's, and over many endpoints after warm-up.
func (r *Results) connectionGoals() []Goal {
	var gs []Goal
	if c, ok := r.Find(ScConnections, Corput); ok {
		if n, ok := r.Find(ScConnections, Nginx); ok && n.Conns["total"] > 0 {
			v := float64(c.Conns["total"]) / float64(n.Conns["total"])
			gs = append(gs, Goal{Name: "upstream connections, raw + skewed + cold join", Target: "≤ 1.0× nginx's", Value: Round3(v), Met: v <= 1,
				Note: fmt.Sprintf("corput %d, nginx %d", c.Conns["total"], n.Conns["total"])})
		}
	}
	up := func(x Result) *UpstreamTLS { return orEmpty(x.Upstream) }
	if c, ok := r.Find(ScTLSOrigins, Corput); ok {
		cu := up(c)
		for _, g := range []struct {
			name   string
			corput float64
			of     func(*UpstreamTLS) float64
		}{
			{"tls_origins: full handshakes", float64(cu.HandshakesFull), func(u *UpstreamTLS) float64 { return float64(u.HandshakesFull) }},
			{"tls_origins: upstream connections", float64(cu.Connections), func(u *UpstreamTLS) float64 { return float64(u.Connections) }},
			{"tls_origins: skewed p99", cu.P99MS, func(u *UpstreamTLS) float64 { return u.P99MS }},
		} {
			best, who, ok := r.bestOf(ScTLSOrigins, Peers, func(x Result) (float64, bool) { return g.of(up(x)), x.Upstream != nil })
			if ok {
				gs = append(gs, Goal{Name: g.name, Target: "≤ the best peer's", Value: g.corput, Met: g.corput <= best,
					Note: fmt.Sprintf("best peer %s %g", who, best)})
			}
		}
		best, who, ok := r.bestOf(ScTLSOrigins, h2Peers, func(x Result) (float64, bool) { return up(x).CPUusPerRequest, x.Upstream != nil })
		if ok {
			gs = append(gs, Goal{Name: "tls_origins: CPU µs per request on h2 origins", Target: "≤ the best h2 peer's", Value: cu.CPUusPerRequest,
				Met: cu.CPUusPerRequest <= best, Note: fmt.Sprintf("best h2 peer %s %.1f µs", who, best)})
		}
	}
	if c, ok := r.Find(ScManyEndpoints, Corput); ok {
		cu := up(c)
		gs = append(gs, Goal{Name: "many_endpoints: handshakes/s after warm-up", Target: "0", Value: cu.HandshakesPerS, Met: cu.WindowHandshakes == 0,
			Note: fmt.Sprintf("%d handshakes and %d new connections in %d s over %d endpoints", cu.WindowHandshakes, cu.WindowConnections, cu.WindowS, cu.Endpoints)})
	}
	return gs
}

// h2Goals judges the h2 scenarios: every stream held without an error,
// RSS per active stream against Caddy's, and CPU per request against the
// best h2 peer's.
func (r *Results) h2Goals() []Goal {
	var gs []Goal
	if c, ok := r.Find(ScH2Streams, Corput); ok && c.H2 != nil {
		gs = append(gs, Goal{Name: "h2_streams: streams held with 0 errors", Target: fmt.Sprintf("%d active, 0 errors", c.OfferedStreams),
			Value: float64(c.ActiveStreams), Met: c.ActiveStreams >= int64(c.OfferedStreams) && c.Errors == 0,
			Note: fmt.Sprintf("%d errors", c.Errors)})
		if x, ok := r.Find(ScH2Streams, Caddy); ok && x.H2 != nil && x.RSSPerStreamKiB > 0 {
			note := fmt.Sprintf("corput %.2f KiB, Caddy %.2f KiB", c.RSSPerStreamKiB, x.RSSPerStreamKiB)
			if hp, ok := r.Find(ScH2Streams, HAProxy); ok && hp.H2 != nil {
				note += fmt.Sprintf(", HAProxy %.2f KiB", hp.RSSPerStreamKiB)
			}
			v := c.RSSPerStreamKiB / x.RSSPerStreamKiB
			gs = append(gs, Goal{Name: "h2_streams: RSS per active stream vs Caddy", Target: "≤ 1.0× Caddy's", Value: Round3(v), Met: v <= 1, Note: note})
		}
	}
	if c, ok := r.Find(ScH2CPU, Corput); ok && c.H2 != nil && c.CPUUSPerRequest > 0 {
		best, who, ok := r.bestOf(ScH2CPU, h2Peers, func(x Result) (float64, bool) {
			if x.H2 == nil {
				return 0, false
			}
			return x.H2.CPUUSPerRequest, x.H2.CPUUSPerRequest > 0
		})
		if ok {
			v := c.CPUUSPerRequest / best
			gs = append(gs, Goal{Name: "h2_cpu: CPU per request on h2 origins vs the best h2 peer", Target: "≤ 1.0× the best of HAProxy and Caddy", Value: Round3(v), Met: v <= 1,
				Note: fmt.Sprintf("corput %.1f µs, %s %.1f µs", c.CPUUSPerRequest, who, best)})
		}
	}
	return gs
}
