package live

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/corput/corput/internal/loadgen"
)

// The reload experiment (ScenarioReload) puts a configuration reload and a
// restart of the same gateway side by side under the same steady load.
//
// One gateway (step 4's upstream side: K loops, h2c, Ringsteady subsets of
// S, prewarm 1; fleet size 1) serves a listening socket the lab opened and
// handed over (socket activation), under the live load (Options.Rate, one
// h2c stream per loop). The load's timeline, with W = Reloads × ReloadEvery:
//
//	[0, 2s)            warm-up
//	[2s, 2s+W)         steady baseline: nothing happens
//	[2s+W, 2s+2W)      the reload window: Reloads SIGHUPs, ReloadEvery apart
//	                   (half an interval from its edges), each after the
//	                   config file was rewritten (renamed over) with a real
//	                   change, in turn: a route added, pool.max_connections
//	                   lowered or raised (64 ↔ 32), fleet.size moved
//	                   (1 ↔ 2); each is waited for in
//	                   corput_config_reloads_total
//	2s gap
//	[R, R+RestartWindow)  the restart: a new `corput serve` on the same
//	                   config and the same socket; once it is ready, the
//	                   old one gets SIGTERM and drains
//
// Every second both sides are counted as in the steps: connections the
// origins accepted (ground truth) and corput_upstream_connections_created_total
// summed over the gateway processes (a process that has exited keeps its
// last count). A reload must create no more connections than the baseline
// window of the same length; the restart re-creates every pool the old
// process held.

// Reload experiment defaults.
const (
	DefaultReloads       = 10
	DefaultReloadEvery   = 1500 * time.Millisecond
	DefaultRestartWindow = 6 * time.Second
)

const (
	// reloadWarmup is the load before the baseline window.
	reloadWarmup = 2 * time.Second
	// reloadGap separates the reload window from the restart, wider than
	// the clients' tally lag (clientLag), so that no restart failure is
	// counted in the reload window.
	reloadGap = 2 * time.Second
	// applyTimeout bounds the wait for one reload to show in
	// corput_config_reloads_total.
	applyTimeout = 5 * time.Second
	// clientLag is how late the clients' running tally can be: loadgen
	// reports it about once a second.
	clientLag = 1.0
	// capHigh and capLow are the pool.max_connections the reloads
	// alternate between; neither is near what a pool holds at this load
	// (one h2 connection), so neither may open or close a connection.
	capHigh, capLow = 64, 32
)

// Window names, in ReloadResult.Windows' order.
const (
	WindowBaseline = "steady baseline"
	WindowReloads  = "reloads"
	WindowRestart  = "restart"
)

// ReloadResult is the reload experiment's measurements.
type ReloadResult struct {
	Step   Step   `json:"step"`   // the gateway's upstream side
	Config string `json:"config"` // the file as first written
	// Prewarmed is what the first process opened before it was ready,
	// at the origins: its pools × prewarm.
	Prewarmed int64 `json:"prewarmed"`
	// RestartPrewarm is what the restart must open again: the pools the
	// old process held just before it (corput_subset_size summed: the
	// reloads' fleet.size changes may have changed them) × prewarm.
	RestartPrewarm int64 `json:"restart_prewarm"`
	// Gateways are the two processes' downstream addresses: the socket
	// handed over, both times.
	Gateways     []string `json:"gateways"`
	Reloads      int      `json:"reloads"` // SIGHUPs sent
	EverySeconds float64  `json:"every_s"`
	// Events are what the lab did and saw, in order: reload (a SIGHUP,
	// with the change), applied / rejected / not applied, restart (the
	// new process started), ready, sigterm (to the old one), exited.
	Events []Event `json:"events"`
	// Samples are taken every whole second of the load; the last one
	// after the load, with the clients' exact totals.
	Samples []ReloadSample `json:"samples"`
	Windows []Window       `json:"windows"`
	// ReloadsOK and ReloadsRejected are the reloaded process's
	// corput_config_reloads_total{result="ok"} and {result="rejected"}
	// before it was stopped.
	ReloadsOK       float64 `json:"reloads_ok"`
	ReloadsRejected float64 `json:"reloads_rejected"`
	// Running is what the reloaded process's GET /admin/config said after
	// the last reload; FileHash is the hash of the file as last written,
	// in the same form ("sha256:…" of its bytes).
	Running  RunningConfig `json:"running"`
	FileHash string        `json:"file_hash"`
	Load     Load          `json:"load"`
	// LeftOpen is what the origins still had open after both processes
	// stopped; anything but 0 is a leak.
	LeftOpen int64 `json:"left_open_after_stop"`
}

