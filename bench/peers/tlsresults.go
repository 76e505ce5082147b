package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/corput/corput/internal/report"
)

// upstreamTLSTable is the table of tls_origins or many_endpoints.
func upstreamTLSTable(s Scenario, c Result) report.Table {
	t := report.Table{Title: s.Name + ": " + s.Description, Note: s.Note}
	cu := c.Upstream
	if cu == nil {
		cu = &UpstreamTLS{}
	}
	if s.Name == scManyEndpoints {
		t.Header = []string{"proxy", "handshakes/s in the window", "handshakes in the window", "new connections in the window", "open connections at its end",
			"warm-up: handshakes, connections", "p99 ms", "CPU µs/request", "negotiated"}
		for _, x := range s.Results {
			u := orEmpty(x.Upstream)
			t.Rows = append(t.Rows, []string{x.Proxy, fmt.Sprintf("%.2f", u.HandshakesPerS), strconv.FormatInt(u.WindowHandshakes, 10),
				strconv.FormatInt(u.WindowConnections, 10), strconv.FormatInt(u.OpenConnections, 10),
				fmt.Sprintf("%d, %d", u.WarmupHandshakes, u.WarmupConnectionsIn), ms(u.P99MS), fmt.Sprintf("%.1f", u.CPUusPerRequest), negotiatedCell(u.Negotiated)})
		}
		return t
	}
	t.Header = []string{"proxy", "full handshakes", "resumed", "connections", "skewed p99 ms", "raw req/s", "raw p99 ms",
		"CPU µs/request (skewed, raw)", "corput/peer full handshakes", "corput/peer connections", "corput/peer p99", "negotiated"}
	for _, x := range s.Results {
		u := orEmpty(x.Upstream)
		t.Rows = append(t.Rows, []string{x.Proxy, strconv.FormatInt(u.HandshakesFull, 10), strconv.FormatInt(u.HandshakesResumed, 10),
			strconv.FormatInt(u.Connections, 10), ms(u.P99MS), fmt.Sprintf("%.0f", u.RawRPS), ms(u.RawP99MS),
			fmt.Sprintf("%.1f (%.1f, %.1f)", u.CPUusPerRequest, u.SkewedCPUusPerRequest, u.RawCPUusPerRequest),
			ratio(float64(cu.HandshakesFull), float64(u.HandshakesFull), x.Proxy), ratio(float64(cu.Connections), float64(u.Connections), x.Proxy),
			ratio(cu.P99MS, u.P99MS, x.Proxy), negotiatedCell(u.Negotiated)})
	}
	return t
}

func orEmpty(u *UpstreamTLS) *UpstreamTLS {
	if u == nil {
		return &UpstreamTLS{}
	}
	return u
}

// negotiatedCell is "TLSv1.3 TLS_AES_128_GCM_SHA256 h2 × 32; …".
func negotiatedCell(m map[string]int64) string {
	if len(m) == 0 {
		return "—"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s × %d", k, m[k])
	}
	return strings.Join(parts, "; ")
}

// roundsCell is every round's req/s, in the order they ran.
func roundsCell(rs []Result) string {
	if len(rs) < 2 {
		return "—"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.0f", r.RPS)
	}
	return strings.Join(parts, ", ")
}

// peers are the proxies corput is compared with.
var peers = []string{nameNginx, nameHAProxy, nameCaddy}

// bestPeer is the least of f over the peers that have a result in
// scenario sc (ok false when none has).
func (r *Results) bestPeer(sc string, f func(Result) (float64, bool)) (best float64, who string, ok bool) {
	for _, p := range peers {
		x, found := r.find(sc, p)
		if !found {
			continue
		}
		if v, has := f(x); has && (!ok || v < best) {
			best, who, ok = v, p, true
		}
	}
	return best, who, ok
}

// connectionGoals judges issue 20's goals on r: the connections, the
// TLS origins and the many endpoints.
func (r *Results) connectionGoals() []Goal {
	var gs []Goal
	if c, ok := r.find(scConnections, nameCorput); ok {
		if n, ok := r.find(scConnections, nameNginx); ok && n.Conns["total"] > 0 {
			v := float64(c.Conns["total"]) / float64(n.Conns["total"])
			gs = append(gs, Goal{Name: "upstream connections, raw + skewed + cold join (issue 20)", Target: "≤ 1.0× nginx's", Value: round3(v), Met: v <= 1,
				Note: fmt.Sprintf("corput %d, nginx %d", c.Conns["total"], n.Conns["total"])})
		}
	}
	up := func(x Result) *UpstreamTLS { return orEmpty(x.Upstream) }
	if c, ok := r.find(scTLSOrigins, nameCorput); ok {
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
			best, who, ok := r.bestPeer(scTLSOrigins, func(x Result) (float64, bool) { return g.of(up(x)), x.Upstream != nil })
			if ok {
				gs = append(gs, Goal{Name: g.name + " (issue 20)", Target: "≤ the best peer's", Value: g.corput, Met: g.corput <= best,
					Note: fmt.Sprintf("best peer %s %g", who, best)})
			}
		}
		best, who, ok := 0.0, "", false
		for _, p := range []string{nameHAProxy, nameCaddy} {
			if x, found := r.find(scTLSOrigins, p); found && x.Upstream != nil && (!ok || x.Upstream.CPUusPerRequest < best) {
				best, who, ok = x.Upstream.CPUusPerRequest, p, true
			}
		}
		if ok {
			gs = append(gs, Goal{Name: "tls_origins: CPU µs per request on h2 origins (issue 20)", Target: "≤ the best h2 peer's", Value: cu.CPUusPerRequest,
				Met: cu.CPUusPerRequest <= best, Note: fmt.Sprintf("best h2 peer %s %.1f µs", who, best)})
		}
	}
	if c, ok := r.find(scManyEndpoints, nameCorput); ok {
		cu := up(c)
		gs = append(gs, Goal{Name: "many_endpoints: handshakes/s after warm-up (issue 20)", Target: "0", Value: cu.HandshakesPerS, Met: cu.WindowHandshakes == 0,
			Note: fmt.Sprintf("%d handshakes and %d new connections in %d s over %d endpoints", cu.WindowHandshakes, cu.WindowConnections, cu.WindowS, cu.Endpoints)})
	}
	return gs
}
