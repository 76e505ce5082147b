package origin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// counters are the origin-wide ground truth.
type counters struct {
	accepted  atomic.Int64 // TCP connections accepted
	open      atomic.Int64 // accepted and not yet closed
	conc      atomic.Int64 // requests in service
	maxConc   atomic.Int64
	queued    atomic.Int64 // class requests waiting for a worker
	maxQueued atomic.Int64
}

// Stats is a snapshot of an origin's ground truth; GET /origin/stats
// serves it as JSON.
type Stats struct {
	ID            string  `json:"id,omitempty"`
	Profile       string  `json:"profile,omitempty"`
	Proto         Proto   `json:"proto"`
	UptimeSeconds float64 `json:"uptime_s"`
	Workers       int     `json:"workers"` // 0 is unlimited
	Slowdown      float64 `json:"slowdown"`
	WarmupFactor  float64 `json:"warmup_factor"` // now

	Connections Connections `json:"connections"`
	// Concurrency counts requests in service: class requests holding a
	// worker, and raw requests (which need none).
	Concurrency Level `json:"concurrency"`
	Queued      Level `json:"queued"` // waiting for a worker
	// Requests counts finished requests by class name (RawClass included)
	// and outcome.
	Requests map[string]Counts `json:"requests"`
	// Seconds is the per-second history, oldest first, at most
	// Options.History long.
	Seconds []Second `json:"seconds"`
	// Listeners counts each listener (Options.Listeners), in port order.
	Listeners []ListenerStats `json:"listeners"`
	// TLS counts the TLS handshakes (Proto TLS only).
	TLS *TLSStats `json:"tls,omitempty"`
}

// ListenerStats is one listener's ground truth: the connections it
// accepted and the requests that arrived on them, of every class (the
// stats page excluded), counted when they arrive.
type ListenerStats struct {
	Address  string `json:"address"`
	Accepted int64  `json:"accepted"`
	Requests int64  `json:"requests"`
}

// listenerCounters are one listener's counters.
type listenerCounters struct {
	addr     string
	accepted atomic.Int64
	requests atomic.Int64
}

// listenerKey is the context key of a connection's *listenerCounters.
type listenerKey struct{}

// connContext is the server's ConnContext: it puts the counters of the
// listener that accepted c where ServeHTTP finds them.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if cc, ok := c.(*countedConn); ok {
		return context.WithValue(ctx, listenerKey{}, cc.lc)
	}
	return ctx
}

// countRequest counts r on the listener that accepted its connection.
func countRequest(r *http.Request) {
	if lc, ok := r.Context().Value(listenerKey{}).(*listenerCounters); ok {
		lc.requests.Add(1)
	}
}

// Connections counts TCP connections.
type Connections struct {
	Accepted int64 `json:"accepted"`
	Open     int64 `json:"open"`
}

// Level is a gauge and its peak since Start.
type Level struct {
	Current int64 `json:"current"`
	Max     int64 `json:"max"`
}

// Counts are request outcomes by HTTP status: 200, injected 500, and 499
// for a request dropped before its answer (the client left while it waited
// for a worker, or the origin closed).
type Counts struct {
	OK       int64 `json:"200"`
	Error    int64 `json:"500"`
	Canceled int64 `json:"499"`
}

// Total is every finished request.
func (c Counts) Total() int64 { return c.OK + c.Error + c.Canceled }

// Second is one second of history; T counts seconds since Start.
type Second struct {
	T              int64 `json:"t"`
	Requests       int64 `json:"requests"`        // finished in this second
	MaxConcurrency int64 `json:"max_concurrency"` // peak requests in service
	// MaxQueued and MaxInFlight are the peaks of class requests waiting
	// for a worker, and of requests in service or waiting, seen at the
	// second's arrivals, starts and ends.
	MaxQueued   int64 `json:"max_queued"`
	MaxInFlight int64 `json:"max_in_flight"`
	Accepted    int64 `json:"accepted"` // connections opened
	Closed      int64 `json:"closed"`   // connections closed
	Open        int64 `json:"open"`     // connections open at its end
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	st := Stats{
		ID:            s.opts.ID,
		Profile:       s.opts.Profile,
		Proto:         s.opts.Proto,
		UptimeSeconds: s.clock.Now().Sub(s.start).Seconds(),
		Workers:       s.opts.Workers,
		Slowdown:      s.opts.Slowdown,
		WarmupFactor:  s.WarmupFactor(),
		Connections:   Connections{Accepted: s.accepted.Load(), Open: s.open.Load()},
		Concurrency:   Level{Current: s.conc.Load(), Max: s.maxConc.Load()},
		Queued:        Level{Current: s.queued.Load(), Max: s.maxQueued.Load()},
		Requests:      map[string]Counts{},
	}
	for _, c := range s.allClasses() {
		st.Requests[c.name] = Counts{OK: c.ok.Load(), Error: c.failed.Load(), Canceled: c.canceled.Load()}
	}
	st.Seconds = s.hist.snapshot(s.second(), st.Connections.Open)
	st.Listeners = make([]ListenerStats, len(s.lcs))
	for i, lc := range s.lcs {
		st.Listeners[i] = ListenerStats{Address: lc.addr, Accepted: lc.accepted.Load(), Requests: lc.requests.Load()}
	}
	if s.opts.Proto == TLS {
		st.TLS = s.hs.stats()
	}
	return st
}

