package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Source follows the membership of one or more origins.
type Source interface {
	// Run emits the full membership of each origin it follows whenever it
	// changes, until ctx ends; it then returns nil. emit is called from
	// one goroutine at a time, never after Run returns, and owns the
	// Update it is given. On errors Run keeps going and keeps the last
	// good membership; Err says what is wrong meanwhile.
	Run(ctx context.Context, emit func(Update)) error
	// Err is why the source is currently holding on to its last good
	// membership (an invalid file, a NACKed response, an unreachable
	// control plane), or nil when it is up to date. Safe to call from
	// any goroutine, including from emit.
	Err() error
}

// Static is the membership written in the configuration: emitted once.
type Static struct {
	u Update
}

var _ Source = (*Static)(nil)

// NewStatic returns the source of a fixed membership, validated, sorted and
// checked for duplicate addresses.
func NewStatic(origin string, eps []Endpoint) (*Static, error) {
	own := slices.Clone(eps)
	sortEndpoints(own)
	for i, e := range own {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("origin %s: endpoints[%d]: %w", origin, i, err)
		}
		if i > 0 && own[i-1].Address == e.Address {
			return nil, fmt.Errorf("origin %s: endpoints: address %s is listed twice; remove one", origin, e.Address)
		}
	}
	return &Static{u: Update{Origin: origin, Endpoints: own}}, nil
}

// Run emits the membership once and waits for ctx to end.
func (s *Static) Run(ctx context.Context, emit func(Update)) error {
	emit(Update{Origin: s.u.Origin, Endpoints: slices.Clone(s.u.Endpoints)})
	<-ctx.Done()
	return nil
}

// Err is always nil: a static membership was validated when it was made.
func (s *Static) Err() error { return nil }

// health is a source's current error, logged when it changes rather than
// every time it recurs.
type health struct {
	log    *slog.Logger
	kept   string     // what stays in force while failing; "" is "membership"
	mu     sync.Mutex // guards following
	err    error
	warned bool // err was logged (a waiting state set by wait is not)
}

// Err implements Source.
func (h *health) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// fail records err; it is logged at warning level unless it repeats the
// error already recorded.
func (h *health) fail(err error) {
	h.mu.Lock()
	same := h.warned && h.err != nil && h.err.Error() == err.Error()
	h.err, h.warned = err, true
	h.mu.Unlock()
	if !same {
		h.log.Warn("discovery: keeping the last good "+h.what(), "err", err)
	}
}

// what is what the source follows, for its log lines.
func (h *health) what() string {
	if h.kept == "" {
		return "membership"
	}
	return h.kept
}

// ok clears the recorded error, logging the recovery once.
func (h *health) ok() {
	h.mu.Lock()
	was, warned := h.err, h.warned
	h.err, h.warned = nil, false
	h.mu.Unlock()
	if warned {
		h.log.Info("discovery: "+h.what()+" source recovered", "was", was)
	}
}

// wait records a state that is not yet a failure, such as waiting for a
// control plane's first answer: Err reports it, the log does not.
func (h *health) wait(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err, h.warned = err, false
}

// errAlreadyRunning is returned by Run when it is called twice at once.
var errAlreadyRunning = errors.New("discovery: Run is already running for this source")
