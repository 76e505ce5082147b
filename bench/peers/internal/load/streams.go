package load

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

// Streams is the h2_streams scenario's client: N GETs of Path on Addr,
// started evenly over Ramp, PerConn on each of its h2c (prior knowledge)
// connections, every one held open until its answer ends.
type Streams struct {
	Addr, Path string
	N, PerConn int
	Ramp       time.Duration
}

// StreamsResult is what a Streams run saw.
type StreamsResult struct {
	Conns  int   // the h2c connections it opened
	Errors int64 // requests that failed or were not answered 200
	// Peak is the most requests awaiting an answer at once.
	Peak int64
	// P50MS, P99MS and MaxMS are over the requests answered 200; 0 when
	// none was.
	P50MS, P99MS, MaxMS float64
	// Samples are the first few errors' texts.
	Samples []string
}

// maxErrSamples bounds the error texts kept.
const maxErrSamples = 5

// streamRun is one Run's state.
type streamRun struct {
	Streams
	errors atomic.Int64
	active atomic.Int64
	peak   atomic.Int64

	mu      sync.Mutex // guards following
	lat     []time.Duration
	samples []string
}

// Run opens the connections, sends the requests on schedule and waits for
// every answer to end (or ctx to end).
func (s Streams) Run(ctx context.Context) (StreamsResult, error) {
	raiseFDLimit()
	l := &streamRun{Streams: s, lat: make([]time.Duration, 0, s.N)}
	res := StreamsResult{Conns: (s.N + s.PerConn - 1) / s.PerConn}
	t := &http2.Transport{AllowHTTP: true}
	ccs := make([]*http2.ClientConn, 0, res.Conns)
	defer func() {
		for _, cc := range ccs {
			cc.Close()
		}
	}()
	var d net.Dialer
	for range res.Conns {
		nc, err := d.DialContext(ctx, "tcp", s.Addr)
		if err != nil {
			return res, fmt.Errorf("dial %s: %w", s.Addr, err)
		}
		cc, err := t.NewClientConn(nc)
		if err != nil {
			nc.Close()
			return res, fmt.Errorf("h2c to %s: %w", s.Addr, err)
		}
		ccs = append(ccs, cc)
	}
	if err := l.send(ctx, ccs); err != nil {
		return res, err
	}
	res.Errors, res.Peak, res.Samples = l.errors.Load(), l.peak.Load(), l.samples
	if len(l.lat) > 0 {
		slices.Sort(l.lat)
		res.P50MS, res.P99MS, res.MaxMS = percentile(l.lat, 0.50), percentile(l.lat, 0.99), msOf(l.lat[len(l.lat)-1])
	}
	return res, nil
}

// send starts the requests evenly over the ramp, round robin over ccs,
// and waits for them all.
func (l *streamRun) send(ctx context.Context, ccs []*http2.ClientConn) error {
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < l.N; {
		due := l.N
		if l.Ramp > 0 {
			due = min(l.N, int(int64(l.N)*int64(time.Since(start))/int64(l.Ramp))+1)
		}
		for ; i < due; i++ {
			wg.Add(1)
			go func(cc *http2.ClientConn) {
				defer wg.Done()
				l.one(ctx, cc)
			}(ccs[i%len(ccs)])
		}
		if i < l.N {
			select {
			case <-ctx.Done():
				wg.Wait()
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
	wg.Wait()
	return ctx.Err()
}

// one sends one request on cc and reads its answer to the end.
func (l *streamRun) one(ctx context.Context, cc *http2.ClientConn) {
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.Addr+l.Path, nil)
	if err != nil {
		l.fail(err.Error())
		return
	}
	storeMax(&l.peak, l.active.Add(1))
	resp, err := cc.RoundTrip(req)
	l.active.Add(-1)
	if err != nil {
		l.fail(err.Error())
		return
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		l.fail("body: " + err.Error())
	case resp.StatusCode != http.StatusOK:
		l.fail(fmt.Sprintf("%s %s", resp.Status, resp.Header.Get("X-Corput-Error")))
	default:
		d := time.Since(t0)
		l.mu.Lock()
		l.lat = append(l.lat, d)
		l.mu.Unlock()
	}
}

func (l *streamRun) fail(msg string) {
	l.errors.Add(1)
	l.mu.Lock()
	if len(l.samples) < maxErrSamples {
		l.samples = append(l.samples, msg)
	}
	l.mu.Unlock()
}

// raiseFDLimit lifts this process's soft RLIMIT_NOFILE to its hard limit
// (the client's connections and the sockets net/http keeps).
func raiseFDLimit() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur < r.Max {
		r.Cur = r.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

// storeMax raises v to n if n is higher.
func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}
