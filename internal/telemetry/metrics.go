// Package telemetry owns corput's Prometheus metrics and the admin HTTP API.
// Its probes, /healthz and /readyz (HandleProbes), are also the ones the
// control plane's admin listener serves.
//
// The metric names, types and labels are part of corput's external contract
// (docs/contract.md). Every metric of the gateway (`corput serve`) is
// declared here and nowhere else; `corput control-plane` serves its own, on a
// registry of its own, declared in internal/controlplane (metrics.go). Event
// counters and histograms are updated by the request path through children
// bound once per (origin, loop) or (origin, endpoint), so the hot path does no
// label hashing. Gauges that describe state (open connections, utilization,
// active requests, subset sizes, ejections, panic) are refreshed from the
// gateway's own state just before each scrape, so they cost nothing between
// scrapes and are never stale when read.
package telemetry

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corput/corput/internal/accept"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/proxyproto"
)

// LatencyBuckets are the seed's (MC-MS-01) request-duration buckets in
// seconds: 2, 5, 10, 15, 20, 30, 50, 100, 250 and 500 ms, plus +Inf.
var LatencyBuckets = []float64{0.002, 0.005, 0.010, 0.015, 0.020, 0.030, 0.050, 0.100, 0.250, 0.500}

// AcquireBuckets cover pool acquisition waits from 50 µs to 1 s.
var AcquireBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// Close reasons, the values of corput_upstream_connections_closed_total's
// reason label.
const (
	CloseIdle      = "idle"
	CloseLifetime  = "lifetime"
	CloseError     = "error"
	CloseKeepalive = "keepalive"
	CloseRemote    = "remote"
	CloseEviction  = "eviction"
	CloseShutdown  = "shutdown"
)

// Metrics holds every collector of docs/contract.md on its own registry.
type Metrics struct {
	Registry *prometheus.Registry

	ConnectionsCreated   *prometheus.CounterVec   // origin, loop, protocol
	ConnectionsClosed    *prometheus.CounterVec   // origin, reason
	ConnectionsOpen      *prometheus.GaugeVec     // origin, loop, protocol
	PoolUtilization      *prometheus.GaugeVec     // origin, loop
	AcquireWait          *prometheus.HistogramVec // origin
	RequestsActive       *prometheus.GaugeVec     // origin, endpoint
	RequestDuration      *prometheus.HistogramVec // origin, code_class
	OutlierEjections     *prometheus.CounterVec   // origin, reason
	OutlierEjected       *prometheus.GaugeVec     // origin
	HealthProbes         *prometheus.CounterVec   // origin, result: pass, fail (additive)
	HealthSkipped        *prometheus.CounterVec   // origin, reason: live_traffic, pool_busy (additive)
	HealthChanges        *prometheus.CounterVec   // origin, to: healthy, unhealthy (additive)
	PanicMode            *prometheus.GaugeVec     // origin
	ZoneRequests         *prometheus.CounterVec   // origin, locality
	RequestsShed         *prometheus.CounterVec   // origin, reason
	SubsetSize           *prometheus.GaugeVec     // origin, loop
	SubsetPlacement      *prometheus.GaugeVec     // origin, mode: shared, local (additive)
	MembershipChanges    *prometheus.CounterVec   // origin
	DownstreamRequests   *prometheus.CounterVec   // code_class
	StaleRetries         *prometheus.CounterVec   // origin (additive)
	IdleTimeouts         *prometheus.CounterVec   // origin (additive)
	Retries              *prometheus.CounterVec   // origin, kind: unsent, replay (additive)
	ReplayNotKept        *prometheus.CounterVec   // reason: over_request, over_gateway (additive)
	ReplayBuffered       prometheus.Gauge         // bytes kept by all replay buffers now (additive)
	AcceptErrors         *prometheus.CounterVec   // reason (additive)
	LoopRequests         *prometheus.CounterVec   // origin, loop (additive)
	ConfigReloads        *prometheus.CounterVec   // result: ok, rejected (additive)
	RequestsRefused      *prometheus.CounterVec   // route, reason: rate_limited, address_denied (additive)
	RouteRequests        *prometheus.CounterVec   // route, origin: requests routed, by split target (additive)
	ProxyProtocolRefused *prometheus.CounterVec   // reason (additive)
	RouteMirrored        *prometheus.CounterVec   // route, origin (additive)
	RouteMirrorDropped   *prometheus.CounterVec   // route, origin, reason: max_in_flight, body, failed (additive)

	SLOGuardActive          *prometheus.GaugeVec // origin, class (additive)
	ScaleOutSignal          *prometheus.GaugeVec // origin (additive)
	ConfigLastReloadSuccess prometheus.Gauge     // unix seconds (additive)
	FleetInstance           prometheus.Gauge     // fleet.instance in force (additive)
	FleetSize               prometheus.Gauge     // fleet.size in force (additive)
	AccessLogDropped        prometheus.Counter   // no labels (additive)
	TracingSpansDropped     prometheus.Counter   // no labels (additive)
	ScaleOutDropped         prometheus.Counter   // no labels (additive)

	mu      sync.Mutex // guards refresh
	refresh []func()
}