// RunningConfig is the part of GET /admin/config the experiment reads.
type RunningConfig struct {
	Hash   string `json:"hash"`
	Config struct {
		Routes []struct {
			PathPrefix string `json:"path_prefix"`
		} `json:"routes"`
		Origins []struct {
			Pool struct {
				MaxConnections int `json:"max_connections"`
			} `json:"pool"`
		} `json:"origins"`
		Fleet struct {
			Size int `json:"size"`
		} `json:"fleet"`
	} `json:"config"`
}

// Event is one thing the lab did or saw, at T seconds since the load
// started.
type Event struct {
	T      float64 `json:"t_s"`
	Kind   string  `json:"kind"`
	Detail string  `json:"detail,omitempty"`
}

// ReloadSample is a Sample with the reloads and the clients' running
// tally (about a second late; exact in the last sample).
type ReloadSample struct {
	Sample
	ReloadsOK float64 `json:"reloads_ok"`
	// Answered are requests with an HTTP answer; Failed are those with
	// no answer or one that is not 2xx/3xx (loadgen's count).
	Answered int64 `json:"answered"`
	Failed   int64 `json:"failed"`
}

// Window is one span of the timeline and what happened in it. Created
// counts and peaks are between the samples at its edges; requests between
// the clients' tallies at its start and one clientLag after its end (so a
// failure is never missed, and may be counted up to a second early or
// late).
type Window struct {
	Name           string  `json:"name"`
	From           float64 `json:"from_s"`
	To             float64 `json:"to_s"`
	OriginCreated  int64   `json:"origin_created"`
	MetricsCreated float64 `json:"metrics_created"`
	OriginPeak     float64 `json:"origin_created_per_s_max"`
	MetricsPeak    float64 `json:"metrics_created_per_s_max"`
	Answered       int64   `json:"answered"`
	Failed         int64   `json:"failed"`
}

// reloadStep is the reloaded gateway's upstream side: step 4's.
func (o Options) reloadStep() Step {
	for _, st := range o.steps() {
		if st.ID == StepSubset {
			st.ID = "reload"
			st.Title = fmt.Sprintf("%d reloads vs a restart of one gateway (%d loops, %s, Ringsteady %d of %d, prewarm %d)",
				o.Reloads, st.Loops, st.Protocol, st.SubsetSize, o.Endpoints, st.Prewarm)
			return st
		}
	}
	panic("live: no subsetting step")
}

// reloadSpans are the windows' edges, in seconds since the load started,
// and the load's duration.
func (o Options) reloadSpans() (baseline, reloads, restart [2]float64, load time.Duration) {
	w := (time.Duration(o.Reloads) * o.ReloadEvery).Seconds()
	b := reloadWarmup.Seconds()
	baseline = [2]float64{b, b + w}
	reloads = [2]float64{b + w, b + 2*w}
	r := reloads[1] + reloadGap.Seconds()
	restart = [2]float64{r, r + o.RestartWindow.Seconds()}
	return baseline, reloads, restart, time.Duration(restart[1] * float64(time.Second))
}

// reloadFile is what the reloaded gateway's file varies: its extra routes,
// the origin's pool.max_connections and fleet.size.
type reloadFile struct {
	routes    []string
	maxConns  int
	fleetSize int
}

// firstReloadFile is the file the gateway starts on.
func firstReloadFile() reloadFile { return reloadFile{maxConns: capHigh, fleetSize: 1} }

