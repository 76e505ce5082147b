package results

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/internal/report"
)

// Write saves peers.json and peers.md in dir.
func (r *Results) Write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "peers.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "peers.md"), []byte(r.Markdown()), 0o644)
}

// Markdown is the whole comparison as markdown.
func (r *Results) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %d CPUs, %s; %s.\n\n", r.Machine.Started, r.Machine.CPUs, r.Machine.Go, versions(r.Machine.Versions))
	b.WriteString(r.Machine.Note + "\n\n")
	for _, t := range r.Tables() {
		b.WriteString(t.Markdown() + "\n")
	}
	return b.String()
}

func versions(v map[string]string) string {
	return joinSorted(v, ", ", func(k, v string) string { return k + " " + v })
}

// Tables renders the results as report tables, with corput/peer ratios,
// a table a scenario and the goals last.
func (r *Results) Tables() []report.Table {
	var ts []report.Table
	for _, s := range r.Scenarios {
		c, _ := r.Find(s.Name, Corput)
		t := report.Table{Title: s.Name + ": " + s.Description, Note: s.Note}
		switch s.Name {
		case ScRaw, ScRawTLS:
			t.Header, t.Rows = rawTable(s, c)
		case ScSkewed:
			t.Header, t.Rows = skewedTable(s, c)
		case ScColdJoin:
			t.Header, t.Rows = coldJoinTable(s)
		case ScConnections:
			t.Header, t.Rows = connectionsTable(s, c)
		case ScSpread:
			t.Header, t.Rows = spreadTable(s)
		case ScTracing:
			t.Header, t.Rows = tracingTable(s)
		case ScH2Streams, ScH2CPU:
			t.Header, t.Rows = h2Table(s, c)
		case ScTLSOrigins, ScManyEndpoints:
			t.Header, t.Rows = upstreamTLSTable(s, c)
		case ScOverhead:
			t.Header, t.Rows = overheadTable(s, c)
		}
		ts = append(ts, t)
	}
	if len(r.Goals) > 0 {
		t := report.Table{Title: "goals (docs/performance.md)", Header: []string{"goal", "target", "this run", "met"}}
		for _, g := range r.Goals {
			met := "NOT met"
			if g.Met {
				met = "met"
			}
			val := fmt.Sprintf("%.3f", g.Value)
			if g.Note != "" {
				val += " (" + g.Note + ")"
			}
			t.Rows = append(t.Rows, []string{g.Name, g.Target, val, met})
		}
		ts = append(ts, t)
	}
	return ts
}

// rawTable is raw's and raw_tls's table (c is corput's row): raw has the
// proxy's CPU and every round, raw_tls what each proxy negotiated.
func rawTable(s Scenario, c Result) (header []string, rows [][]string) {
	header = []string{"proxy", "req/s", "p50 ms", "p99 ms", "errors", "corput/peer req/s", "corput/peer p99"}
	if s.Name == ScRawTLS {
		header = append(header, "TLS negotiated")
	} else {
		header = append(header, "proxy CPU µs/request", "rounds req/s")
	}
	for _, x := range s.Results {
		row := []string{x.Proxy, fmt.Sprintf("%.0f", x.RPS), ms(x.P50MS), ms(x.P99MS), strconv.FormatInt(x.Errors, 10),
			ratio(c.RPS, x.RPS, x.Proxy), ratio(c.P99MS, x.P99MS, x.Proxy)}
		if s.Name == ScRawTLS {
			row = append(row, tlsCell(x.TLS))
		} else {
			row = append(row, ms(x.ProxyCPUUS), roundsCell(x.Rounds)) // ms's number cell: — for the direct row
		}
		rows = append(rows, row)
	}
	return header, rows
}