// Total sums the request counts over every class.
func (st Stats) Total() Counts {
	var t Counts
	for _, c := range st.Requests {
		t.OK += c.OK
		t.Error += c.Error
		t.Canceled += c.Canceled
	}
	return t
}

// Since returns the seconds of history from t on.
func (st Stats) Since(t int64) []Second {
	for i, sec := range st.Seconds {
		if sec.T >= t {
			return st.Seconds[i:]
		}
	}
	return []Second{}
}

func (s *Server) allClasses() []*class {
	all := []*class{&s.raw}
	for i := range s.classes {
		all = append(all, &s.classes[i])
	}
	return all
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// history is a ring of per-second counters: one slot per second, reused
// len(slots) seconds later.
type history struct {
	mu    sync.Mutex // serialises slot rollover; the counters are atomic
	slots []slot
	stale slot // soaks up events older than the ring
}

type slot struct {
	sec      atomic.Int64 // second held; -1 when empty
	requests atomic.Int64
	accepted atomic.Int64
	closed   atomic.Int64
	maxConc  atomic.Int64
	lastConc atomic.Int64 // concurrency after the last event
	// peaks of requests waiting, and in service or waiting (noteQueue)
	maxQueued, maxInFlight atomic.Int64
}

func (h *history) init(n int) {
	h.slots = make([]slot, n)
	for i := range h.slots {
		h.slots[i].sec.Store(-1)
	}
}

// at returns the slot of second sec, starting it if needed with the
// concurrency level the second began with.
func (h *history) at(sec, level int64) *slot {
	sl := &h.slots[sec%int64(len(h.slots))]
	if sl.sec.Load() == sec {
		return sl
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch cur := sl.sec.Load(); {
	case cur == sec:
	case cur > sec:
		return &h.stale
	default:
		sl.requests.Store(0)
		sl.accepted.Store(0)
		sl.closed.Store(0)
		sl.maxConc.Store(level)
		sl.lastConc.Store(level)
		sl.maxQueued.Store(0)
		sl.maxInFlight.Store(0)
		sl.sec.Store(sec)
	}
	return sl
}

// snapshot lists seconds up to now, oldest first. A second without events
// carries the previous second's concurrency; open connections are counted
// back from the current number.
func (h *history) snapshot(now, open int64) []Second {
	first := max(0, now-int64(len(h.slots))+1)
	out := make([]Second, 0, now-first+1)
	var carry int64
	for t := first; t <= now; t++ {
		sl := &h.slots[t%int64(len(h.slots))]
		sec := Second{T: t, MaxConcurrency: carry}
		if sl.sec.Load() == t {
			sec.Requests = sl.requests.Load()
			sec.Accepted = sl.accepted.Load()
			sec.Closed = sl.closed.Load()
			sec.MaxConcurrency = sl.maxConc.Load()
			sec.MaxQueued = sl.maxQueued.Load()
			sec.MaxInFlight = sl.maxInFlight.Load()
			carry = sl.lastConc.Load()
		}
		out = append(out, sec)
	}
	for i := len(out) - 1; i >= 0; i-- {
		out[i].Open = open
		open += out[i].Closed - out[i].Accepted
	}
	return out
}

// countingListener counts accepted connections and their closes, for the
// origin and for its listener lc.
type countingListener struct {
	net.Listener
	s  *Server
	lc *listenerCounters
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	s := l.s
	s.accepted.Add(1)
	l.lc.accepted.Add(1)
	s.open.Add(1)
	s.hist.at(s.second(), s.conc.Load()).accepted.Add(1)
	s.notify()
	return &countedConn{Conn: c, s: s, lc: l.lc}, nil
}

type countedConn struct {
	net.Conn
	s      *Server
	lc     *listenerCounters
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		s := c.s
		s.open.Add(-1)
		s.hist.at(s.second(), s.conc.Load()).closed.Add(1)
		s.notify()
	}
	return c.Conn.Close()
}

// CloseWrite keeps net/http's graceful half-close working through the
// wrapper.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