// next is the file reload i (from 1) writes, and its change, in turn: a
// route added, pool.max_connections moved (64 ↔ 32), fleet.size moved
// (1 ↔ 2: twice the frontends for the same subsets, which one gateway's
// loops already cover, so the resize moves no subset).
func (f reloadFile) next(i int) (reloadFile, string) {
	switch i % 3 {
	case 1:
		r := fmt.Sprintf("/reload-%d/", i)
		f.routes = append(slices.Clip(f.routes), r)
		return f, "route " + r + " added"
	case 2:
		was := f.maxConns
		f.maxConns = map[bool]int{true: capHigh, false: capLow}[was == capLow]
		return f, fmt.Sprintf("pool.max_connections %d → %d", was, f.maxConns)
	}
	was := f.fleetSize
	f.fleetSize = 3 - was
	return f, fmt.Sprintf("fleet.size %d → %d", was, f.fleetSize)
}

// config is the file's text for step st's gateway (instance 0).
func (f reloadFile) config(st Step, title string, endpoints []string) []byte {
	return st.config(title, 0, f.fleetSize, endpoints, f.routes, f.maxConns)
}

// fleetView is the gateway processes the sampler reads. A process being
// stopped may stop answering: it then counts with its last reading, and
// once it has exited with no connection open.
type fleetView struct {
	mu  sync.Mutex
	gws []*tracked
}

type tracked struct {
	p              *part
	stopping, gone bool
	last           gatewayCount
}

func (fv *fleetView) add(p *part) *tracked {
	fv.mu.Lock()
	defer fv.mu.Unlock()
	t := &tracked{p: p, last: gatewayCount{Closed: map[string]float64{}}}
	fv.gws = append(fv.gws, t)
	return t
}

func (fv *fleetView) stopping(t *tracked) {
	fv.mu.Lock()
	t.stopping = true
	fv.mu.Unlock()
}

func (fv *fleetView) exited(t *tracked) {
	fv.mu.Lock()
	t.gone = true
	t.last.Open = 0
	fv.mu.Unlock()
}

// read scrapes every process and sums their counts.
func (fv *fleetView) read(ctx context.Context, sc *scraper) (gatewayCount, error) {
	fv.mu.Lock()
	gws := append([]*tracked(nil), fv.gws...)
	fv.mu.Unlock()
	sum := gatewayCount{Closed: map[string]float64{}}
	for _, t := range gws {
		fv.mu.Lock()
		gone := t.gone
		fv.mu.Unlock()
		var c gatewayCount
		err := errors.New("exited")
		if !gone {
			c, err = sc.gateway(ctx, t.p.admin)
		}
		fv.mu.Lock()
		if err == nil && !t.gone {
			t.last = c
		} else if !t.stopping {
			fv.mu.Unlock()
			return sum, fmt.Errorf("%s: %w", t.p.name, err)
		}
		c = t.last
		fv.mu.Unlock()
		sum = sum.plus(c)
	}
	return sum, nil
}

// clients is the load's running tally, per stream.
type clients struct {
	mu               sync.Mutex
	answered, failed []int64
}

func newClients(streams int) *clients {
	return &clients{answered: make([]int64, streams), failed: make([]int64, streams)}
}

func (c *clients) progress(i int, p loadgen.Progress) {
	c.mu.Lock()
	c.answered[i], c.failed[i] = p.Answered, p.Failed
	c.mu.Unlock()
}

func (c *clients) sum() (answered, failed int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.answered {
		answered, failed = answered+c.answered[i], failed+c.failed[i]
	}
	return answered, failed
}