func skewedTable(s Scenario, c Result) (header []string, rows [][]string) {
	header = []string{"proxy", "p50 ms", "p90 ms", "p99 ms", "max ms", "light p50/p99 ms", "heavy p50/p99 ms", "success", "slow origin's share", "corput/peer p99"}
	for _, x := range s.Results {
		share := "—"
		if x.SlowShare != nil {
			share = fmt.Sprintf("%.1f %%", 100**x.SlowShare)
		}
		rows = append(rows, []string{x.Proxy, ms(x.P50MS), ms(x.P90MS), ms(x.P99MS), ms(x.MaxMS),
			classCells(x.LightP50MS, x.LightP99MS), classCells(x.HeavyP50MS, x.HeavyP99MS),
			fmt.Sprintf("%.4f", x.SuccessRatio), share, ratio(c.P99MS, x.P99MS, x.Proxy)})
	}
	return header, rows
}

func coldJoinTable(s Scenario) (header []string, rows [][]string) {
	header = []string{"proxy", "cold origin: requests in first 30 s", "share", "peak in service", "peak waiting", "peak in service + waiting",
		"first second", "share from 60 s (× a fair fifth)", "overall p99 ms", "light p50/p99 ms", "heavy p50/p99 ms", "success"}
	for _, x := range s.Results {
		j := x.Join
		if j == nil {
			j = &JoinResult{}
		}
		late := "—"
		if j.LateFromS < j.WindowS {
			late = fmt.Sprintf("%.1f %% (%.2f×)", 100*j.LateShare, j.LateVsFair)
		}
		rows = append(rows, []string{x.Proxy, strconv.FormatInt(j.EarlyRequests, 10), fmt.Sprintf("%.1f %%", 100*j.EarlyShare),
			strconv.FormatInt(j.MaxConcurrency, 10), strconv.FormatInt(j.MaxQueued, 10), strconv.FormatInt(j.MaxInFlight, 10), strconv.FormatInt(j.FirstSecond, 10),
			late, ms(x.P99MS), classCells(x.LightP50MS, x.LightP99MS), classCells(x.HeavyP50MS, x.HeavyP99MS), fmt.Sprintf("%.4f", x.SuccessRatio)})
	}
	return header, rows
}

func connectionsTable(s Scenario, c Result) (header []string, rows [][]string) {
	header = []string{"proxy", ScRaw, ScSkewed, ScColdJoin, "total", "corput/peer total"}
	for _, x := range s.Results {
		rows = append(rows, []string{x.Proxy, strconv.FormatInt(x.Conns[ScRaw], 10), strconv.FormatInt(x.Conns[ScSkewed], 10),
			strconv.FormatInt(x.Conns[ScColdJoin], 10), strconv.FormatInt(x.Conns["total"], 10), ratio(float64(c.Conns["total"]), float64(x.Conns["total"]), x.Proxy)})
	}
	return header, rows
}

func spreadTable(s Scenario) (header []string, rows [][]string) {
	header = []string{"load", "proxy", "req/s", "p99 ms", "mean ms", "errors", "endpoints reached", "per endpoint max/mean", "min/mean", "cv",
		"per loop max/mean", "per loop min/mean", "upstream connections", "corput balancer"}
	for _, x := range s.Results {
		sp := x.Spread
		if sp == nil {
			sp = &Spread{}
		}
		rows = append(rows, []string{sp.Load, x.Proxy, fmt.Sprintf("%.0f", x.RPS), ms(x.P99MS), ms(x.MeanMS), strconv.FormatInt(x.Errors, 10),
			fmt.Sprintf("%d of %d", sp.EndpointsReached, sp.Endpoints), fmt.Sprintf("%.2f", sp.PerEndpointMaxOverMean), fmt.Sprintf("%.2f", sp.PerEndpointMinOverMean),
			fmt.Sprintf("%.2f", sp.PerEndpointCV), ratioCell(sp.PerLoopMaxOverMean), ratioCell(sp.PerLoopMinOverMean),
			strconv.FormatInt(sp.OriginConnections, 10), orDash(sp.Balancer)})
	}
	return header, rows
}

