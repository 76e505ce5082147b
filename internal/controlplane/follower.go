package controlplane

import (
	"bytes"
	"log/slog"
	"os"
	"sync"
)

// follower serves the state a writer persists, read-only: it reads the
// state file every poll and publishes what changed in it. It never writes
// and takes no lock, so any number of followers can serve beside the
// writer (docs/control-plane.md, "Replicas").
type follower struct {
	path    string
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
		if !f.failed {
			f.log.Warn("control plane (follower): cannot read the writer's state; serving the last good one", "file", f.path, "err", err)
		}
		f.failed = true
		return
	}
	if f.failed {
		f.log.Info("control plane (follower): the writer's state is readable again", "file", f.path)
	}
	f.failed = false
	f.data = data
	changed := map[string]*Assignment{}
	var removed []string
	for name, a := range st.Origins {
		if old := f.stateOrigin(name); old == nil || old.Version != a.Version || !old.sameContent(a) {
			changed[name] = a
		}
	}
	if f.state != nil {
		for name := range f.state.Origins {
			if _, ok := st.Origins[name]; !ok {
				removed = append(removed, name)
			}
		}
	}
	if err := f.server.Publish(changed, removed); err != nil {
		f.log.Error("control plane (follower): publish failed", "err", err)
		return
	}
	f.state = st
	for name, a := range changed {
		f.log.Info("control plane (follower): published", "origin", name, "version", a.Version, "endpoints", len(a.Endpoints), "subsets", a.Subsets)
	}
}

func (f *follower) stateOrigin(name string) *Assignment {
	if f.state == nil {
		return nil
	}
	return f.state.Origins[name]
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
