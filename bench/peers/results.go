package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corput/corput/internal/report"
)

// Scenario names, as in peers.json.
const (
	scRaw         = "raw"
	scRawTLS      = "raw_tls"
	scSkewed      = "skewed"
	scCold        = "cold_join"
	scConnections = "connections"
	scOverhead    = "overhead"
	// scSpread ("spread") is in spread.go, scTracing ("tracing") in
	// tracing.go
)

// Results is bench-out/peers.json.
type Results struct {
	Machine   Machine    `json:"machine"`
	Scenarios []Scenario `json:"scenarios"`
	Goals     []Goal     `json:"goals"`
}

// Machine says where and with what the figures were measured.
type Machine struct {
	CPUs     int               `json:"cpus"`
	Go       string            `json:"go"`
	Started  string            `json:"started"` // RFC 3339
	Versions map[string]string `json:"versions"`
	Note     string            `json:"note"`
}

// Scenario is one test and every proxy's result in it.
type Scenario struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Note        string   `json:"note,omitempty"` // what the figures do and do not say
	Results     []Result `json:"results"`
}

// rawTLSNote is the raw_tls scenario's note: its TLS settings, which each
// proxy takes, and which it cannot.
const rawTLSNote = "Every proxy serves the same throwaway self-signed ECDSA P-256 certificate and is set to TLS 1.3 only with " + tlsSuite +
	" as the only cipher suite where it lets that be set: nginx (ssl_protocols TLSv1.3; ssl_conf_command Ciphersuites) and HAProxy " +
	"(ssl-min-ver TLSv1.3; ciphersuites) take both. Caddy takes protocols tls1.3, and is given ciphers " + tlsSuite + ", which has no effect: " +
	"Go's crypto/tls (Caddy's and corput's) does not let TLS 1.3 cipher suites be configured. corput's tls block has only cert and key " +
	"(and client_ca), so corput offers TLS 1.2 and 1.3 with Go's defaults. Go's server picks " + tlsSuite + " itself when the CPU has " +
	"AES-GCM instructions and the client prefers an AES-GCM suite, as wrk (OpenSSL's defaults, AES-256-GCM first) does. The TLS column is " +
	"what one handshake made as wrk makes it (openssl s_client with OpenSSL's defaults, server name 127.0.0.1, no ALPN) negotiated with " +
	"each proxy before its wrk run. Keep-alive everywhere, as in raw: 64 handshakes a run, the rest is record encryption and decryption, " +
	"in wrk as in the proxy, on the same cores (the same for every proxy). " +
	"corput ends TLS in its fast path (crypto/tls over raw-syscall socket I/O) and serves HTTPS/1.1 with the same byte loop as cleartext."