// tracingTable compares each tracing variant with tracing off under the
// same load.
func tracingTable(s Scenario) (header []string, rows [][]string) {
	header = []string{"load", "tracing", "req/s", "p50 ms", "p99 ms", "errors", "spans dropped", "req/s vs off", "p99 vs off"}
	base := map[string]Result{}
	for _, x := range s.Results {
		if x.Tracing != nil && x.Tracing.Variant == "off" {
			base[x.Tracing.Load] = x
		}
	}
	for _, x := range s.Results {
		t := x.Tracing
		if t == nil {
			continue
		}
		o := base[t.Load]
		rows = append(rows, []string{t.Load, t.Variant, fmt.Sprintf("%.0f", x.RPS), ms(x.P50MS), ms(x.P99MS), strconv.FormatInt(x.Errors, 10),
			fmt.Sprintf("%.0f", t.SpansDropped), vsOff(x.RPS, o.RPS), vsOff(x.P99MS, o.P99MS)})
	}
	return header, rows
}

func vsOff(v, off float64) string {
	if off <= 0 {
		return "—"
	}
	return fmt.Sprintf("%+.1f %%", 100*(v/off-1))
}

// h2Table is an h2 scenario's table, with corput/peer ratios (c is
// corput's row).
func h2Table(s Scenario, c Result) (header []string, rows [][]string) {
	fig := func(r Result) H2 {
		if r.H2 == nil {
			return H2{}
		}
		return *r.H2
	}
	cf := fig(c)
	if s.Name == ScH2CPU {
		for _, x := range s.Results {
			f := fig(x)
			rows = append(rows, []string{x.Proxy, fmt.Sprintf("%.0f", x.RPS), ms(x.P50MS), ms(x.P99MS), strconv.FormatInt(x.Errors, 10),
				strconv.FormatInt(x.Requests, 10), fmt.Sprintf("%.2f", f.CPUSeconds), fmt.Sprintf("%.1f", f.CPUUSPerRequest),
				ratio(cf.CPUUSPerRequest, f.CPUUSPerRequest, x.Proxy)})
		}
		return []string{"proxy", "req/s", "p50 ms", "p99 ms", "errors", "requests", "CPU s", "CPU µs/request", "corput/peer CPU"}, rows
	}
	for _, x := range s.Results {
		f := fig(x)
		rows = append(rows, []string{x.Proxy, strconv.Itoa(f.OfferedStreams), strconv.FormatInt(f.ActiveStreams, 10), strconv.FormatInt(x.Errors, 10),
			fmt.Sprintf("%.1f", f.IdleRSSMiB), fmt.Sprintf("%.1f", f.PeakRSSMiB), fmt.Sprintf("%.2f", f.RSSPerStreamKiB),
			ratio(cf.RSSPerStreamKiB, f.RSSPerStreamKiB, x.Proxy), strconv.Itoa(f.DownstreamConnections), strconv.FormatInt(f.UpstreamConnections, 10),
			ms(x.P50MS), ms(x.P99MS), fmt.Sprintf("%.0f", x.P99MS-f.HoldS*1000)})
	}
	return []string{"proxy", "streams offered", "active at peak (origins)", "errors", "idle RSS MiB", "peak RSS MiB", "RSS KiB / active stream",
		"corput/peer RSS per stream", "downstream conns", "upstream conns at peak", "p50 ms", "p99 ms", "p99 − hold ms"}, rows
}