// The kinds of corput_upstream_retries_total and the reasons of
// corput_replay_buffer_overflows_total.
const (
	RetryUnsent       = "unsent"
	RetryReplay       = "replay"
	ReplayOverRequest = "over_request"
	ReplayOverGateway = "over_gateway"
)

// New creates the collectors and registers them, with the Go runtime and
// process collectors, on a fresh registry.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m.ConnectionsCreated = counter("corput_upstream_connections_created_total",
		"Upstream connections opened (connections.created, the churn metric).", "origin", "loop", "protocol")
	m.ConnectionsClosed = counter("corput_upstream_connections_closed_total",
		"Upstream connections closed, by reason.", "origin", "reason")
	m.ConnectionsOpen = gauge("corput_upstream_connections_open",
		"Upstream connections open now.", "origin", "loop", "protocol")
	m.PoolUtilization = gauge("corput_pool_utilization",
		"Busy streams over stream capacity of a (origin, loop) pool set.", "origin", "loop")
	m.AcquireWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corput_pool_acquire_wait_seconds", Help: "Time a request waited to acquire an upstream stream.",
		Buckets: AcquireBuckets}, []string{"origin"})
	m.RequestsActive = gauge("corput_upstream_requests_active",
		"Requests in flight to an endpoint.", "origin", "endpoint")
	m.RequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corput_upstream_request_duration_seconds", Help: "Upstream request duration, to response end.",
		Buckets: LatencyBuckets}, []string{"origin", "code_class"})
	m.OutlierEjections = counter("corput_outlier_ejections_total",
		"Endpoints ejected by outlier detection.", "origin", "reason")
	m.OutlierEjected = gauge("corput_outlier_ejected",
		"Endpoints ejected now.", "origin")
	m.HealthProbes = counter("corput_health_probes_total",
		"Active health-check probes sent, by result.", "origin", "result")
	m.HealthSkipped = counter("corput_health_probes_skipped_total",
		"Health-check probes not sent: live traffic proved the endpoint healthy, or its pool had no connection a probe may take.", "origin", "reason")
	m.HealthChanges = counter("corput_health_state_changes_total",
		"Endpoints whose health-check state changed, by the state they entered.", "origin", "to")
	m.PanicMode = gauge("corput_panic_mode",
		"1 while the origin routes over all endpoints because too few are healthy.", "origin")
	m.ZoneRequests = counter("corput_zone_requests_total",
		"Requests by locality of the picked endpoint (zone hit ratio = local / total).", "origin", "locality")
	m.RequestsShed = counter("corput_requests_shed_total",
		"Requests answered 503 by the gateway itself.", "origin", "reason")
	m.SubsetSize = gauge("corput_subset_size",
		"Endpoints in a loop's subset.", "origin", "loop")
	m.SubsetPlacement = gauge("corput_subset_placement",
		"1 for the placement the origin uses, 0 for the other: shared (by a control plane's ring indices, the same on every gateway) or local (by this gateway's own ring history).", "origin", "mode")
	m.MembershipChanges = counter("corput_membership_changes_total",
		"Applied (debounced) membership updates.", "origin")
	m.DownstreamRequests = counter("corput_downstream_requests_total",
		"Requests served to clients, by status class.", "code_class")

	m.StaleRetries = counter("corput_upstream_stale_retries_total",
		"Requests sent again because the idle HTTP/1.1 connection they took unprobed had been closed by the origin.", "origin")

	m.IdleTimeouts = counter("corput_upstream_idle_timeouts_total",
		"Exchanges ended after their response head because no byte moved either way for timeouts.stream_idle.", "origin")
	m.Retries = counter("corput_upstream_retries_total",
		"Requests sent again after a failed attempt, by kind: unsent (nothing had reached an origin: a refused dial, a refused stream, an endpoint that left) or replay (the request may have reached an origin: a broken connection, an origin's 502, 503 or 504).", "origin", "kind")
	m.ReplayNotKept = counter("corput_replay_buffer_overflows_total",
		"Request bodies whose copy for a retry was given up, so that the request is not sent again: over_request (over its retry.replay_buffer) or over_gateway (all replay buffers together at limits.replay_buffers_bytes).", "reason")
	for _, r := range []string{ReplayOverRequest, ReplayOverGateway} {
		m.ReplayNotKept.WithLabelValues(r)
	}
	m.ReplayBuffered = prometheus.NewGauge(prometheus.GaugeOpts{Name: "corput_replay_buffers_bytes",
		Help: "Bytes reserved now by the replay buffers of requests in flight (bounded by limits.replay_buffers_bytes)."})

	m.LoopRequests = counter("corput_loop_requests_total",
		"Requests placed on each loop of an origin (a loop is chosen per request: the shares should be even).", "origin", "loop")
	m.ConfigReloads = counter("corput_config_reloads_total",
		"Configuration reloads, by result: ok (applied) or rejected (the running configuration stayed).", "result")
	m.ConfigReloads.WithLabelValues("ok")
	m.ConfigReloads.WithLabelValues("rejected")
	m.ConfigLastReloadSuccess = prometheus.NewGauge(prometheus.GaugeOpts{Name: "corput_config_last_reload_success_timestamp_seconds",
		Help: "When the configuration in force was loaded (start or the last applied reload), in Unix seconds."})
	m.FleetInstance = prometheus.NewGauge(prometheus.GaugeOpts{Name: "corput_fleet_instance",
		Help: "This gateway's fleet.instance in force (set at start, moved by a reload)."})
	m.FleetSize = prometheus.NewGauge(prometheus.GaugeOpts{Name: "corput_fleet_size",
		Help: "The fleet.size in force on this gateway (set at start, moved by a reload): gateways that report different sizes have not all taken a resize."})
	m.AcceptErrors = counter("corput_accept_errors_total",
		"Errors accepting downstream connections, by reason (fd_limit, fd_system, memory, aborted, other); the listener backs off and goes on accepting.", "reason")
	for _, r := range accept.Reasons {
		m.AcceptErrors.WithLabelValues(r)
	}
	m.RequestsRefused = counter("corput_requests_refused_total",
		"Requests refused at the ingress edge, before any upstream work, by route (empty: the listener's downstream.addresses) and reason: rate_limited (429, routes[].rate_limit) or address_denied (403, the address rules).", "route", "reason")
	m.RouteMirrored = counter("corput_route_mirrored_total",
		"Requests of the route mirrored to its shadow origin (routes[].mirror) whose answer came back (read and dropped).", "route", "origin")
	m.RouteMirrorDropped = counter("corput_route_mirror_dropped_total",
		"Sampled requests of the route whose mirror was dropped, by reason: max_in_flight (routes[].mirror.max_in_flight mirrors in flight: never queued), body (its body was not kept whole within routes[].mirror.max_body_bytes or the replay buffers), failed (the shadow gave no answer: no endpoint, refused, timed out, shutdown).", "route", "origin", "reason")
	m.RouteRequests = counter("corput_route_requests_total",
		"Requests routed, by route (routes[].name) and origin: the split target a request was sent to (routes[].split), or the route's one origin. A request is counted once, when it is routed.", "route", "origin")
	m.ProxyProtocolRefused = counter("corput_proxy_protocol_refused_total",
		"Downstream connections closed by the PROXY protocol policy, by reason: source (from outside downstream.proxy_protocol.from, other: refuse), missing, malformed, too_long, timeout.", "reason")
	for _, r := range proxyproto.Reasons {
		m.ProxyProtocolRefused.WithLabelValues(r)
	}
	m.AccessLogDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "corput_access_log_dropped_total",
		Help: "Access-log lines dropped: the log's buffer was full (a request never waits for the log) or the write failed."})
	m.TracingSpansDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "corput_tracing_spans_dropped_total",
		Help: "Sampled spans never exported: the export queue was full (a request never waits for the exporter), their batch failed to export, or the receiver rejected them."})
	m.SLOGuardActive = gauge("corput_slo_guard_active",
		"1 while the SLO guard acts for a workload class of the origin: its rolling p99 stayed over its slo.p99 budget (the worst zone is down-weighted, priority low routes are shed).", "origin", "class")
	m.ScaleOutSignal = gauge("corput_workload_scale_out_signal",
		"1 while the heavy class's share of the origin's requests has stayed above workload.scale_out.above_percent for workload.scale_out.for.", "origin")
	m.ScaleOutDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "corput_workload_scale_out_webhook_dropped_total",
		Help: "Scale-out events not queued for the webhook: its queue was full (routing never waits for it)."})

	m.Registry.MustRegister(
		m.ConnectionsCreated, m.ConnectionsClosed, m.ConnectionsOpen, m.PoolUtilization,
		m.AcquireWait, m.RequestsActive, m.RequestDuration, m.OutlierEjections,
		m.OutlierEjected, m.HealthProbes, m.HealthSkipped, m.HealthChanges, m.PanicMode, m.ZoneRequests, m.RequestsShed, m.SubsetSize, m.SubsetPlacement,
		m.MembershipChanges, m.DownstreamRequests, m.StaleRetries, m.IdleTimeouts, m.Retries, m.ReplayNotKept, m.ReplayBuffered, m.AcceptErrors, m.LoopRequests, m.ConfigReloads, m.ConfigLastReloadSuccess,
		m.FleetInstance, m.FleetSize, m.RequestsRefused, m.RouteRequests, m.ProxyProtocolRefused, m.RouteMirrored, m.RouteMirrorDropped,
		m.AccessLogDropped, m.TracingSpansDropped, m.SLOGuardActive, m.ScaleOutSignal, m.ScaleOutDropped,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// OnScrape registers f to run before every scrape, to bring state gauges up
// to date. f must be quick and must not block on the request path.
func (m *Metrics) OnScrape(f func()) {
	m.mu.Lock()
	m.refresh = append(m.refresh, f)
	m.mu.Unlock()
}

// Refresh runs the OnScrape functions. The handler calls it; tests and the
// lab may too.
func (m *Metrics) Refresh() {
	m.mu.Lock()
	fs := append([]func(){}, m.refresh...)
	m.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// Handler serves the Prometheus text exposition, refreshing gauges first.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.Refresh()
		h.ServeHTTP(w, r)
	})
}

