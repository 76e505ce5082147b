package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/rng"
)

// rawConns is how many keep-alive connections the open-loop generator
// spreads its requests over (wrk -c64 in the raw scenario).
const rawConns = 64

// openLoopRaw sends GET target (an http:// URL) with Poisson arrivals at
// rate for d over rawConns keep-alive connections, and measures each
// request from its scheduled arrival to the end of its response: a request
// that waits for a free connection counts its wait (open loop, no
// coordinated omission). The generator writes heads and parses responses on
// raw bytes (internal/h1) and allocates nothing per request, so it leaves
// the cores to the proxies: with vegeta's HTTP client the run of
// 2026-11-30 measured a p99 of 184 ms going straight to the origin at half
// of corput's raw rate, the generator's own queueing.
func openLoopRaw(ctx context.Context, target string, rate float64, d time.Duration, seed uint64) (Result, error) {
	u, err := url.Parse(target)
	if err != nil {
		return Result{}, err
	}
	path := u.RequestURI()
	req := []byte("GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: corput-bench\r\n\r\n")
	tickets := make(chan time.Time, int(rate*d.Seconds())+16)
	type workerOut struct {
		lat    []time.Duration
		failed int64
	}
	outs := make([]workerOut, rawConns)
	var wg sync.WaitGroup
	for i := range rawConns {
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			close(tickets)
			wg.Wait()
			return Result{}, fmt.Errorf("open-loop generator: %w", err)
		}
		wg.Add(1)
		go func(c net.Conn, out *workerOut) {
			defer wg.Done()
			defer c.Close()
			br := bufio.NewReaderSize(c, 16<<10)
			var head h1.Head
			for at := range tickets {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write(req); err != nil || !readOK(br, &head) {
					out.failed++
					// a broken connection fails the rest of its share
					for range tickets {
						out.failed++
					}
					return
				}
				out.lat = append(out.lat, time.Since(at))
			}
		}(c, &outs[i])
	}
	// The schedule runs on a goroutine of its own, on a thread it keeps
	// (lockPacer), and each ticket carries its scheduled time; late is how
	// far behind it each one went out.
	var (
		sent  int64
		late  = make([]time.Duration, 0, cap(tickets))
		start = time.Now()
		paced = make(chan struct{})
	)
	go func() {
		defer close(paced)
		defer lockPacer()()
		pacer := loadgen.NewPoisson(rate, rng.New(seed))
		for ctx.Err() == nil {
			at, _ := pacer.Pace(0, uint64(sent)) // arrival number sent, from start
			if at >= d {
				break
			}
			sleepUntil(start, at)
			tickets <- start.Add(at) // its scheduled time, however late the sleep ends
			late = append(late, time.Since(start)-at)
			sent++
		}
	}()
	<-paced
	close(tickets)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var lat []time.Duration
	var failed int64
	for _, o := range outs {
		lat = append(lat, o.lat...)
		failed += o.failed
	}
	slices.Sort(lat)
	res := Result{RateRPS: rate, Requests: sent, Errors: failed}
	if len(lat) > 0 {
		res.P50MS, res.P90MS, res.P99MS = pct(lat, 0.50), pct(lat, 0.90), pct(lat, 0.99)
		res.MaxMS = msOf(lat[len(lat)-1])
		res.RPS = float64(len(lat)) / elapsed
	}
	if len(late) > 0 {
		slices.Sort(late)
		res.PacerLateP99MS = pct(late, 0.99)
	}
	if sent > 0 {
		res.SuccessRatio = float64(sent-failed) / float64(sent)
	}
	return res, nil
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