// upstreamTLSTable is the table of tls_origins or many_endpoints (c is
// corput's row).
func upstreamTLSTable(s Scenario, c Result) (header []string, rows [][]string) {
	cu := orEmpty(c.Upstream)
	if s.Name == ScManyEndpoints {
		header = []string{"proxy", "handshakes/s in the window", "handshakes in the window", "new connections in the window", "open connections at its end",
			"warm-up: handshakes, connections", "p99 ms", "CPU µs/request", "negotiated"}
		for _, x := range s.Results {
			u := orEmpty(x.Upstream)
			rows = append(rows, []string{x.Proxy, fmt.Sprintf("%.2f", u.HandshakesPerS), strconv.FormatInt(u.WindowHandshakes, 10),
				strconv.FormatInt(u.WindowConnections, 10), strconv.FormatInt(u.OpenConnections, 10),
				fmt.Sprintf("%d, %d", u.WarmupHandshakes, u.WarmupConnectionsIn), ms(u.P99MS), fmt.Sprintf("%.1f", u.CPUusPerRequest), negotiatedCell(u.Negotiated)})
		}
		return header, rows
	}
	header = []string{"proxy", "full handshakes", "resumed", "connections", "skewed p99 ms", "raw req/s", "raw p99 ms",
		"CPU µs/request (skewed, raw)", "corput/peer full handshakes", "corput/peer connections", "corput/peer p99", "negotiated"}
	for _, x := range s.Results {
		u := orEmpty(x.Upstream)
		rows = append(rows, []string{x.Proxy, strconv.FormatInt(u.HandshakesFull, 10), strconv.FormatInt(u.HandshakesResumed, 10),
			strconv.FormatInt(u.Connections, 10), ms(u.P99MS), fmt.Sprintf("%.0f", u.RawRPS), ms(u.RawP99MS),
			fmt.Sprintf("%.1f (%.1f, %.1f)", u.CPUusPerRequest, u.SkewedCPUusPerRequest, u.RawCPUusPerRequest),
			ratio(float64(cu.HandshakesFull), float64(u.HandshakesFull), x.Proxy), ratio(float64(cu.Connections), float64(u.Connections), x.Proxy),
			ratio(cu.P99MS, u.P99MS, x.Proxy), negotiatedCell(u.Negotiated)})
	}
	return header, rows
}

func overheadTable(s Scenario, c Result) (header []string, rows [][]string) {
	header = []string{"proxy", "rate req/s", "p50 ms", "p99 ms", "max ms", "added p99 ms", "corput/peer added p99", "generator late p99 ms"}
	for _, x := range s.Results {
		rows = append(rows, []string{x.Proxy, fmt.Sprintf("%.0f", x.RateRPS), ms(x.P50MS), ms(x.P99MS), ms(x.MaxMS),
			fmt.Sprintf("%.2f", x.AddedP99MS), ratio(c.AddedP99MS, x.AddedP99MS, x.Proxy), fmt.Sprintf("%.3f", x.PacerLateP99MS)})
	}
	return header, rows
}

func orEmpty(u *UpstreamTLS) *UpstreamTLS {
	if u == nil {
		return &UpstreamTLS{}
	}
	return u
}

// ratio formats corput's figure over a peer's, "—" for corput itself, the
// direct baseline or a missing figure.
func ratio(corput, peer float64, proxy string) string {
	if proxy == Corput || proxy == Direct || peer == 0 || corput == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", corput/peer)
}

// ms is a latency cell: two decimals under 10 ms, one above, "—" for none.
func ms(v float64) string {
	if v == 0 {
		return "—"
	}
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// classCells is a class's "p50 / p99" cell.
func classCells(p50, p99 float64) string { return ms(p50) + " / " + ms(p99) }

func ratioCell(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *v)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// tlsCell is a raw_tls row's negotiated TLS, flagged when it is not the
// version and suite every proxy is asked for.
func tlsCell(t *TLSInfo) string {
	if t == nil {
		return "—"
	}
	if !t.Expected() {
		return t.String() + " (not " + certs.Version + " " + certs.Suite + ")"
	}
	return t.String()
}

// negotiatedCell is "TLSv1.3 TLS_AES_128_GCM_SHA256 h2 × 32; …".
func negotiatedCell(m map[string]int64) string {
	if len(m) == 0 {
		return "—"
	}
	return joinSorted(m, "; ", func(k string, n int64) string { return fmt.Sprintf("%s × %d", k, n) })
}

// joinSorted is m's entries in the order of their keys, each as f writes
// it, joined by sep.
func joinSorted[V any](m map[string]V, sep string, f func(string, V) string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, f(k, m[k]))
	}
	return strings.Join(parts, sep)
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
