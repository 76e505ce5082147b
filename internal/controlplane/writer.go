package controlplane

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery"
)

// DefaultDebounce is how long the membership must be quiet before the
// writer publishes a change (--debounce).
const DefaultDebounce = time.Second

// maxWaitFactor caps a pending change at this many debounce windows
// after the first change still pending, as the gateways' debounce does.
const maxWaitFactor = 5

// writer owns the state: it applies the origins and memberships its
// sources give to the rings, persists the result, then publishes it —
// in that order, so that nothing a gateway has seen is lost by a crash.
//
// Changes are debounced (trailing edge with a cap): a change arms the
// window, each further one restarts it, and when it passes quietly every
// pending change is applied as one batch — one state write, one cache
// update holding only the origins whose assignment changed. A pending
// change waits at most maxWaitFactor windows. A change that gives an
// origin its first assignment applies at once, so that a new origin does
// not wait a window to be served.
type writer struct {
	store    store
	debounce time.Duration
	clk      clock.Clock
	log      *slog.Logger
	server   *Server
	metrics  *Metrics

	mu      sync.Mutex // guards following; taken after flushMu
	closed  bool
	specs   []Origin              // the pending set of origins; nil: none pending
	members map[string]membership // pending memberships (relay, Kubernetes)
	armed   bool                  // a window is open
	since   time.Time             // when the open window's first change came
	timer   clock.Timer
	known   map[string]bool // origins published at least once

	flushMu    sync.Mutex // held while flushing; guards following
	origins    map[string]*origin
	state      *State // as last written
	configured bool   // a set of origins has been applied
	unsaved    bool   // the store may not hold state: the next flush writes it
}

// store is where a writer persists its state: the state file
// (fileStore), or objects in the Kubernetes API (kubeStore).
type store interface {
	// write persists st whole, and reports whether it wrote anything (a
	// store that holds st already may not); after an error, what st
	// changed may be partly persisted, and the writer publishes none of it.
	write(st *State) (wrote bool, err error)
	// String names the store in logs.
	String() string
	// close releases what the store holds (the file's lock).
	close()
}

// fileStore is the state file, held by its lock.
type fileStore struct {
	path    string
	release func()
}

func (f *fileStore) write(st *State) (bool, error) { return true, WriteState(f.path, st) }
func (f *fileStore) String() string                { return "file " + f.path }
func (f *fileStore) close()                        { f.release() }

// openFileStore takes the state file's lock, loads the state (a damaged
// file is an error: starting over would reshuffle the fleet), removes
// what a crashed write left, and counts the generation up.
func openFileStore(path string, log *slog.Logger) (*fileStore, *State, error) {
	release, err := lockState(path)
	if err != nil {
		return nil, nil, err
	}
	st, fresh, err := LoadState(path)
	if err != nil {
		release()
		return nil, nil, configError{err}
	}
	if err := RemoveTemps(path); err != nil {
		log.Warn("control plane: cannot remove a temporary state file a crash left", "err", err)
	}
	st.Generation++
	log.Info("control plane: state loaded", "file", path, "fresh", fresh, "generation", st.Generation, "origins", len(st.Origins), "fleet", len(st.Fleet))
	return &fileStore{path: path, release: release}, st, nil
}

// openWriter writes the loaded state back to its store (a new
// generation, or the state as the Kubernetes API holds it) and returns
// the writer that owns it from then on; on an error the store is closed.
func openWriter(s store, st *State, debounce time.Duration, clk clock.Clock, log *slog.Logger, m *Metrics) (*writer, error) {
	if err := writeCounted(s, st, m); err != nil {
		s.close()
		return nil, err
	}
	w := &writer{
		store: s, debounce: debounce, clk: clk, log: log, metrics: m,
		members: map[string]membership{}, known: map[string]bool{},
		origins: map[string]*origin{}, state: st,
	}
	for name := range st.Origins {
		w.known[name] = true
	}
	return w, nil
}

// start publishes the persisted state as it is: gateways that reconnect
// to a restarted control plane get the assignment they had. served is
// what this process published before (a follower's state, when a replica
// takes the Lease; nil: nothing): only what differs is published.
func (w *writer) start(s *Server, served *State) error {
	w.server = s
	return s.Publish(changesFrom(served, w.state.Clone()))
}

