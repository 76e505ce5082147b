// Package results owns bench-out/peers.json and peers.md: the figures
// every scenario records, the names they are filed under, the folding of
// rounds into one result, the goals judged on a run, and the tables.
//
// Invariants:
//   - The JSON shape is the file's contract: a field's name and its
//     omitempty never change with the code that fills it. rps and p99_ms
//     are always present.
//   - With several rounds a result is its median round by the scenario's
//     key figure, the worse of the two middle ones for an even count, so
//     no proxy gains from the number of rounds; every round is kept under
//     rounds.
//   - Ratios are corput's figure over the peer's, and "—" where either
//     figure is missing or the row is corput's or the direct baseline's.
//   - Nothing here measures or starts anything: it reads the figures it
//     is given.
package results

import (
	"slices"
	"strconv"
	"strings"

	"github.com/corput/corput/bench/peers/internal/certs"
)

// Scenario names, as in peers.json.
const (
	ScRaw           = "raw"
	ScRawTLS        = "raw_tls"
	ScSkewed        = "skewed"
	ScColdJoin      = "cold_join"
	ScConnections   = "connections"
	ScOverhead      = "overhead"
	ScSpread        = "spread"
	ScTracing       = "tracing"
	ScH2Streams     = "h2_streams"
	ScH2CPU         = "h2_cpu"
	ScTLSOrigins    = "tls_origins"
	ScManyEndpoints = "many_endpoints"
)

// Proxy names, as in peers.json, in the order runs alternate by default;
// Direct is the direct-to-origin baseline row.
const (
	Corput  = "corput"
	Nginx   = "nginx"
	HAProxy = "haproxy"
	Caddy   = "caddy"
	Direct  = "direct"
)

// Peers are the proxies corput is compared with.
var Peers = []string{Nginx, HAProxy, Caddy}

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
	Tracing *TracingRun `json:"tracing,omitempty"`

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
	// *H2 is the h2 scenarios' figures, in the result's own object.
	*H2
	// Upstream is tls_origins' and many_endpoints' figures.
	Upstream *UpstreamTLS `json:"upstream_tls,omitempty"`

	Rounds []Result `json:"rounds,omitempty"`
}

// TLSInfo is what a TLS handshake with a proxy negotiated.
type TLSInfo struct {
	Protocol string `json:"protocol"`          // TLSv1.3
	Cipher   string `json:"cipher"`            // TLS_AES_128_GCM_SHA256
	Group    string `json:"group,omitempty"`   // the key exchange, as openssl prints it: "X25519, 253 bits"
	Probe    string `json:"probe,omitempty"`   // how it was found
	Library  string `json:"library,omitempty"` // the client's TLS library
}

// String is "TLSv1.3 TLS_AES_128_GCM_SHA256 (X25519)".
func (t TLSInfo) String() string {
	s := t.Protocol + " " + t.Cipher
	if g, _, _ := strings.Cut(t.Group, ","); g != "" {
		s += " (" + g + ")"
	}
	return s
}

// Expected reports whether t is the TLS version and cipher suite every
// proxy is asked for (certs.Version, certs.Suite).
func (t TLSInfo) Expected() bool { return t.Protocol == certs.Version && t.Cipher == certs.Suite }