// CodeClasses are the code_class label values, by ClassIndex.
var CodeClasses = [5]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// CodeClass maps a status code to its class label: "2xx" … "5xx".
func CodeClass(status int) string { return CodeClasses[ClassIndex(status)] }

// ClassIndex maps a status to 0..4 for 1xx..5xx (499 counts as 4xx): the
// index of CodeClass's label, for children bound in arrays.
func ClassIndex(status int) int {
	switch {
	case status >= 500:
		return 4
	case status >= 400:
		return 3
	case status >= 300:
		return 2
	case status >= 200:
		return 1
	}
	return 0
}

// CloseReasons lists every close reason, for pre-creating series.
var CloseReasons = []string{CloseIdle, CloseLifetime, CloseError, CloseKeepalive, CloseRemote, CloseEviction, CloseShutdown}

// ShedReasons lists every shed reason (corput_requests_shed_total's
// reason label), for pre-creating series: package forward's list.
var ShedReasons = func() []string {
	var out []string
	for _, r := range forward.ShedReasons() {
		out = append(out, r.String())
	}
	return out
}()

// EjectConsecutive5xx is the ejection reason for consecutive failures.
const EjectConsecutive5xx = "consecutive_5xx"

// EjectHealthCheck is the ejection reason for failed active health checks.
const EjectHealthCheck = "health_check"