// reload runs the reload experiment (see the comment at the top).
func (r *run) reload(ctx context.Context, work string) (ReloadResult, error) {
	o := r.o
	st := o.reloadStep()
	res := ReloadResult{Step: st, Reloads: o.Reloads, EverySeconds: o.ReloadEvery.Seconds()}
	baseSpan, reloadSpan, restartSpan, duration := o.reloadSpans()
	res.Windows = []Window{
		{Name: WindowBaseline, From: baseSpan[0], To: baseSpan[1]},
		{Name: WindowReloads, From: reloadSpan[0], To: reloadSpan[1]},
		{Name: WindowRestart, From: restartSpan[0], To: restartSpan[1]},
	}
	base, err := r.settle(ctx)
	if err != nil {
		return res, fmt.Errorf("before the reload experiment: %w", err)
	}

	// The socket both processes serve, one after the other.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	defer ln.Close()
	sock, err := ln.(*net.TCPListener).File()
	if err != nil {
		return res, err
	}
	defer sock.Close()
	addr := ln.Addr().String()

	path := filepath.Join(work, "reload-gw.yaml")
	file := firstReloadFile()
	write := func() ([]byte, error) {
		text := file.config(st, "the reload experiment: "+st.Title, r.res.Origins)
		sum := sha256.Sum256(text)
		res.FileHash = "sha256:" + hex.EncodeToString(sum[:])
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, text, 0o644); err != nil {
			return nil, err
		}
		return text, os.Rename(tmp, path) // a reload never reads half a file
	}
	text, err := write()
	if err != nil {
		return res, fmt.Errorf("reload config: %w", err)
	}
	res.Config = string(text)

	fv := &fleetView{}
	var started []*part
	defer func() { // whatever is left, on failure
		for i := len(started) - 1; i >= 0; i-- {
			started[i].stop()
		}
	}()
	launch := func(name string) (*part, error) {
		g, err := r.launch.gatewayOn(ctx, name, path, sock)
		if err != nil {
			return nil, err
		}
		started = append(started, g)
		res.Gateways = append(res.Gateways, g.addr)
		if g.addr != addr {
			return g, fmt.Errorf("%s serves %s, not the socket handed over (%s)", g.name, g.addr, addr)
		}
		return g, r.waitReady(ctx, []*part{g})
	}
	old, err := launch("reload-gw-a")
	if err != nil {
		return res, err
	}
	oldT := fv.add(old)

	cl := newClients(st.Loops)
	start := time.Now()
	since := func() float64 { return time.Since(start).Seconds() }
	var evMu sync.Mutex
	event := func(kind, detail string) {
		evMu.Lock()
		res.Events = append(res.Events, Event{T: since(), Kind: kind, Detail: detail})
		evMu.Unlock()
	}
	sample := func() error {
		g, err := fv.read(ctx, r.sc)
		if err != nil {
			return err
		}
		oc, err := r.sc.origins(ctx, r.origins)
		if err != nil {
			return err
		}
		a, f := cl.sum()
		res.Samples = append(res.Samples, ReloadSample{
			Sample: Sample{T: since(), OriginOpen: oc.Open, OriginAccepted: oc.Accepted - base.Accepted,
				MetricsOpen: g.Open, MetricsCreated: g.Created},
			ReloadsOK: g.ReloadsOK, Answered: a, Failed: f,
		})
		return nil
	}
	if err := sample(); err != nil {
		return res, err
	}
	res.Prewarmed = res.Samples[0].OriginAccepted

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	loadDone := make(chan error, 1)
	target := &part{name: "the handed-over socket", addr: addr}
	go func() {
		var err error
		res.Load, err = drive(lctx, []*part{target}, st.Loops, o.Rate, duration, o.Seed^0x5e1_0ad, cl.progress)
		loadDone <- err
	}()

	// The timeline: reloads, then the restart.
	ctlDone := make(chan error, 1)
	var next *part
	go func() {
		ctlDone <- func() error {
			wait := func(at float64) error {
				t := time.NewTimer(time.Until(start.Add(time.Duration(at * float64(time.Second)))))
				defer t.Stop()
				select {
				case <-t.C:
					return nil
				case <-lctx.Done():
					return context.Cause(lctx)
				}
			}
			every := o.ReloadEvery.Seconds()
			for i := 1; i <= o.Reloads; i++ {
				if err := wait(reloadSpan[0] + (float64(i)-0.5)*every); err != nil {
					return err
				}
				var change string
				file, change = file.next(i)
				if _, err := write(); err != nil {
					return fmt.Errorf("reload %d: %w", i, err)
				}
				before, err := r.sc.gateway(lctx, old.admin)
				if err != nil {
					return fmt.Errorf("reload %d: %w", i, err)
				}
				event("reload", change)
				if err := old.reload(); err != nil {
					// In process, a refused reload's error; it is also
					// counted in the metric awaited below.
					event("reload error", err.Error())
				}
				r.awaitReload(lctx, old, i, before, event)
			}
			// Half a second into its window, away from a sample.
			if err := wait(restartSpan[0] + 0.5); err != nil {
				return err
			}
			c, err := r.sc.gateway(lctx, old.admin)
			if err != nil {
				return fmt.Errorf("before the restart: %w", err)
			}
			res.RestartPrewarm = int64(c.Pools) * int64(st.Prewarm)
			event("restart", "a new corput serve on the same config and socket")
			g, err := launch("reload-gw-b")
			if err != nil {
				return fmt.Errorf("restart: %w", err)
			}
			next = g
			fv.add(g)
			event("ready", g.name+" answers /readyz")
			// The old process's last word on its reloads, then stop it.
			if c, err := r.sc.gateway(lctx, old.admin); err == nil {
				res.ReloadsOK, res.ReloadsRejected = c.ReloadsOK, c.ReloadsRejected
			}
			if err := r.sc.get(lctx, "http://"+old.admin+"/admin/config", func(body io.Reader) error {
				return json.NewDecoder(body).Decode(&res.Running)
			}); err != nil {
				return fmt.Errorf("%s: %w", old.name, err)
			}
			fv.stopping(oldT)
			event("sigterm", old.name)
			err = old.stop()
			fv.exited(oldT)
			event("exited", old.name)
			return err
		}()
	}()

	// Samples fall on whole seconds of the load (see step).
	tick := time.NewTimer(time.Second)
	defer tick.Stop()
	var loadErr, ctlErr error
	for loading, controlling := true, true; loading || controlling; {
		select {
		case loadErr = <-loadDone:
			loading = false
		case ctlErr = <-ctlDone:
			controlling = false
			if ctlErr != nil {
				cancel()
			}
		case <-tick.C:
			if !loading {
				continue // the load is over: the final sample comes below
			}
			r.bar.Add(1)
			if err := sample(); err != nil {
				cancel()
				<-loadDone
				if controlling {
					<-ctlDone
				}
				return res, err
			}
			elapsed := time.Since(start)
			tick.Reset(elapsed.Truncate(time.Second) + time.Second - elapsed)
		}
	}
	if ctlErr != nil {
		return res, ctlErr
	}
	if loadErr != nil {
		return res, fmt.Errorf("load: %w", loadErr)
	}
	if err := sample(); err != nil {
		return res, err
	}
	last := &res.Samples[len(res.Samples)-1]
	last.Answered, last.Failed = res.Load.Answered, res.Load.Requests-res.Load.ok()
	res.measure()

	started = started[:0] // stopped here, not by the deferred clean-up
	if err := next.stop(); err != nil {
		return res, err
	}
	after, err := r.settle(ctx)
	res.LeftOpen = after.Open
	return res, err
}

