package controlplane

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the control plane's series (docs/contract.md, "Metrics of
// corput control-plane"), on a registry of their own with the Go runtime
// and process collectors.
type Metrics struct {
	Registry    *prometheus.Registry
	Pushes      *prometheus.CounterVec // origin
	Responses   prometheus.Counter
	NACKs       prometheus.Counter
	Connected   prometheus.Gauge
	StateWrites *prometheus.CounterVec // result: ok, error
	Endpoints   *prometheus.GaugeVec   // origin
	Subsets     *prometheus.GaugeVec   // origin

	FleetSize      prometheus.Gauge   // fleet positions assigned (the size served)
	FleetConnected prometheus.Gauge   // nodes with an open fleet stream
	FleetMoves     prometheus.Counter // gateways moved by compaction
	FleetRefused   prometheus.Counter // fleet subscriptions refused: node id not the certificate's
	TLSRefused     prometheus.Counter // TLS handshakes the ADS listener refused
}

// NewMetrics creates and registers the control plane's collectors.
func NewMetrics() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.Pushes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corput_controlplane_pushes_total",
		Help: "Changed assignments published for an origin (an EDS resource updated in the cache); an unchanged origin is not pushed."}, []string{"origin"})
	m.Responses = prometheus.NewCounter(prometheus.CounterOpts{Name: "corput_controlplane_responses_total",
		Help: "EDS responses sent to gateways, over all streams."})
	m.NACKs = prometheus.NewCounter(prometheus.CounterOpts{Name: "corput_controlplane_nacks_total",
		Help: "Responses a gateway rejected (a request with error_detail)."})
	m.Connected = prometheus.NewGauge(prometheus.GaugeOpts{Name: "corput_controlplane_gateways_connected",
		Help: "ADS streams open now (one per gateway and control-plane address)."})
	m.StateWrites = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corput_controlplane_state_writes_total",
		Help: "State file writes, by result; nothing is published before its write succeeds."}, []string{"result"})
	m.Endpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corput_controlplane_endpoints",
		Help: "Endpoints on an origin's ring as published."}, []string{"origin"})
	m.Subsets = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "corput_controlplane_subsets",
		Help: "An origin's subset count as published (ring_subsets)."}, []string{"origin"})
	m.FleetSize = prometheus.NewGauge(prometheus.GaugeOpts{Name: "corput_controlplane_fleet_size",
		Help: "Fleet positions assigned (the fleet size served), connected or held for their grace."})
	m.FleetConnected = prometheus.NewGauge(prometheus.GaugeOpts{Name: "corput_controlplane_fleet_connected",
		Help: "Gateways (node ids) with an open fleet-position stream."})
	m.FleetMoves = prometheus.NewCounter(prometheus.CounterOpts{Name: "corput_controlplane_fleet_moves_total",
		Help: "Gateways moved to another fleet position by compaction (the highest into a released hole)."})
	m.FleetRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "corput_controlplane_fleet_identity_refusals_total",
		Help: "Fleet-position subscriptions refused because the node id is not an identity (DNS or URI SAN) of the stream's client certificate (--fleet-require-identity)."})
	m.TLSRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "corput_controlplane_tls_handshake_failures_total",
		Help: "TLS handshakes the ADS listener refused or failed (no client certificate, one of another CA, a client that does not trust the server's)."})
	m.Registry.MustRegister(m.Pushes, m.Responses, m.NACKs, m.Connected, m.StateWrites, m.Endpoints, m.Subsets,
		m.FleetSize, m.FleetConnected, m.FleetMoves, m.FleetRefused, m.TLSRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"ok", "error"} {
		m.StateWrites.WithLabelValues(r)
	}
	return m
}

// Handler serves the Prometheus text exposition.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// published records an origin's published assignment.
func (m *Metrics) published(name string, a *Assignment) {
	m.Pushes.WithLabelValues(name).Inc()
	m.Endpoints.WithLabelValues(name).Set(float64(len(a.Endpoints)))
	m.Subsets.WithLabelValues(name).Set(float64(a.Subsets))
}

// removed drops a removed origin's series.
func (m *Metrics) removed(name string) {
	m.Pushes.DeleteLabelValues(name)
	m.Endpoints.DeleteLabelValues(name)
	m.Subsets.DeleteLabelValues(name)
}
