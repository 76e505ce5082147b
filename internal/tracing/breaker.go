package tracing

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/clock"
)

// The breaker's probe backoff: the wait after the first failed export, and
// its cap; each failed probe doubles it.
const (
	ProbeBackoff    = time.Second
	MaxProbeBackoff = 30 * time.Second
)

// breaker stops recording spans while exports fail (docs/tracing.md, "While
// exports fail"):
//   - it starts unproven, as if probing: one batch's worth of spans is
//     recorded and exported, and the rest shed until an export succeeds;
//   - closed (exports succeed): spans are recorded while the queue has room;
//   - a failed export opens it: no span is recorded (each sampled one is
//     shed, counted as dropped), and the batches still queued are dropped
//     without being sent;
//   - after the backoff (ProbeBackoff, doubled by each failed probe up to
//     MaxProbeBackoff) one batch's worth of spans is recorded, and the
//     next export is sent: the probe;
//   - the first export that succeeds closes it.
//
// A receiver that is down (refused at once) or blackholed (each export
// waits for ExportTimeout) so costs requests what a full queue costs: no
// SDK call, no allocation, no export.
//
// admit is the requests' side: atomic loads only (and one add while a
// probe's spans are recorded). The export side runs on the batch
// processor's goroutine, one export at a time.
type breaker struct {
	open   atomic.Bool  // exports fail: spans are shed unless budget allows
	budget atomic.Int64 // spans still to record for the probe batch while open
	batch  int64        // the probe's budget: one export's worth
	clk    clock.Clock
	log    *slog.Logger

	mu      sync.Mutex    // guards following
	backoff time.Duration // the wait before the next probe (0 while closed)
	armed   bool          // the backoff elapsed: the next export is the probe
	timer   clock.Timer   // arms the next probe
	stopped bool          // Shutdown: no more probes armed
}

// newBreaker is an unproven breaker: its first export is its first probe.
func newBreaker(batch int, clk clock.Clock, log *slog.Logger) *breaker {
	b := &breaker{batch: int64(batch), clk: clk, log: log, armed: true}
	b.open.Store(true)
	b.budget.Store(b.batch)
	return b
}

// admit reports whether a sampled span starting now may be recorded.
func (b *breaker) admit() bool {
	return !b.open.Load() || (b.budget.Load() > 0 && b.budget.Add(-1) >= 0)
}

// sending reports whether an export starting now goes to the exporter:
// always while closed; while open only the probe, once its backoff has
// elapsed.
func (b *breaker) sending() bool {
	if !b.open.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	probe := b.armed
	b.armed = false
	return probe
}

// exported takes the outcome of an export of n spans: a success (or a
// partial one: the receiver answered) closes the breaker, a failure opens it (or, for a probe, doubles its backoff)
// and arms the next probe. Each failure is logged: there is one per
// backoff at most.
func (b *breaker) exported(err error, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := answered(err); ok {
		if b.open.Load() {
			b.open.Store(false)
			b.budget.Store(0)
			if b.timer != nil {
				b.timer.Stop()
			}
			if b.backoff > 0 { // not the first export's success
				b.log.Info("tracing: an export succeeded; spans are recorded again")
			}
			b.backoff, b.armed = 0, false
		}
		return
	}
	b.budget.Store(0)
	if b.backoff = min(2*b.backoff, MaxProbeBackoff); b.backoff == 0 {
		b.backoff = ProbeBackoff
	}
	b.open.Store(true)
	b.armed = false
	if b.stopped {
		return
	}
	if b.timer == nil {
		b.timer = b.clk.AfterFunc(b.backoff, b.halfOpen)
	} else {
		b.timer.Reset(b.backoff)
	}
	b.log.Warn("tracing: an export failed, its batch dropped; spans are not recorded until a probe export succeeds",
		"spans", n, "next_probe_in", b.backoff, "err", err)
}

// halfOpen lets one batch's worth of spans be recorded, and arms the probe
// that will export them.
func (b *breaker) halfOpen() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open.Load() || b.stopped {
		return
	}
	b.armed = true
	b.budget.Store(b.batch)
}

// stop disarms the next probe (Shutdown).
func (b *breaker) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
	}
}