// awaitReload waits until the gateway's corput_config_reloads_total has
// counted reload i past its reading before, ok or rejected, for at most
// applyTimeout, and records which.
func (r *run) awaitReload(ctx context.Context, g *part, i int, before gatewayCount, event func(kind, detail string)) {
	deadline := time.Now().Add(applyTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c, err := r.sc.gateway(ctx, g.admin)
		if err == nil && c.ReloadsOK+c.ReloadsRejected > before.ReloadsOK+before.ReloadsRejected {
			kind := "applied"
			if c.ReloadsOK == before.ReloadsOK {
				kind = "rejected"
			}
			event(kind, fmt.Sprintf("corput_config_reloads_total: ok %.0f, rejected %.0f", c.ReloadsOK, c.ReloadsRejected))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	event("not applied", fmt.Sprintf("reload %d not in corput_config_reloads_total within %v", i, applyTimeout))
}

// measure fills every window from the samples.
func (res *ReloadResult) measure() {
	for i := range res.Windows {
		res.Windows[i] = measureWindow(res.Samples, res.Windows[i])
	}
}

// measureWindow counts what happened in w (see Window).
func measureWindow(samples []ReloadSample, w Window) Window {
	w.OriginCreated, w.MetricsCreated, w.OriginPeak, w.MetricsPeak, w.Answered, w.Failed = 0, 0, 0, 0, 0, 0
	if len(samples) == 0 {
		return w
	}
	// at is the first sample at or after t (a sample is never early, but
	// its clock is read after the scrape: allow a little), else the last.
	at := func(t float64) int {
		for i, s := range samples {
			if s.T >= t-0.05 {
				return i
			}
		}
		return len(samples) - 1
	}
	a, b := at(w.From), at(w.To)
	w.OriginCreated = samples[b].OriginAccepted - samples[a].OriginAccepted
	w.MetricsCreated = samples[b].MetricsCreated - samples[a].MetricsCreated
	for i := a + 1; i <= b; i++ {
		if samples[i].T-samples[i-1].T >= minPeakInterval {
			ro, rm := rates(samples[i-1].Sample, samples[i].Sample)
			w.OriginPeak, w.MetricsPeak = max(w.OriginPeak, ro), max(w.MetricsPeak, rm)
		}
	}
	c := at(w.To + clientLag)
	w.Answered = samples[c].Answered - samples[a].Answered
	w.Failed = samples[c].Failed - samples[a].Failed
	return w
}

// window returns the window called name.
func (res *ReloadResult) window(name string) Window {
	for _, w := range res.Windows {
		if w.Name == name {
			return w
		}
	}
	return Window{Name: name}
}

// checks are the experiment's must-show inequalities on its own figures.
func (res *ReloadResult) checks() []Check {
	b, rl, rs := res.window(WindowBaseline), res.window(WindowReloads), res.window(WindowRestart)
	span := rl.To - rl.From
	run := res.Running.Config
	pool := 0
	if len(run.Origins) > 0 {
		pool = run.Origins[0].Pool.MaxConnections
	}
	matches := res.Running.Hash != "" && res.Running.Hash == res.FileHash
	return []Check{
		{
			Name: "reload: connections created in the reload window ≤ the steady baseline's (same length)",
			Pass: rl.OriginCreated <= b.OriginCreated && rl.MetricsCreated <= b.MetricsCreated,
			Detail: fmt.Sprintf("origins %d vs %d, /metrics %.0f vs %.0f over %.1f s each (the restart: %d / %.0f in %.1f s)",
				rl.OriginCreated, b.OriginCreated, rl.MetricsCreated, b.MetricsCreated, span,
				rs.OriginCreated, rs.MetricsCreated, rs.To-rs.From),
		},
		{
			Name: fmt.Sprintf(`reload: reloads applied (corput_config_reloads_total{result="ok"}) = %d`, res.Reloads),
			Pass: res.ReloadsOK == float64(res.Reloads) && res.ReloadsRejected == 0 && matches,
			Detail: fmt.Sprintf("%d SIGHUPs: %.0f ok, %.0f rejected; GET /admin/config after the last: the file as last written %v (%d routes, max_connections %d, fleet.size %d)",
				res.Reloads, res.ReloadsOK, res.ReloadsRejected, map[bool]string{true: "yes", false: "NO"}[matches], len(run.Routes), pool, run.Fleet.Size),
		},
		{
			Name:   "reload: 0 failed requests in the reload window",
			Pass:   rl.Failed == 0 && rl.Answered > 0,
			Detail: fmt.Sprintf("%d failed of %d answered (the restart window: %d of %d)", rl.Failed, rl.Answered, rs.Failed, rs.Answered),
		},
		{
			Name: "reload: the restart opens its pools again (created in the restart window ≥ the pools held before it × prewarm)",
			Pass: res.RestartPrewarm > 0 && rs.OriginCreated >= res.RestartPrewarm && rs.MetricsCreated >= float64(res.RestartPrewarm),
			Detail: fmt.Sprintf("origins %d, /metrics %.0f; the pools before it × prewarm: %d (the first process pre-warmed %d)",
				rs.OriginCreated, rs.MetricsCreated, res.RestartPrewarm, res.Prewarmed),
		},
	}
}
