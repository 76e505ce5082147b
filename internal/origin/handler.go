package origin

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RawClass names requests whose path names no class: a tiny immediate
// response that never waits for a worker.
const RawClass = "raw"

// class is one latency class and its request counters.
type class struct {
	name     string
	latency  time.Duration // 0 for raw
	ok       atomic.Int64
	failed   atomic.Int64 // injected 500s
	canceled atomic.Int64 // gave up waiting for a worker, or cut by Close
}

var (
	textPlain = []string{"text/plain; charset=utf-8"}
	timers    = sync.Pool{New: func() any {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return t
	}}
)

// ServeHTTP serves one request: the stats page, or a request of the class
// its path names.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == StatsPath {
		s.serveStats(w, r)
		return
	}
	countRequest(r)
	c := s.classOf(r.URL.Path)
	queued := c.latency > 0 && s.sem != nil
	if queued && !s.acquire(r.Context()) {
		c.canceled.Add(1)
		panic(http.ErrAbortHandler) // no answer: the client left or the origin is closing
	}
	s.enter()
	fail := s.fails()
	done := c.latency == 0 || s.work(c.latency)
	// Account before answering, so a client that has its answer sees
	// counters that include it.
	s.leave()
	if queued {
		<-s.sem
	}
	if !done {
		c.canceled.Add(1)
		panic(http.ErrAbortHandler) // closing: cut the response, as a dying origin would
	}
	s.respond(w, c, fail)
}

// classOf maps a path to its class by the last segment: /light, /api/heavy.
func (s *Server) classOf(path string) *class {
	seg := path[strings.LastIndexByte(path, '/')+1:]
	for i := range s.classes {
		if s.classes[i].name == seg {
			return &s.classes[i]
		}
	}
	return &s.raw
}

// acquire takes a worker, waiting in line if all are busy. It reports false
// if the client gave up or the origin is closing first.
func (s *Server) acquire(ctx context.Context) bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	n := s.queued.Add(1)
	atomicMax(&s.maxQueued, n)
	s.noteQueue(s.hist.at(s.second(), s.conc.Load()))
	defer s.queued.Add(-1)
	select {
	case s.sem <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}

// fails draws whether this request gets an injected 500.
func (s *Server) fails() bool {
	p := s.opts.ErrorRate
	return p >= 1 || (p > 0 && s.rng.Float64() < p)
}

// ServiceTime is how long a request of the given base latency takes if it
// starts now: latency × Slowdown × the warm-up factor.
func (s *Server) ServiceTime(latency time.Duration) time.Duration {
	return time.Duration(float64(latency) * s.opts.Slowdown * s.WarmupFactor())
}

// WarmupFactor is the cold-start slowdown now (1 once warm).
func (s *Server) WarmupFactor() float64 {
	return s.opts.Warmup.At(s.clock.Now().Sub(s.start))
}

// work holds the worker for the request's service time on the wall clock.
// A client that goes away does not stop the work (a backend finishes what it
// started); only Close does. It reports false when cut short.
func (s *Server) work(latency time.Duration) bool {
	t := timers.Get().(*time.Timer)
	t.Reset(s.ServiceTime(latency))
	defer timers.Put(t)
	select {
	case <-t.C:
		return true
	case <-s.closing:
		t.Stop()
		return false
	}
}

func (s *Server) respond(w http.ResponseWriter, c *class, fail bool) {
	h := w.Header()
	h["Content-Type"] = textPlain
	h["Content-Length"] = s.contentLength
	if s.idHdr != nil {
		h[IDHeader] = s.idHdr
	}
	if fail {
		c.failed.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	} else {
		c.ok.Add(1)
	}
	w.Write(s.body)
}

// enter and leave bracket a request in service.
func (s *Server) enter() {
	n := s.conc.Add(1)
	atomicMax(&s.maxConc, n)
	sl := s.hist.at(s.second(), n-1)
	atomicMax(&sl.maxConc, n)
	sl.lastConc.Store(n)
	s.noteQueue(sl)
}

// noteQueue raises the second's peaks of requests waiting, and of
// requests in service or waiting, to what they are now.
func (s *Server) noteQueue(sl *slot) {
	q := s.queued.Load()
	atomicMax(&sl.maxQueued, q)
	atomicMax(&sl.maxInFlight, q+s.conc.Load())
}

func (s *Server) leave() {
	n := s.conc.Add(-1)
	sl := s.hist.at(s.second(), n+1)
	sl.requests.Add(1)
	sl.lastConc.Store(n)
	s.noteQueue(sl)
}

// second is the current second since Start on the origin's clock.
func (s *Server) second() int64 { return int64(s.clock.Now().Sub(s.start) / time.Second) }

// atomicMax raises m to at least v.
func atomicMax(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	since := int64(0)
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "origin: since="+v+": want whole seconds since start, e.g. since=120", http.StatusBadRequest)
			return
		}
		since = n
	}
	st := s.Stats()
	st.Seconds = st.Since(since)
	writeJSON(w, st)
}
