package load

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/rng"
)

// openLoopConns is how many keep-alive connections the open-loop
// generator spreads its requests over (wrk -c64 in the raw scenario).
const openLoopConns = 64

// OpenLoop sends GET target (an http:// URL) with Poisson arrivals at
// rate for d over openLoopConns keep-alive connections, and measures each
// request from its scheduled arrival to the end of its response: a request
// that waits for a free connection counts its wait (open loop, no
// coordinated omission). The generator writes heads and parses responses on
// raw bytes (internal/h1) and allocates nothing per request, so it leaves
// the cores to the proxies: with vegeta's HTTP client the run of
// 2026-11-30 measured a p99 of 184 ms going straight to the origin at half
// of corput's raw rate, the generator's own queueing.
//
// The pacer sleeps on a thread of its own (lockPacer) and writes each
// request itself on a free connection, so a request leaves at its time
// without waiting for a goroutine to be scheduled; each connection's
// reader times the response and, when requests are waiting for a free
// connection, sends the oldest.
func OpenLoop(ctx context.Context, target string, rate float64, d time.Duration, seed uint64) (results.Result, error) {
	u, err := url.Parse(target)
	if err != nil {
		return results.Result{}, err
	}
	g := &generator{
		req:  []byte("GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: corput-bench\r\n\r\n"),
		done: make(chan struct{}),
	}
	conns := make([]*genConn, 0, openLoopConns)
	closeAll := func() {
		for _, gc := range conns {
			gc.c.Close()
		}
	}
	for range openLoopConns {
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			closeAll()
			return results.Result{}, fmt.Errorf("open-loop generator: %w", err)
		}
		conns = append(conns, &genConn{c: c})
	}
	g.start = time.Now()
	g.live = len(conns)
	for _, gc := range conns {
		g.idle = append(g.idle, gc)
		g.wg.Add(1)
		go g.read(gc)
	}
	late := make([]time.Duration, 0, int(rate*d.Seconds())+16)
	paced := make(chan int64)
	go func() {
		defer lockPacer()()
		pacer := loadgen.NewPoisson(rate, rng.New(seed))
		var sent int64
		for ctx.Err() == nil {
			at, _ := pacer.Pace(0, uint64(sent)) // arrival number sent, from start
			if at >= d {
				break
			}
			sleepUntil(g.start, at)
			sent++
			if gc := g.acquire(at); gc != nil {
				g.send(gc, at)
			}
			late = append(late, time.Since(g.start)-at)
		}
		paced <- sent
	}()
	sent := <-paced
	g.finish(sent)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second): // what is still out has failed
	case <-ctx.Done():
	}
	elapsed := time.Since(g.start).Seconds()
	closeAll()
	g.wg.Wait()
	if err := ctx.Err(); err != nil {
		return results.Result{}, err
	}
	var lat []time.Duration
	for _, gc := range conns {
		lat = append(lat, gc.lat...)
	}
	slices.Sort(lat)
	failed := sent - int64(len(lat))
	res := results.Result{RateRPS: rate, Requests: sent, Errors: failed}
	if len(lat) > 0 {
		res.P50MS, res.P90MS, res.P99MS = percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99)
		res.MaxMS = msOf(lat[len(lat)-1])
		res.RPS = float64(len(lat)) / elapsed
	}
	if len(late) > 0 {
		slices.Sort(late)
		res.PacerLateP99MS = percentile(late, 0.99)
	}
	if sent > 0 {
		res.SuccessRatio = float64(sent-failed) / float64(sent)
	}
	return res, nil
}

// generator hands requests to free connections: the pacer takes an idle
// one or, with none idle, leaves the request in the backlog, which the
// next connection to finish a response sends.
type generator struct {
	req   []byte
	start time.Time
	wg    sync.WaitGroup

	mu        sync.Mutex
	idle      []*genConn
	live      int             // connections not broken
	backlog   []time.Duration // scheduled times (since start), oldest first
	completed int64           // requests answered or failed
	total     int64           // requests sent, once the pacer is done; 0 before
	done      chan struct{}   // closed when completed reaches total
}

// genConn is one keep-alive connection and what it measured.
type genConn struct {
	c    net.Conn
	at   atomic.Int64 // scheduled time (since start) of the request in flight
	busy bool         // a request is in flight (guarded by generator.mu)
	lat  []time.Duration
}

// acquire returns an idle connection for the request scheduled at, or
// queues the request and returns nil (with no connection left, the
// request fails at once).
func (g *generator) acquire(at time.Duration) *genConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.idle); n > 0 {
		gc := g.idle[n-1]
		g.idle = g.idle[:n-1]
		gc.busy = true
		return gc
	}
	if g.live == 0 {
		g.completeLocked(1)
		return nil
	}
	g.backlog = append(g.backlog, at)
	return nil
}

// release counts gc's request answered and returns gc to the idle set,
// or hands it the oldest waiting request (ok).
func (g *generator) release(gc *genConn) (at time.Duration, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.completeLocked(1)
	if len(g.backlog) > 0 {
		at = g.backlog[0]
		g.backlog = g.backlog[1:]
		return at, true
	}
	gc.busy = false
	g.idle = append(g.idle, gc)
	return 0, false
}

// broken takes gc out of the rotation and fails its request in flight;
// with no connection left, the backlog fails too.
func (g *generator) broken(gc *genConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live--
	if gc.busy {
		g.completeLocked(1)
	} else if i := slices.Index(g.idle, gc); i >= 0 {
		g.idle = slices.Delete(g.idle, i, i+1)
	}
	if g.live == 0 {
		g.completeLocked(int64(len(g.backlog)))
		g.backlog = nil
	}
}

// send writes the request scheduled at on gc; a connection that will not
// take it is closed, which fails the request in its reader.
func (g *generator) send(gc *genConn, at time.Duration) {
	gc.at.Store(int64(at))
	if _, err := gc.c.Write(g.req); err != nil {
		gc.c.Close()
	}
}

// completeLocked counts n requests answered or failed.
func (g *generator) completeLocked(n int64) {
	if n == 0 {
		return
	}
	g.completed += n
	if g.total > 0 && g.completed == g.total {
		close(g.done)
	}
}

// finish records how many requests the pacer sent.
func (g *generator) finish(sent int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total = sent
	if sent == 0 || g.completed == sent {
		close(g.done)
	}
}

// read times each response on gc until the connection breaks or closes;
// a broken connection fails its request in flight (if any) and leaves the
// rotation.
func (g *generator) read(gc *genConn) {
	defer g.wg.Done()
	br := bufio.NewReaderSize(gc.c, 16<<10)
	var head h1.Head
	for readOK(br, &head) {
		gc.lat = append(gc.lat, time.Since(g.start)-time.Duration(gc.at.Load()))
		if at, ok := g.release(gc); ok {
			g.send(gc, at)
		}
	}
	gc.c.Close()
	g.broken(gc)
}

// readOK reads one response and reports whether it was a whole 200.
func readOK(br *bufio.Reader, head *h1.Head) bool {
	for {
		b, _ := br.Peek(br.Buffered())
		n, res := h1.ParseResponse(b, head)
		switch res {
		case h1.NotSimple:
			return false
		case h1.Complete:
			if head.Status != 200 || head.ContentLength < 0 {
				return false
			}
			if _, err := br.Discard(n); err != nil {
				return false
			}
			_, err := io.CopyN(io.Discard, br, head.ContentLength)
			return err == nil
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return false
		}
	}
}