// rewrite writes the state again (another writer changed what the store
// holds): the next flush commits even with no change of its own.
func (w *writer) rewrite() {
	w.flushMu.Lock()
	w.unsaved = true
	w.flushMu.Unlock()
	w.flush()
}

// setOrigins offers the set of origins to serve (from the source file, or
// the relayed clusters), with their memberships in file mode.
func (w *writer) setOrigins(specs []Origin) {
	w.mu.Lock()
	w.specs = slices.Clone(specs)
	urgent := slices.ContainsFunc(specs, func(o Origin) bool { return !w.known[o.Name] && o.Endpoints != nil })
	w.armLocked(urgent)
}

// membership is an origin's membership as a source offers it.
type membership struct {
	endpoints []discovery.Endpoint // they serve
	draining  []string             // they drain: published DRAINING, off the ring
}

// offerMembers offers an origin's membership (relay mode).
func (w *writer) offerMembers(name string, eps []discovery.Endpoint) {
	w.offer(name, membership{endpoints: eps}, false)
}

// offer offers an origin's membership. An urgent one (an endpoint that
// served now drains) is published at once, with every pending change, as
// is an origin's first.
func (w *writer) offer(name string, m membership, urgent bool) {
	w.mu.Lock()
	w.members[name] = m
	w.armLocked(urgent || !w.known[name])
}

// armLocked opens or extends the window, or flushes at once when urgent
// or without a window. It releases w.mu.
func (w *writer) armLocked(urgent bool) {
	if w.closed {
		w.mu.Unlock()
		return
	}
	if urgent || w.debounce <= 0 {
		if w.timer != nil {
			w.timer.Stop()
		}
		w.armed = false
		w.mu.Unlock()
		w.flush()
		return
	}
	now := w.clk.Now()
	if !w.armed {
		w.armed, w.since = true, now
	}
	wait := min(w.debounce, w.since.Add(maxWaitFactor*w.debounce).Sub(now))
	w.flushAfterLocked(wait)
	w.mu.Unlock()
}

// retryLater arms a window to try a failed write again.
func (w *writer) retryLater() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	wait := max(w.debounce, 100*time.Millisecond)
	w.armed, w.since = true, w.clk.Now()
	w.flushAfterLocked(wait)
	w.mu.Unlock()
}

// flushAfterLocked arms the timer to flush after wait. w.mu is held.
func (w *writer) flushAfterLocked(wait time.Duration) {
	if w.timer == nil {
		w.timer = w.clk.AfterFunc(wait, w.flush)
		return
	}
	w.timer.Reset(wait)
}

// flush applies every pending change, persists, then publishes the
// origins whose assignment changed.
func (w *writer) flush() {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	specs, members := w.specs, w.members
	w.specs, w.members, w.armed = nil, map[string]membership{}, false
	w.mu.Unlock()

	w.apply(specs, members)
	changed, removed := w.diff()
	if len(changed) == 0 && len(removed) == 0 && !w.unsaved {
		return
	}
	next := w.state.Clone()
	for name, a := range changed {
		next.Origins[name] = a
	}
	for _, name := range removed {
		delete(next.Origins, name)
	}
	if err := w.commit(next); err != nil {
		w.log.Error("control plane: state write failed; publishing nothing until it succeeds (gateways keep the last published assignment)",
			"state", w.store, "err", err)
		w.unsaved = true
		w.retryLater()
		return
	}
	w.unsaved = false
	for name, a := range changed {
		w.origins[name].published = a
	}
	if err := w.server.Publish(changed, removed); err != nil {
		w.log.Error("control plane: publish failed", "err", err)
	}
	w.mu.Lock()
	for name := range changed {
		w.known[name] = true
	}
	for _, name := range removed {
		delete(w.known, name)
	}
	w.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(changed)) {
		a := changed[name]
		w.log.Info("control plane: published", "origin", name, "version", a.Version, "endpoints", len(a.Endpoints), "subsets", a.Subsets)
	}
	for _, name := range removed {
		w.log.Info("control plane: origin removed", "origin", name)
	}
}