// InitHealth creates the series of an origin's active health checks
// (health_check), so that they read 0 before the first probe.
func (m *Metrics) InitHealth(origin string) {
	for _, r := range []string{"pass", "fail"} {
		m.HealthProbes.WithLabelValues(origin, r)
	}
	for _, r := range []string{"live_traffic", "pool_busy"} {
		m.HealthSkipped.WithLabelValues(origin, r)
	}
	for _, to := range []string{"healthy", "unhealthy"} {
		m.HealthChanges.WithLabelValues(origin, to)
	}
	m.OutlierEjections.WithLabelValues(origin, EjectHealthCheck)
}

// InitOrigin creates the zero-valued series of one origin so that a scrape
// shows every metric from the start (a Prometheus vector exports nothing
// until a child exists, and rate() needs the zero).
func (m *Metrics) InitOrigin(origin string, loops int, protocols []string) {
	for l := 0; l < loops; l++ {
		loop := strconv.Itoa(l)
		for _, p := range protocols {
			m.ConnectionsCreated.WithLabelValues(origin, loop, p)
			m.ConnectionsOpen.WithLabelValues(origin, loop, p)
		}
		m.PoolUtilization.WithLabelValues(origin, loop)
		m.LoopRequests.WithLabelValues(origin, loop)
		m.SubsetSize.WithLabelValues(origin, loop)
	}
	for _, r := range CloseReasons {
		m.ConnectionsClosed.WithLabelValues(origin, r)
	}
	for _, r := range ShedReasons {
		m.RequestsShed.WithLabelValues(origin, r)
	}
	for _, c := range []string{"2xx", "3xx", "4xx", "5xx"} {
		m.RequestDuration.WithLabelValues(origin, c)
		m.DownstreamRequests.WithLabelValues(c)
	}
	m.AcquireWait.WithLabelValues(origin)
	for _, k := range []string{RetryUnsent, RetryReplay} {
		m.Retries.WithLabelValues(origin, k)
	}
	m.OutlierEjections.WithLabelValues(origin, EjectConsecutive5xx)
	m.OutlierEjected.WithLabelValues(origin)
	m.PanicMode.WithLabelValues(origin)
	m.ScaleOutSignal.WithLabelValues(origin)
	m.ZoneRequests.WithLabelValues(origin, "local")
	m.ZoneRequests.WithLabelValues(origin, "remote")
	m.MembershipChanges.WithLabelValues(origin)
	m.SubsetPlacement.WithLabelValues(origin, "shared")
	m.SubsetPlacement.WithLabelValues(origin, "local").Set(1) // every origin starts placed locally
}
