package gateway

import (
	"context"
	"strconv"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/tracing"
)

// tracerShutdown bounds the flush of a Tracer a reload replaced.
const tracerShutdown = tracing.ExportTimeout

// newTracer builds the tracing block's Tracer, for the gateway at fleet
// position fl; nil when the block is absent.
func (g *Gateway) newTracer(c *config.Tracing, fl config.Fleet) (*tracing.Tracer, error) {
	if c == nil {
		return nil, nil
	}
	return tracing.New(c, tracing.Options{Dropped: g.metrics.TracingSpansDropped, Logger: g.log, Instance: instanceID(fl)})
}

// instanceID is the service.instance.id of a gateway at fleet position
// fl: its instance in a fleet of several, "" for a lone gateway.
func instanceID(fl config.Fleet) string {
	if fl.Size > 1 {
		return strconv.Itoa(fl.Instance)
	}
	return ""
}

// nextTracer is the Tracer a reload from cur to cfg serves with: the
// running one when neither the tracing block nor the instance it reports
// changed, else a new one (nil: off).
func (g *Gateway) nextTracer(cur *state, cfg *config.Config) (next *tracing.Tracer, changed bool, err error) {
	fl := fleetOf(cfg)
	if cur.tracer().Same(cfg.Tracing) && instanceID(fl) == instanceID(cur.fleet()) {
		return cur.tracer(), false, nil
	}
	next, err = g.newTracer(cfg.Tracing, fl)
	return next, true, err
}

// retireTracer flushes and stops a Tracer no request takes any more, in
// the background (a blackholed receiver must not hold the reload);
// Shutdown waits for it. A span of a request still in flight that ends
// after it stopped is not exported.
func (g *Gateway) retireTracer(t *tracing.Tracer) {
	if t == nil {
		return
	}
	g.rl.drains.Add(1)
	go func() {
		defer g.rl.drains.Done()
		ctx, cancel := context.WithTimeout(context.Background(), tracerShutdown)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			g.log.Warn("tracing: the replaced exporter did not flush", "err", err)
		}
	}()
}

// stopTracer flushes the Tracer in force at Shutdown, within ctx and at
// most tracerShutdown.
func (g *Gateway) stopTracer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, tracerShutdown)
	defer cancel()
	return g.st().tracer().Shutdown(ctx)
}