// apply applies pending changes to the rings. An origin whose change
// cannot be applied keeps its ring as it was (the sources validate, so
// this is a bug's path) and the error is logged.
func (w *writer) apply(specs []Origin, members map[string]membership) {
	if specs != nil {
		w.configured = true
		want := make(map[string]bool, len(specs))
		for _, sp := range specs {
			want[sp.Name] = true
			o := w.origins[sp.Name]
			var err error
			if o == nil {
				if o, err = newOrigin(sp.Name, sp.Sizing, w.state.Origins[sp.Name]); err != nil {
					w.log.Error("control plane: cannot restore an origin's persisted indices", "origin", sp.Name, "err", err)
					continue
				}
				w.origins[sp.Name] = o
			} else if err = o.setSizing(sp.Sizing); err != nil {
				w.log.Error("control plane: sizing refused", "origin", sp.Name, "err", err)
			}
			if sp.Endpoints != nil {
				w.setMembers(o, membership{endpoints: sp.Endpoints})
			}
		}
		for name := range w.origins {
			if !want[name] {
				delete(w.origins, name)
			}
		}
	}
	for name, m := range members {
		if o := w.origins[name]; o != nil {
			w.setMembers(o, m)
		}
	}
}

func (w *writer) setMembers(o *origin, m membership) {
	before := o.ring
	var indices map[string]int
	if before != nil {
		indices = before.Indices()
	}
	if err := o.setMembers(m.endpoints, m.draining); err != nil {
		w.log.Error("control plane: membership refused", "origin", o.name, "err", err)
		return
	}
	if before != nil {
		moved := 0
		for addr, i := range o.ring.Indices() {
			if j, ok := indices[addr]; ok && i != j {
				moved++
			}
		}
		w.log.Debug("control plane: membership applied", "origin", o.name, "endpoints", o.ring.Len(), "moved", moved)
	}
}

// diff returns the assignments that differ from what was published, each
// with its version counted up, and the published origins no longer
// served.
func (w *writer) diff() (map[string]*Assignment, []string) {
	changed := map[string]*Assignment{}
	for name, o := range w.origins {
		a := o.assignment()
		if a == nil || a.sameContent(o.published) {
			continue
		}
		a.Version++
		changed[name] = a
	}
	var removed []string
	if w.configured {
		for name := range w.state.Origins {
			if _, ok := w.origins[name]; !ok {
				removed = append(removed, name)
			}
		}
	}
	slices.Sort(removed)
	return changed, removed
}

// persistFleet writes the state with the fleet's slots at once (the
// fleet persists before it publishes, as flush does). The fleet calls it
// holding its own lock: the lock order is fleet.mu, then flushMu.
func (w *writer) persistFleet(slots []string) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return errors.New("the writer is closed")
	}
	next := w.state.Clone()
	next.Fleet = slices.Clone(slots)
	return w.commit(next)
}

// commit writes next as the state file and, once it is written, holds it
// as the state. Callers hold flushMu.
func (w *writer) commit(next *State) error {
	if err := writeCounted(w.store, next, w.metrics); err != nil {
		return err
	}
	w.state = next
	return nil
}

// writeCounted is a store's write, counted in
// corput_controlplane_state_writes_total when it wrote something or failed.
func writeCounted(s store, st *State, m *Metrics) error {
	wrote, err := s.write(st)
	switch {
	case err != nil:
		m.StateWrites.WithLabelValues("error").Inc()
		return err
	case wrote:
		m.StateWrites.WithLabelValues("ok").Inc()
	}
	return nil
}

// ready reports whether every origin to serve has been published.
func (w *writer) ready() bool {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	if !w.configured {
		return false
	}
	for _, o := range w.origins {
		if o.published == nil {
			return false
		}
	}
	return true
}

// snapshot returns a copy of the state as last written.
func (w *writer) snapshot() *State {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	return w.state.Clone()
}

// close drops pending changes, waits for a flush in progress and
// closes the store (releasing the state file's lock).
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.store.close()
}

// configError marks an error in the control plane's input (its flags, its
// source file, its state file): `corput control-plane` exits 2 for it.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// IsConfigError reports whether err is an error in the control plane's
// input, not in its environment.
func IsConfigError(err error) bool {
	var ce configError
	return errors.As(err, &ce)
}