// TracingRun is a tracing scenario's result beside Result's figures.
type TracingRun struct {
	Load         string  `json:"load"`    // raw or overhead
	Variant      string  `json:"variant"` // off, 1pct, blackholed-100pct
	SpansDropped float64 `json:"spans_dropped"`
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

// H2 is an h2 scenario's figures beyond Result's own; its fields sit in
// the result's object.
type H2 struct {
	// h2_streams
	OfferedStreams        int     `json:"offered_streams,omitempty"`
	ActiveStreams         int64   `json:"active_streams,omitempty"`        // peak in service at the origins
	ClientActiveStreams   int64   `json:"client_active_streams,omitempty"` // peak awaiting an answer at the client
	DownstreamConnections int     `json:"downstream_connections,omitempty"`
	UpstreamConnections   int64   `json:"upstream_connections"` // open at the origins at the peak (their own count)
	IdleRSSMiB            float64 `json:"idle_rss_mib,omitempty"`
	PeakRSSMiB            float64 `json:"peak_rss_mib,omitempty"`
	RSSPerStreamKiB       float64 `json:"rss_per_active_stream_kib,omitempty"`
	HoldS                 float64 `json:"hold_s,omitempty"`
	// h2_cpu
	CPUUSPerRequest float64 `json:"cpu_us_per_request,omitempty"`
	CPUSeconds      float64 `json:"cpu_s,omitempty"`
	// ErrorSamples are the first few errors' texts.
	ErrorSamples []string `json:"error_samples,omitempty"`
}

// UpstreamTLS is one proxy's figures in front of mTLS origins, counted by
// the origins (handshakes, connections) and from /proc (CPU).
type UpstreamTLS struct {
	Endpoints int `json:"endpoints"`
	// HandshakesFull and HandshakesResumed are the TLS handshakes the
	// origins completed while the proxy ran (its start and pre-warming
	// included); Connections the TCP connections they accepted.
	HandshakesFull    int64 `json:"tls_handshakes_full"`
	HandshakesResumed int64 `json:"tls_handshakes_resumed"`
	Connections       int64 `json:"connections"`
	// P99MS is the skewed load's p99 (tls_origins) or the window's
	// (many_endpoints).
	P99MS float64 `json:"p99_ms"`
	// CPUusPerRequest is the proxy's CPU (utime + stime of its process
	// group, /proc/<pid>/stat) per request the origins received, over the
	// scenario's loads; Skewed… and Raw… split it by load.
	CPUusPerRequest       float64 `json:"cpu_us_per_request"`
	SkewedCPUusPerRequest float64 `json:"skewed_cpu_us_per_request,omitempty"`
	RawCPUusPerRequest    float64 `json:"raw_cpu_us_per_request,omitempty"`
	RawRPS                float64 `json:"raw_rps,omitempty"`
	RawP99MS              float64 `json:"raw_p99_ms,omitempty"`
	// Negotiated counts the origins' handshakes by version, suite and
	// application protocol ("TLSv1.3 TLS_AES_128_GCM_SHA256 h2").
	Negotiated map[string]int64 `json:"negotiated"`

	// many_endpoints: the window after warm-up.
	WarmupS             int     `json:"warmup_s,omitempty"`
	WindowS             int     `json:"window_s,omitempty"`
	WindowHandshakes    int64   `json:"window_handshakes,omitempty"`
	HandshakesPerS      float64 `json:"handshakes_per_s"`
	WindowConnections   int64   `json:"window_connections"`
	OpenConnections     int64   `json:"open_connections,omitempty"`
	WarmupHandshakes    int64   `json:"warmup_handshakes,omitempty"`
	WarmupConnectionsIn int64   `json:"warmup_connections,omitempty"`
}

// Goal is one of docs/performance.md's goals, judged on this run.
type Goal struct {
	Name   string  `json:"name"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
	Note   string  `json:"note,omitempty"`
}

// Scenario returns the named scenario, added with desc when r has none.
func (r *Results) Scenario(name, desc string) *Scenario {
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == name {
			return &r.Scenarios[i]
		}
	}
	r.Scenarios = append(r.Scenarios, Scenario{Name: name, Description: desc})
	return &r.Scenarios[len(r.Scenarios)-1]
}

// Find returns proxy's result in scenario.
func (r *Results) Find(scenario, proxy string) (Result, bool) {
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

// Median folds rounds of one proxy into its middle round by badness
// (higher is worse); with an even number of rounds it takes the worse of
// the two middle ones, so no proxy gains from the count. The rounds are
// kept when there is more than one.
func Median(rounds []Result, badness func(Result) float64) Result {
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

// AddMedians appends, for each key in order that has rounds, the Median
// of its rounds by badness.
func (s *Scenario) AddMedians(keys []string, rounds map[string][]Result, badness func(Result) float64) {
	for _, k := range keys {
		if rs := rounds[k]; len(rs) > 0 {
			s.Results = append(s.Results, Median(rs, badness))
		}
	}
}

// Round3 is v rounded to three decimals, as the figures are written.
func Round3(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 3, 64), 64)
	return f
}
