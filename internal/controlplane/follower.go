package controlplane

import (
	"bytes"
	"log/slog"
	"os"
	"slices"
	"sync"
)

// follower serves the state a writer persists, read-only: it reads the
// state file every poll (load), or is handed the state as the Kubernetes
// API holds it (publish), and publishes what changed in it. It never
// writes and takes no lock, so any number of followers can serve beside
// the writer (docs/control-plane.md, "Replicas").
type follower struct {
	path    string // the state file; "" when the state comes from the Kubernetes API
	server  *Server
	metrics *Metrics
	log     *slog.Logger

	mu     sync.Mutex // guards following
	data   []byte     // the content last read
	state  *State     // as published; nil before the first good read
	failed bool       // the last read was refused (logged once)
}

// load reads the state file and publishes its changes. A missing or
// invalid file keeps what is served (logged once).
func (f *follower) load() {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := os.ReadFile(f.path)
	if err == nil && f.data != nil && bytes.Equal(data, f.data) {
		return
	}
	var st *State
	if err == nil {
		st, err = ParseState(data)
	}
	if err != nil {
		f.refusedLocked(err)
		return
	}
	f.data = data
	f.publishLocked(st)
}

// refusedLocked logs, once, that the writer's state cannot be read.
func (f *follower) refusedLocked(err error) {
	if !f.failed {
		f.log.Warn("control plane (follower): cannot read the writer's state; serving the last good one", "state", f.where(), "err", err)
	}
	f.failed = true
}

func (f *follower) where() string {
	if f.path == "" {
		return "the Kubernetes API"
	}
	return f.path
}

// publish publishes the changes of st, the writer's state as read.
func (f *follower) publish(st *State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publishLocked(st)
}

// served sets the state taken as published, without publishing it: what
// a writer in this process published before it stopped.
func (f *follower) served(st *State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state, f.data = st, nil
}

func (f *follower) publishLocked(st *State) {
	if f.failed {
		f.log.Info("control plane (follower): the writer's state is readable again", "state", f.where())
	}
	f.failed = false
	changed, removed := changesFrom(f.state, st)
	if err := f.server.Publish(changed, removed); err != nil {
		f.log.Error("control plane (follower): publish failed", "err", err)
		return
	}
	f.state = st
	for name, a := range changed {
		f.log.Info("control plane (follower): published", "origin", name, "version", a.Version, "endpoints", len(a.Endpoints), "subsets", a.Subsets)
	}
}

// changesFrom lists the origins of next that differ from served (nil:
// nothing served) in version or content, and those served no longer in
// next.
func changesFrom(served, next *State) (map[string]*Assignment, []string) {
	changed := map[string]*Assignment{}
	var removed []string
	for name, a := range next.Origins {
		var old *Assignment
		if served != nil {
			old = served.Origins[name]
		}
		if old == nil || old.Version != a.Version || !old.sameContent(a) {
			changed[name] = a
		}
	}
	if served != nil {
		for name := range served.Origins {
			if _, ok := next.Origins[name]; !ok {
				removed = append(removed, name)
			}
		}
	}
	slices.Sort(removed)
	return changed, removed
}

func (f *follower) ready() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state != nil
}

func (f *follower) snapshot() *State {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == nil {
		return NewState()
	}
	return f.state.Clone()
}
