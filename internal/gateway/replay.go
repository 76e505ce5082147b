package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corput/corput/internal/replay"
	"github.com/corput/corput/internal/telemetry"
)

// newReplayCap is the gateway-wide bound of all replay buffers
// (limits.replay_buffers_bytes), counting the bodies not kept in
// corput_replay_buffer_overflows_total and showing the bytes kept in
// corput_replay_buffers_bytes.
func newReplayCap(max int64, m *telemetry.Metrics) *replay.Cap {
	c := replay.NewCap(max)
	var over [2]prometheus.Counter
	over[replay.OverBody] = m.ReplayNotKept.WithLabelValues(telemetry.ReplayOverRequest)
	over[replay.OverGateway] = m.ReplayNotKept.WithLabelValues(telemetry.ReplayOverGateway)
	c.Counted = func(why int) { over[why].Inc() }
	m.OnScrape(func() { m.ReplayBuffered.Set(float64(c.Used())) })
	return c
}
