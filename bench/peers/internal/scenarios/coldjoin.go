package scenarios

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/corput/corput/bench/peers/internal/origins"
	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/origin"
)

// The spans of the cold origin's figures, from its start: its first
// joinEarly (the peaks), and from joinLate to the end of the window (its
// share once slow start is over).
const (
	joinEarly = 30 * time.Second
	joinLate  = 60 * time.Second
)

// coldJoin runs the skewed load; after joinAfter a fifth, cold origin
// starts and joins, and is watched for joinWindow. It returns the
// connections the joining origin accepted.
func (b *bench) coldJoin(ctx context.Context, p proxies.Proxy, dir string) (results.Result, int64, error) {
	var res results.Result
	var accepted int64
	joinAddr, err := proc.FreePort()
	if err != nil {
		return res, 0, err
	}
	err = b.withProxy(ctx, p, dir, joinAddr, nil, func(base, _ string, _ cpuClock) error {
		type outcome struct {
			rep loadgen.Report
			err error
		}
		done := make(chan outcome, 1)
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			rep, err := b.mix(lctx, base, b.o.JoinAfter+b.o.JoinWindow)
			done <- outcome{rep, err}
		}()
		wait := func() outcome { cancel(); return <-done }
		select {
		case <-time.After(b.o.JoinAfter):
		case <-ctx.Done():
			wait()
			return ctx.Err()
		}
		o5, err := origins.Start(ctx, b.ps, b.bin, "o5", joinAddr, 5, b.o.OriginProcs, "--profile", "cold")
		if err != nil {
			wait()
			return err
		}
		born := time.Now()
		defer o5.Stop()
		tJoin, err := b.origins.Tally()
		if err != nil {
			wait()
			return err
		}
		if j, ok := p.(proxies.Joiner); ok {
			if err := j.Join(dir, append(b.origins.Endpoints(), o5.Addr)); err != nil {
				wait()
				return err
			}
		}
		// The other origins' counts at the cold one's early and late marks.
		marks := map[time.Duration]*origins.Tally{joinEarly: nil, joinLate: nil}
		var out outcome
		got := false
		for _, m := range []time.Duration{joinEarly, joinLate} {
			if m >= b.o.JoinWindow {
				continue
			}
			select {
			case <-time.After(time.Until(born.Add(m))):
				t, err := b.origins.Tally()
				if err != nil {
					wait()
					return err
				}
				marks[m] = &t
			case out = <-done:
				got = true
			case <-ctx.Done():
				wait()
				return ctx.Err()
			}
			if got {
				break
			}
		}
		if !got {
			out = <-done
		}
		if out.err != nil {
			return out.err
		}
		st, err := o5.Stats()
		if err != nil {
			return err
		}
		// The cold origin's per-second history, for a look at when its
		// peaks came (the run's figures keep only the peaks).
		if js, err := json.MarshalIndent(st, "", " "); err == nil {
			if err := os.WriteFile(filepath.Join(dir, "cold-origin.json"), js, 0o644); err != nil {
				return err
			}
		}
		tEnd, err := b.origins.Tally()
		if err != nil {
			return err
		}
		others := func(from, to *origins.Tally) int64 {
			if from == nil || to == nil {
				return 0
			}
			return to.Since(*from).ClassTotal()
		}
		res = fromReport(out.rep)
		res.Join = joinResult(st, joinSpans{
			window: int(b.o.JoinWindow / time.Second), early: int(joinEarly / time.Second), late: int(joinLate / time.Second),
			others: others(&tJoin, &tEnd), othersEarly: others(&tJoin, marks[joinEarly]), othersLate: others(marks[joinLate], &tEnd),
		})
		accepted = st.Connections.Accepted
		return nil
	})
	return res, accepted, err
}

// joinSpans are the cold origin's spans (whole seconds since it started)
// and the class requests the other origins answered over each: the whole
// window, its first early seconds, and from late on.
type joinSpans struct {
	window, early, late             int
	others, othersEarly, othersLate int64
}

// joinResult reads the joining origin's ground truth: it lives for about
// the window, so its class requests (health checks are raw requests and do
// not count) are what it got in the window; its per-second history gives
// its early and late spans.
func joinResult(st origin.Stats, sp joinSpans) *results.JoinResult {
	j := &results.JoinResult{WindowS: sp.window, EarlyS: sp.early, LateFromS: sp.late}
	j.Requests = origins.ClassRequests(st)
	var late int64
	for _, s := range st.Seconds {
		if s.T >= int64(sp.window) {
			break
		}
		if s.T < int64(sp.early) {
			j.EarlyRequests += s.Requests
			j.MaxConcurrency = max(j.MaxConcurrency, s.MaxConcurrency)
			j.MaxQueued = max(j.MaxQueued, s.MaxQueued)
			j.MaxInFlight = max(j.MaxInFlight, s.MaxInFlight)
		}
		if s.T >= int64(sp.late) {
			late += s.Requests
		}
		if j.FirstSecond == 0 {
			j.FirstSecond = s.Requests
		}
	}
	share := func(n, others int64) float64 {
		if n+others == 0 {
			return 0
		}
		return float64(n) / float64(n+others)
	}
	j.Share = share(j.Requests, sp.others)
	j.EarlyShare = share(j.EarlyRequests, sp.othersEarly)
	if sp.late < sp.window {
		j.LateShare = share(late, sp.othersLate)
		j.LateVsFair = j.LateShare * 5
	}
	return j
}