// Result is one proxy in one scenario. With several rounds it is the
// median round (by the scenario's key figure), all rounds under Rounds.
// Latencies are milliseconds; rps and p99_ms are always present.
type Result struct {
	Proxy string  `json:"proxy"`
	RPS   float64 `json:"rps"`
	P99MS float64 `json:"p99_ms"`

	P50MS float64 `json:"p50_ms,omitempty"`
	// MeanMS is h2load's mean request time (spread scenario: h2load
	// reports no percentiles, so its rows have p99_ms 0).
	MeanMS       float64 `json:"mean_ms,omitempty"`
	P90MS        float64 `json:"p90_ms,omitempty"`
	MaxMS        float64 `json:"max_ms,omitempty"`
	Requests     int64   `json:"requests,omitempty"`
	Errors       int64   `json:"errors,omitempty"`
	SuccessRatio float64 `json:"success_ratio,omitempty"`
	// RateRPS is the offered open-loop rate.
	RateRPS float64 `json:"rate_rps,omitempty"`
	// PacerLateP99MS is how late the open-loop generator sent its
	// requests, p99 (overhead scenario); a request's latency counts from
	// its scheduled time, so this much of it may be the generator's.
	PacerLateP99MS float64 `json:"pacer_late_p99_ms,omitempty"`
	// AddedP99MS is the proxy's p99 minus the direct p99 at the same rate
	// (overhead scenario).
	AddedP99MS float64 `json:"added_p99_ms,omitempty"`
	// Light*MS and Heavy*MS are the load generator's figures for the
	// light and the heavy class (skewed and cold_join).
	LightP50MS float64 `json:"light_p50_ms,omitempty"`
	LightP99MS float64 `json:"light_p99_ms,omitempty"`
	HeavyP50MS float64 `json:"heavy_p50_ms,omitempty"`
	HeavyP99MS float64 `json:"heavy_p99_ms,omitempty"`
	// SlowShare is the share of requests the 5×-slow origin served
	// (skewed scenario).
	SlowShare *float64 `json:"slow_origin_share,omitempty"`
	// TLS is what the proxy negotiated with a client like wrk (raw_tls
	// scenario).
	TLS *TLSInfo `json:"tls,omitempty"`
	// Tracing is the tracing scenario's load, variant and dropped spans.
	Tracing *tracingRun `json:"tracing,omitempty"`

	// cold join: the joining origin's first seconds, from its own counters
	Join *JoinResult `json:"join,omitempty"`
	// connections accepted by the origins while this proxy ran, by scenario
	Conns map[string]int64 `json:"connections,omitempty"`
	// ProxyCPUUS is raw's CPU per request: the proxy's process group's user
	// + system time over the wrk run ÷ the requests wrk completed (not the
	// direct baseline, which has no proxy).
	ProxyCPUUS float64 `json:"proxy_cpu_us_per_request,omitempty"`

	// *Spread is the spread scenario's figures; its fields sit in the
	// result's own object (load, endpoints_reached, …).
	*Spread
	// *H2 is the h2 scenarios' figures (h2streams.go), in the result's
	// own object.
	*H2
	// Upstream is tls_origins' and many_endpoints' figures.
	Upstream *UpstreamTLS `json:"upstream_tls,omitempty"`

	Rounds []Result `json:"rounds,omitempty"`
}

// JoinResult is the cold origin's ground truth over its first seconds
// (the window, --join-window): the whole window, its first EarlyS seconds
// (the peaks are theirs) and its seconds from LateFromS on. Its own
// per-second counts are requests it finished (a health check is one);
// the other origins' are their class requests over the same spans.
type JoinResult struct {
	WindowS  int     `json:"window_s"`
	Requests int64   `json:"requests"` // it finished in the window
	Share    float64 `json:"share"`    // of all requests answered in the window

	EarlyS         int     `json:"early_s"`
	EarlyRequests  int64   `json:"early_requests"`  // it finished in its first EarlyS seconds
	EarlyShare     float64 `json:"early_share"`     // of all requests answered then
	MaxConcurrency int64   `json:"max_concurrency"` // peak in service (≤ its workers) in its first EarlyS seconds
	MaxQueued      int64   `json:"max_queued"`      // peak waiting for a worker, same seconds
	MaxInFlight    int64   `json:"max_in_flight"`   // peak in service plus waiting, same seconds
	FirstSecond    int64   `json:"first_second"`    // requests in its first second of service

	// LateShare is its share of the requests answered from LateFromS to
	// the end of the window; LateVsFair is LateShare ÷ a fair share (one
	// of the five origins). 0 when the window ends before LateFromS.
	LateFromS  int     `json:"late_from_s"`
	LateShare  float64 `json:"late_share"`
	LateVsFair float64 `json:"late_vs_fair"`
}

// Spread is how one proxy spread one load's requests over the spread
// scenario's endpoints (the origins' per-listener counts) and, for corput,
// over its loops (/admin/origins).
type Spread struct {
	Load string `json:"load"`
	// Balancer is corput's balancer flow mapping (--corput-balancer).
	Balancer         string `json:"balancer,omitempty"`
	Endpoints        int    `json:"endpoints"`
	EndpointsReached int    `json:"endpoints_reached"` // got at least one request
	// OriginRequests is every request the endpoints received during the
	// load; OriginConnections the connections they accepted.
	OriginRequests         int64   `json:"origin_requests"`
	OriginConnections      int64   `json:"origin_connections"`
	PerEndpointMean        float64 `json:"per_endpoint_mean"`
	PerEndpointMax         int64   `json:"per_endpoint_max"`
	PerEndpointMin         int64   `json:"per_endpoint_min"`
	PerEndpointMaxOverMean float64 `json:"per_endpoint_max_over_mean"`
	PerEndpointMinOverMean float64 `json:"per_endpoint_min_over_mean"`
	PerEndpointCV          float64 `json:"per_endpoint_cv"` // standard deviation / mean
	// LoopRequests are the requests corput placed on each loop; the
	// ratios are over them (corput only).
	LoopRequests       []uint64 `json:"loop_requests,omitempty"`
	PerLoopMaxOverMean *float64 `json:"per_loop_max_over_mean,omitempty"`
	PerLoopMinOverMean *float64 `json:"per_loop_min_over_mean,omitempty"`
}

