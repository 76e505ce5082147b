package gateway

import (
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/slo"
)

// setWebhook makes cfg's workload.scale_out.webhook the scale-out events'
// destination: a new notifier when the address changed (the old one
// closes, dropping what it still held), none without one.
func (g *Gateway) setWebhook(cfg *config.Config) {
	url := ""
	if cfg.Workload != nil && cfg.Workload.ScaleOut != nil {
		url = cfg.Workload.ScaleOut.Webhook
	}
	old := g.webhook.Load()
	if old != nil && old.URL() == url {
		return
	}
	var n *slo.Notifier
	if url != "" {
		n = slo.NewNotifier(url, g.sloClock(), nil, g.metrics.ScaleOutDropped.Inc)
	}
	g.webhook.Store(n)
	if old != nil {
		old.Close()
	}
}

// notify hands a scale-out event to the webhook in force, if any.
func (g *Gateway) notify(e slo.Event) {
	if n := g.webhook.Load(); n != nil {
		n.Notify(e)
	}
}

// sloClock is the clock of the SLO monitors' windows.
func (g *Gateway) sloClock() clock.Clock {
	if g.opts.SLOClock != nil {
		return g.opts.SLOClock
	}
	return g.clk
}

// closeWebhook stops the webhook's sender.
func (g *Gateway) closeWebhook() {
	if n := g.webhook.Swap(nil); n != nil {
		n.Close()
	}
}
