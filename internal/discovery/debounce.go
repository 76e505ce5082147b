package discovery

import (
	"slices"
	"sync"
	"time"

	"github.com/corput/corput/internal/clock"
)

// DefaultDebounce is the debounce window when an origin sets none (the
// contract's `debounce: 2s`).
const DefaultDebounce = 2 * time.Second

// DefaultMaxWaitFactor sets MaxWait to this many windows when it is not
// given.
const DefaultMaxWaitFactor = 5

// Debouncer coalesces membership updates per origin so that flapping
// membership does not thrash the subset ring.
//
// Semantics (trailing edge with a cap):
//   - The first update of an origin applies at once: a gateway starting up
//     must not wait a window for its first membership.
//   - After that, an update arms the origin's window; every further update
//     within it replaces the pending one and restarts the window. When the
//     window passes quietly the latest update applies: 100 changes inside
//     one window are one applied update.
//   - Continuous flapping cannot starve the ring: a pending update applies
//     no later than MaxWait after the first change that is still pending.
//   - An update equal to the membership last applied is not applied (a
//     flap A→B→A inside one window applies nothing).
//   - An Urgent update (an endpoint is draining) applies at once, with
//     whatever was pending before it: it is the latest full membership.
//
// Apply runs on the clock's goroutine (the timer's, or the caller of Offer
// for the first update), one call at a time across all origins, and never
// after Close returns.
type Debouncer struct {
	clk   clock.Clock
	apply func(Update)

	applyMu sync.Mutex // held while taking a pending update and applying it; before mu

	mu      sync.Mutex // guards following
	closed  bool
	origins map[string]*debounced
	windows map[string]window
}

// debounced is one origin's debounce state, guarded by Debouncer.mu.
type debounced struct {
	applied      []Endpoint // last applied membership
	everApplied  bool
	pending      *Update
	pendingSince time.Time // first unapplied change
	timer        clock.Timer
}

// NewDebouncer returns a Debouncer that calls apply with each update that
// survives the window.
func NewDebouncer(clk clock.Clock, apply func(Update)) *Debouncer {
	return &Debouncer{
		clk:     clk,
		apply:   apply,
		origins: map[string]*debounced{},
		windows: map[string]window{},
	}
}

// SetWindow sets an origin's window length and cap. A length ≤ 0 applies
// every (non-identical) update at once; a maxWait ≤ 0 means
// DefaultMaxWaitFactor × length, and one shorter than length is raised to
// it. Origins without a SetWindow use DefaultDebounce. It affects updates
// offered after it.
func (d *Debouncer) SetWindow(origin string, length, maxWait time.Duration) {
	if maxWait <= 0 {
		maxWait = DefaultMaxWaitFactor * length
	}
	maxWait = max(maxWait, length)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.windows[origin] = window{length: length, maxWait: maxWait}
}

// window is one origin's debounce setting.
type window struct {
	length  time.Duration // quiet time before the latest update applies
	maxWait time.Duration // cap on how long a change may stay pending
}

func (d *Debouncer) windowLocked(origin string) window {
	if w, ok := d.windows[origin]; ok {
		return w
	}
	return window{length: DefaultDebounce, maxWait: DefaultMaxWaitFactor * DefaultDebounce}
}

// Offer hands an update to the debouncer, which takes ownership of
// u.Endpoints. It never blocks on a slow apply except for an origin's first
// update, an urgent one or a zero window, which apply on the caller's
// goroutine.
func (d *Debouncer) Offer(u Update) {
	sortEndpoints(u.Endpoints)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	o := d.origins[u.Origin]
	if o == nil {
		o = &debounced{}
		d.origins[u.Origin] = o
	}
	w := d.windowLocked(u.Origin)
	now := d.clk.Now()
	if o.pending == nil {
		o.pendingSince = now
	}
	o.pending = &u
	if !o.everApplied || w.length <= 0 || u.Urgent {
		if o.timer != nil {
			o.timer.Stop()
		}
		d.mu.Unlock()
		d.fire(u.Origin)
		return
	}
	wait := min(w.length, o.pendingSince.Add(w.maxWait).Sub(now))
	if o.timer == nil {
		origin := u.Origin
		o.timer = d.clk.AfterFunc(wait, func() { d.fire(origin) })
	} else {
		o.timer.Reset(wait)
	}
	d.mu.Unlock()
}

// fire applies an origin's pending update unless it equals the membership
// already applied.
func (d *Debouncer) fire(origin string) {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.mu.Lock()
	o := d.origins[origin]
	if d.closed || o == nil || o.pending == nil {
		d.mu.Unlock()
		return
	}
	u := *o.pending
	o.pending = nil
	if o.everApplied && slices.Equal(u.Endpoints, o.applied) {
		d.mu.Unlock()
		return
	}
	o.applied, o.everApplied = u.Endpoints, true
	d.mu.Unlock()
	d.apply(Update{Origin: u.Origin, Endpoints: slices.Clone(u.Endpoints), Urgent: u.Urgent})
}

// Close drops pending updates and stops the timers. It waits for an apply
// in progress, so it must not be called from apply.
func (d *Debouncer) Close() {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for _, o := range d.origins {
		if o.timer != nil {
			o.timer.Stop()
		}
		o.pending = nil
	}
}