// Goal is one of docs/performance.md's goals, judged on this run.
type Goal struct {
	Name   string  `json:"name"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
	Note   string  `json:"note,omitempty"`
}

func (r *Results) scenario(name, desc string) *Scenario {
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == name {
			return &r.Scenarios[i]
		}
	}
	r.Scenarios = append(r.Scenarios, Scenario{Name: name, Description: desc})
	return &r.Scenarios[len(r.Scenarios)-1]
}

func (r *Results) find(scenario, proxy string) (Result, bool) {
	for _, s := range r.Scenarios {
		if s.Name != scenario {
			continue
		}
		for _, x := range s.Results {
			if x.Proxy == proxy {
				return x, true
			}
		}
	}
	return Result{}, false
}

// median folds rounds of one proxy into its middle round by badness
// (higher is worse); with an even number of rounds it takes the worse of
// the two middle ones, so no proxy gains from the count. The rounds are
// kept when there is more than one.
func median(rounds []Result, badness func(Result) float64) Result {
	sorted := slices.Clone(rounds)
	slices.SortStableFunc(sorted, func(a, b Result) int {
		switch ka, kb := badness(a), badness(b); {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	m := sorted[len(sorted)/2]
	if len(rounds) > 1 {
		m.Rounds = rounds
	}
	return m
}

// goals judges the three goals on r.
func (r *Results) goals() []Goal {
	var gs []Goal
	if c, ok := r.find(scRaw, nameCorput); ok {
		if n, ok := r.find(scRaw, nameNginx); ok && n.RPS > 0 {
			v := c.RPS / n.RPS
			gs = append(gs, Goal{Name: "raw throughput vs nginx", Target: "≥ 1.0× nginx req/s", Value: round3(v), Met: v >= 1.0})
		}
	}
	if c, ok := r.find(scSkewed, nameCorput); ok {
		best := 0.0
		for _, p := range []string{nameNginx, nameHAProxy, nameCaddy} {
			if x, ok := r.find(scSkewed, p); ok && x.P99MS > 0 && (best == 0 || x.P99MS < best) {
				best = x.P99MS
			}
		}
		if best > 0 {
			v := c.P99MS / best
			gs = append(gs, Goal{Name: "skewed p99 vs best peer", Target: "≤ 0.25× the best peer's p99", Value: round3(v), Met: v <= 0.25,
				Note: fmt.Sprintf("corput %.1f ms, best peer %.1f ms", c.P99MS, best)})
		}
	}
	if c, ok := r.find(scSkewed, nameCorput); ok {
		gs = append(gs,
			Goal{Name: "skewed p99 (issue 19)", Target: "≤ 150 ms", Value: round3(c.P99MS), Met: c.P99MS <= 150},
			Goal{Name: "skewed heavy-class p99 (issue 19)", Target: "≤ 175 ms", Value: round3(c.HeavyP99MS), Met: c.HeavyP99MS > 0 && c.HeavyP99MS <= 175},
			Goal{Name: "skewed success (issue 19)", Target: "100 %", Value: round3(c.SuccessRatio), Met: c.SuccessRatio == 1})
	}
	if c, ok := r.find(scCold, nameCorput); ok && c.Join != nil {
		j := c.Join
		gs = append(gs,
			Goal{Name: "cold_join p99 (issue 19)", Target: "≤ 175 ms", Value: round3(c.P99MS), Met: c.P99MS <= 175},
			Goal{Name: "cold_join: the cold origin's peak in service + waiting, first 30 s (issue 19)", Target: "≤ 10", Value: float64(j.MaxInFlight), Met: j.MaxInFlight <= 10})
		if j.LateFromS < j.WindowS {
			gs = append(gs, Goal{Name: "cold_join: the cold origin's share from 60 s (issue 19)", Target: "≥ 0.8× a fair fifth", Value: round3(j.LateVsFair), Met: j.LateVsFair >= 0.8,
				Note: fmt.Sprintf("%.1f %% of the requests from %d to %d s", 100*j.LateShare, j.LateFromS, j.WindowS)})
		}
	}
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == scTracing {
			gs = append(gs, tracingGoals(&r.Scenarios[i])...)
		}
	}
	gs = append(gs, r.connectionGoals()...)
	if c, ok := r.find(scOverhead, nameCorput); ok {
		gs = append(gs, Goal{Name: "proxy-added p99 at half max throughput", Target: "≤ 1.5 ms", Value: round3(c.AddedP99MS), Met: c.AddedP99MS <= 1.5,
			Note: fmt.Sprintf("corput p99 %.2f ms at %.0f req/s open loop, minus direct-to-origin p99 at the same rate", c.P99MS, c.RateRPS)})
	}
	return append(gs, r.h2Goals()...)
}

func round3(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 3, 64), 64)
	return f
}

// ratio formats corput's figure over a peer's, "—" for corput itself or
// a missing figure.
func ratio(corput, peer float64, proxy string) string {
	if proxy == nameCorput || proxy == nameDirect || peer == 0 || corput == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", corput/peer)
}

// nameDirect is the direct-to-origin baseline row.
const nameDirect = "direct"

func ms(v float64) string {
	if v == 0 {
		return "—"
	}
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// tables renders the results as report tables, with corput/peer ratios.
func (r *Results) tables() []report.Table {
	var ts []report.Table
	for _, s := range r.Scenarios {
		c, _ := r.find(s.Name, nameCorput)
		t := report.Table{Title: s.Name + ": " + s.Description, Note: s.Note}
		switch s.Name {
		case scRaw, scRawTLS:
			t.Header = []string{"proxy", "req/s", "p50 ms", "p99 ms", "errors", "corput/peer req/s", "corput/peer p99"}
			if s.Name == scRawTLS {
				t.Header = append(t.Header, "TLS negotiated")
			} else {
				t.Header = append(t.Header, "proxy CPU µs/request", "rounds req/s")
			}
			for _, x := range s.Results {
				row := []string{x.Proxy, fmt.Sprintf("%.0f", x.RPS), ms(x.P50MS), ms(x.P99MS), strconv.FormatInt(x.Errors, 10),
					ratio(c.RPS, x.RPS, x.Proxy), ratio(c.P99MS, x.P99MS, x.Proxy)}
				if s.Name == scRawTLS {
					row = append(row, tlsCell(x.TLS))
				} else {
					row = append(row, ms(x.ProxyCPUUS), roundsCell(x.Rounds)) // ms's number cell: — for the direct row
				}
				t.Rows = append(t.Rows, row)
			}
		case scSkewed:
			t.Header = []string{"proxy", "p50 ms", "p90 ms", "p99 ms", "max ms", "light p50/p99 ms", "heavy p50/p99 ms", "success", "slow origin's share", "corput/peer p99"}
			for _, x := range s.Results {
				share := "—"
				if x.SlowShare != nil {
					share = fmt.Sprintf("%.1f %%", 100**x.SlowShare)
				}
				t.Rows = append(t.Rows, []string{x.Proxy, ms(x.P50MS), ms(x.P90MS), ms(x.P99MS), ms(x.MaxMS),
					ms(x.LightP50MS) + " / " + ms(x.LightP99MS), ms(x.HeavyP50MS) + " / " + ms(x.HeavyP99MS),
					fmt.Sprintf("%.4f", x.SuccessRatio), share, ratio(c.P99MS, x.P99MS, x.Proxy)})
			}
		case scCold:
			t.Header = []string{"proxy", "cold origin: requests in first 30 s", "share", "peak in service", "peak waiting", "peak in service + waiting",
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
				t.Rows = append(t.Rows, []string{x.Proxy, strconv.FormatInt(j.EarlyRequests, 10), fmt.Sprintf("%.1f %%", 100*j.EarlyShare),
					strconv.FormatInt(j.MaxConcurrency, 10), strconv.FormatInt(j.MaxQueued, 10), strconv.FormatInt(j.MaxInFlight, 10), strconv.FormatInt(j.FirstSecond, 10),
					late, ms(x.P99MS), ms(x.LightP50MS) + " / " + ms(x.LightP99MS), ms(x.HeavyP50MS) + " / " + ms(x.HeavyP99MS), fmt.Sprintf("%.4f", x.SuccessRatio)})
			}
		case scConnections:
			t.Header = []string{"proxy", scRaw, scSkewed, scCold, "total", "corput/peer total"}
			for _, x := range s.Results {
				t.Rows = append(t.Rows, []string{x.Proxy, strconv.FormatInt(x.Conns[scRaw], 10), strconv.FormatInt(x.Conns[scSkewed], 10),
					strconv.FormatInt(x.Conns[scCold], 10), strconv.FormatInt(x.Conns["total"], 10), ratio(float64(c.Conns["total"]), float64(x.Conns["total"]), x.Proxy)})
			}
		case scSpread:
			t.Header = []string{"load", "proxy", "req/s", "p99 ms", "mean ms", "errors", "endpoints reached", "per endpoint max/mean", "min/mean", "cv",
				"per loop max/mean", "per loop min/mean", "upstream connections", "corput balancer"}
			for _, x := range s.Results {
				sp := x.Spread
				if sp == nil {
					sp = &Spread{}
				}
				t.Rows = append(t.Rows, []string{sp.Load, x.Proxy, fmt.Sprintf("%.0f", x.RPS), ms(x.P99MS), ms(x.MeanMS), strconv.FormatInt(x.Errors, 10),
					fmt.Sprintf("%d of %d", sp.EndpointsReached, sp.Endpoints), fmt.Sprintf("%.2f", sp.PerEndpointMaxOverMean), fmt.Sprintf("%.2f", sp.PerEndpointMinOverMean),
					fmt.Sprintf("%.2f", sp.PerEndpointCV), ratioCell(sp.PerLoopMaxOverMean), ratioCell(sp.PerLoopMinOverMean),
					strconv.FormatInt(sp.OriginConnections, 10), orDash(sp.Balancer)})
			}
		case scTracing:
			t.Header, t.Rows = tracingTable(&s)
		case scH2Streams, scH2CPU:
			t.Header, t.Rows = h2Table(s, c)
		case scTLSOrigins, scManyEndpoints:
			t = upstreamTLSTable(s, c)
		case scOverhead:
			t.Header = []string{"proxy", "rate req/s", "p50 ms", "p99 ms", "max ms", "added p99 ms", "corput/peer added p99", "generator late p99 ms"}
			for _, x := range s.Results {
				t.Rows = append(t.Rows, []string{x.Proxy, fmt.Sprintf("%.0f", x.RateRPS), ms(x.P50MS), ms(x.P99MS), ms(x.MaxMS),
					fmt.Sprintf("%.2f", x.AddedP99MS), ratio(c.AddedP99MS, x.AddedP99MS, x.Proxy), fmt.Sprintf("%.3f", x.PacerLateP99MS)})
			}
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
// scenario's TLS 1.3 with its suite.
func tlsCell(t *TLSInfo) string {
	if t == nil {
		return "—"
	}
	if !t.expected() {
		return t.String() + " (not " + tlsVersion + " " + tlsSuite + ")"
	}
	return t.String()
}

// markdown is the whole comparison as markdown.
func (r *Results) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %d CPUs, %s; %s.\n\n", r.Machine.Started, r.Machine.CPUs, r.Machine.Go, versions(r.Machine.Versions))
	b.WriteString(r.Machine.Note + "\n\n")
	for _, t := range r.tables() {
		b.WriteString(t.Markdown() + "\n")
	}
	return b.String()
}

func versions(v map[string]string) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + v[k]
	}
	return strings.Join(parts, ", ")
}

// write saves peers.json and peers.md in dir.
func (r *Results) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "peers.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "peers.md"), []byte(r.markdown()), 0o644)
}
