package cluster

import (
	"strconv"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// originMetrics are an origin's Prometheus children, bound once so the
// request path does no label lookups.
type originMetrics struct {
	created     [][2]prometheus.Counter // [loop][h1, h2]
	requests    []prometheus.Counter    // [loop]: requests placed on it
	closed      []prometheus.Counter    // by pool.CloseReason
	acquireWait prometheus.Observer
	duration    [5]prometheus.Observer // by code class 1xx..5xx
	shed        map[forward.Reason]prometheus.Counter
	zoneLocal   prometheus.Counter
	zoneRemote  prometheus.Counter
	ejections   prometheus.Counter
	checkEject  prometheus.Counter // ejections by the active health checks
	membership  prometheus.Counter
	stale       prometheus.Counter // requests sent again after a stale connection (forward.Stale)
	idle        prometheus.Counter // exchanges ended by timeouts.stream_idle
	unsent      prometheus.Counter // retries after nothing was sent
	replays     prometheus.Counter // retries of requests that may have reached an origin
	ejected     prometheus.Gauge
	panic       prometheus.Gauge
}

func newOriginMetrics(m *telemetry.Metrics, name string, loops int) originMetrics {
	m.InitOrigin(name, loops, []string{upstream.ProtoH1, upstream.ProtoH2})
	om := originMetrics{
		acquireWait: m.AcquireWait.WithLabelValues(name),
		shed:        map[forward.Reason]prometheus.Counter{},
		zoneLocal:   m.ZoneRequests.WithLabelValues(name, "local"),
		zoneRemote:  m.ZoneRequests.WithLabelValues(name, "remote"),
		ejections:   m.OutlierEjections.WithLabelValues(name, telemetry.EjectConsecutive5xx),
		checkEject:  m.OutlierEjections.WithLabelValues(name, telemetry.EjectHealthCheck),
		membership:  m.MembershipChanges.WithLabelValues(name),
		stale:       m.StaleRetries.WithLabelValues(name),
		idle:        m.IdleTimeouts.WithLabelValues(name),
		unsent:      m.Retries.WithLabelValues(name, telemetry.RetryUnsent),
		replays:     m.Retries.WithLabelValues(name, telemetry.RetryReplay),
		ejected:     m.OutlierEjected.WithLabelValues(name),
		panic:       m.PanicMode.WithLabelValues(name),
	}
	for l := 0; l < loops; l++ {
		ls := strconv.Itoa(l)
		om.requests = append(om.requests, m.LoopRequests.WithLabelValues(name, ls))
		om.created = append(om.created, [2]prometheus.Counter{
			m.ConnectionsCreated.WithLabelValues(name, ls, upstream.ProtoH1),
			m.ConnectionsCreated.WithLabelValues(name, ls, upstream.ProtoH2),
		})
	}
	for _, r := range pool.CloseReasons() {
		for int(r) >= len(om.closed) {
			om.closed = append(om.closed, nil)
		}
		om.closed[r] = m.ConnectionsClosed.WithLabelValues(name, r.String())
	}
	for i, c := range telemetry.CodeClasses {
		om.duration[i] = m.RequestDuration.WithLabelValues(name, c)
	}
	for _, r := range forward.ShedReasons() {
		om.shed[r] = m.RequestsShed.WithLabelValues(name, r.String())
	}
	return om
}

// Answered implements forward.Observer: it counts a shed request, and an
// exchange ended by stream_idle.
func (m *originMetrics) Answered(r forward.Reason) {
	if r == forward.UpstreamIdleTimeout {
		m.idle.Inc()
		return
	}
	if c, ok := m.shed[r]; ok {
		c.Inc()
	}
}

// Resent implements forward.Observer.
func (m *originMetrics) Resent() { m.stale.Inc() }

// Retried implements forward.Observer: a retry, by what the failed
// attempt may have sent.
func (m *originMetrics) Retried(replay bool) {
	if replay {
		m.replays.Inc()
	} else {
		m.unsent.Inc()
	}
}

// Settled implements forward.Observer: the request's duration by class.
func (m *originMetrics) Settled(status int, d time.Duration) {
	m.duration[telemetry.ClassIndex(status)].Observe(d.Seconds())
}

// poolObserver feeds one (origin, loop)'s pool events into the metrics.
type poolObserver struct {
	m    *originMetrics
	loop int
}

func protoIndex(p string) int {
	if p == upstream.ProtoH2 {
		return 1
	}
	return 0
}

func (p *poolObserver) ConnCreated(protocol string, _ bool) {
	p.m.created[p.loop][protoIndex(protocol)].Inc()
}
func (p *poolObserver) ConnClosed(_ string, r pool.CloseReason, _ bool) { p.m.closed[r].Inc() }
func (p *poolObserver) DialFailed(error, time.Duration)                 {}
func (p *poolObserver) AcquireWait(d time.Duration, _ error)            { p.m.acquireWait.Observe(d.Seconds()) }

// balanceObserver feeds an origin's balancing events into the metrics.
type balanceObserver struct{ m *originMetrics }

func (b *balanceObserver) Ejected(_, reason string, _ time.Duration) {
	if reason == balance.ReasonHealthCheck {
		b.m.checkEject.Inc()
		return
	}
	b.m.ejections.Inc()
}
func (b *balanceObserver) EjectedCount(n int) { b.m.ejected.Set(float64(n)) }
func (b *balanceObserver) PanicMode(on bool) {
	if on {
		b.m.panic.Set(1)
	} else {
		b.m.panic.Set(0)
	}
}
func (b *balanceObserver) ZonePick(local bool) {
	if local {
		b.m.zoneLocal.Inc()
	} else {
		b.m.zoneRemote.Inc()
	}
}
