// Package loadgen is corput's load generator (`corput load`): open-loop
// Poisson load with the seed's workload mix (MC-WM-01), driven by the
// vegeta library over real sockets, reporting p50/p90/p99/max per class and
// overall — never an average alone (INV-LB-04).
//
// It owns the Poisson pacer (a vegeta.Pacer with seeded exponential gaps),
// the targeter that gives each request a class drawn from the mix (the
// class name is appended to the target URL's path: /light, /heavy, which is
// how corput's test origins read it), and the report.
//
// Invariants: a run whose mix has no cost skew is refused with
// ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED (seed ADV-BW-01) unless the caller
// asks for the raw test, whose report has no latencies and says it is not
// balancer evidence. The arrival schedule and the class sequence are fixed
// by the seed (two independent streams), whatever the target does.
package loadgen

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/workload"
)

// Options configure a run.
type Options struct {
	// Target is the base URL; each request goes to Target/<class>.
	Target string
	// Rate is the mean arrival rate per second (open loop, Poisson). A
	// raw run with Rate 0 is closed loop instead: Connections workers
	// send as fast as they are answered, like wrk.
	Rate     float64
	Duration time.Duration
	// Mix is the workload; the zero Mix is workload.Default(). It must
	// have cost skew unless Raw.
	Mix workload.Mix
	// Raw is the tiny-response throughput test: requests go to Target
	// itself, the mix is not used and the report has throughput only.
	Raw  bool
	Seed uint64
	// Timeout bounds one request; default 30s.
	Timeout time.Duration
	// Connections bounds connections per host in a closed-loop raw run
	// (default 64); open-loop runs never bound them, so the client adds
	// no queue of its own.
	Connections int
	// MaxConns bounds connections per host in an open-loop run; 0 leaves
	// them unbounded. With h2c a bound of 1 keeps the run on exactly one
	// connection: Go's transport otherwise dials a second one, and closes
	// it, when two requests start before the first connection is up,
	// which a server that shards by connection (corput's loops) sees.
	MaxConns int
	// Proto: "" (HTTP/1.1, or h2 by ALPN for https), "h1", "h2" (https
	// only) or "h2c" (prior-knowledge HTTP/2 over cleartext).
	Proto string
	// TLS configures https targets (CA, server name); nil uses the
	// system roots.
	TLS *tls.Config
	// Progress, when set, is called about once a second during the run.
	Progress func(Progress)
}

// Progress is a running tally.
type Progress struct {
	Elapsed, Duration time.Duration
	Answered, Failed  int64
}

// Run sends the load and reports. It returns early, with the partial
// report and ctx's error, when ctx ends.
func Run(ctx context.Context, o Options) (Report, error) {
	if err := o.check(); err != nil {
		return Report{}, err
	}
	tr, err := o.transport()
	if err != nil {
		return Report{}, err
	}
	defer tr.CloseIdleConnections()

	targets, err := o.targets()
	if err != nil {
		return Report{}, err
	}
	classes := rng.New(rng.Mix64(o.Seed)) // independent of the arrival stream
	targeter := func(t *vegeta.Target) error {
		t.Method = "GET"
		t.URL = targets[pick(targets, o.Mix, classes.Float64())].url
		return nil
	}
	var pacer vegeta.Pacer = NewPoisson(o.Rate, rng.New(o.Seed))
	workers := uint64(vegeta.DefaultWorkers)
	maxWorkers := uint64(vegeta.DefaultMaxWorkers)
	if o.Raw && o.Rate == 0 {
		pacer = vegeta.ConstantPacer{} // as fast as the workers go
		workers, maxWorkers = uint64(o.Connections), uint64(o.Connections)
	}
	atk := vegeta.NewAttacker(
		vegeta.Client(&http.Client{Transport: tr, Timeout: o.Timeout}),
		vegeta.MaxBody(0), // read and discard bodies; keep no copy
		vegeta.Workers(workers), vegeta.MaxWorkers(maxWorkers),
	)

	col := newCollector(o, targets)
	var tick func(time.Duration)
	if o.Progress != nil {
		tick = func(elapsed time.Duration) {
			o.Progress(Progress{Elapsed: elapsed, Duration: o.Duration, Answered: col.answered, Failed: col.failed})
		}
	}
	Collect(ctx, atk, atk.Attack(targeter, pacer, o.Duration, ""), col.add, tick)
	return col.report(), ctx.Err()
}

// Collect drains an attack's results into add until the attack ends. When
// ctx ends it stops the attacker; requests in flight still finish and are
// passed to add. A non-nil tick is called every second with the time since
// Collect began, on the same goroutine as add.
func Collect(ctx context.Context, atk *vegeta.Attacker, results <-chan *vegeta.Result, add func(*vegeta.Result), tick func(elapsed time.Duration)) {
	var ticks <-chan time.Time
	if tick != nil {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		ticks = t.C
	}
	began := time.Now()
	done := ctx.Done()
	for results != nil {
		select {
		case r, ok := <-results:
			if !ok {
				results = nil
				break
			}
			add(r)
		case <-ticks:
			tick(time.Since(began))
		case <-done:
			atk.Stop()
			done = nil
		}
	}
}

// check fills defaults and refuses what cannot run.
func (o *Options) check() error {
	u, err := url.Parse(o.Target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("loadgen: target %q: want an http:// or https:// URL, e.g. http://127.0.0.1:8080", o.Target)
	}
	if o.Duration <= 0 {
		return fmt.Errorf("loadgen: duration %v: want a positive duration, e.g. 10s", o.Duration)
	}
	if o.Rate < 0 || (o.Rate == 0 && !o.Raw) {
		return fmt.Errorf("loadgen: rate %v: want a positive number of requests per second (0 is closed loop, raw test only)", o.Rate)
	}
	if o.Timeout <= 0 {
		o.Timeout = vegeta.DefaultTimeout
	}
	if o.Connections <= 0 {
		o.Connections = 64
	}
	if o.Raw {
		return nil
	}
	if len(o.Mix.Classes) == 0 {
		o.Mix = workload.Default()
	}
	if err := o.Mix.Validate(); err != nil {
		return fmt.Errorf("loadgen: %w (for a tiny-response throughput test that is not balancer evidence, ask for the raw test: Options.Raw, corput load --raw)", err)
	}
	return nil
}

// transport is the client side: its own connections, closed after the run.
func (o *Options) transport() (*http.Transport, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     o.TLS,
		ForceAttemptHTTP2:   true,
	}
	if o.Raw && o.Rate == 0 {
		tr.MaxConnsPerHost = o.Connections
	} else if o.MaxConns > 0 {
		tr.MaxConnsPerHost = o.MaxConns
	}
	p := new(http.Protocols)
	switch o.Proto {
	case "":
		p = nil
	case "h1":
		p.SetHTTP1(true)
	case "h2":
		p.SetHTTP2(true)
	case "h2c":
		p.SetUnencryptedHTTP2(true)
	default:
		return nil, fmt.Errorf("loadgen: proto %q: want h1, h2 (https) or h2c, or leave it empty", o.Proto)
	}
	tr.Protocols = p
	return tr, nil
}

// target is one class's URL.
type target struct {
	name    string
	percent float64
	url     string
}

// targets lists one URL per class (one, Target itself, for a raw run).
func (o *Options) targets() ([]target, error) {
	if o.Raw {
		return []target{{name: origin.RawClass, percent: 100, url: o.Target}}, nil
	}
	base, err := url.Parse(o.Target)
	if err != nil {
		return nil, err
	}
	ts := make([]target, len(o.Mix.Classes))
	for i, c := range o.Mix.Classes {
		ts[i] = target{name: c.Name, percent: c.Percent, url: base.JoinPath(c.Name).String()}
	}
	return ts, nil
}

// pick is the index of the target of the class a uniform draw u selects.
func pick(targets []target, mix workload.Mix, u float64) int {
	if len(targets) == 1 {
		return 0
	}
	name := mix.Pick(u).Name
	for i := range targets {
		if targets[i].name == name {
			return i
		}
	}
	return 0
}

// collector tallies results as they arrive.
type collector struct {
	o                Options
	targets          []target
	classes          []classTally
	answered, failed int64
	errors, origins  map[string]int64
	first, last      time.Time
}

type classTally struct {
	requests, ok int64
	codes        map[string]int64
	lat          []time.Duration
}

// maxErrorKinds bounds the distinct error messages kept.
const maxErrorKinds = 16

func newCollector(o Options, targets []target) *collector {
	c := &collector{o: o, targets: targets, classes: make([]classTally, len(targets)), errors: map[string]int64{}, origins: map[string]int64{}}
	for i := range c.classes {
		c.classes[i].codes = map[string]int64{}
	}
	return c
}

func (c *collector) add(r *vegeta.Result) {
	i := 0
	for j := range c.targets {
		if c.targets[j].url == r.URL {
			i = j
			break
		}
	}
	t := &c.classes[i]
	t.requests++
	t.codes[strconv.Itoa(int(r.Code))]++
	if c.first.IsZero() || r.Timestamp.Before(c.first) {
		c.first = r.Timestamp
	}
	if end := r.End(); end.After(c.last) {
		c.last = end
	}
	if r.Error == "" {
		t.ok++
	} else {
		c.failed++
	}
	if r.Code == 0 {
		msg := errorKind(r.Error)
		if _, seen := c.errors[msg]; !seen && len(c.errors) >= maxErrorKinds {
			msg = "other"
		}
		c.errors[msg]++
		return
	}
	c.answered++
	if !c.o.Raw { // a raw report has no latencies
		t.lat = append(t.lat, r.Latency)
	}
	if id := r.Headers.Get(origin.IDHeader); id != "" {
		c.origins[id]++
	}
}

// errorKind drops the method and URL net/http puts before a transport
// error, so one failure is one kind whatever the class.
func errorKind(msg string) string {
	if _, rest, ok := strings.Cut(msg, "\": "); ok && strings.HasPrefix(msg, "Get \"") {
		return rest
	}
	return msg
}

func (c *collector) report() Report {
	r := Report{
		Target: c.o.Target, Raw: c.o.Raw, Seed: c.o.Seed, Rate: c.o.Rate,
		DurationS: c.o.Duration.Seconds(), Answered: c.answered,
		StatusCodes: map[string]int64{}, Errors: c.errors, Origins: c.origins,
	}
	if elapsed := c.last.Sub(c.first); elapsed > 0 {
		r.ElapsedS = elapsed.Seconds()
		r.Throughput = float64(c.answered) / r.ElapsedS
	}
	var ok int64
	var all []time.Duration
	for i, t := range c.classes {
		r.Requests += t.requests
		ok += t.ok
		for code, n := range t.codes {
			r.StatusCodes[code] += n
		}
		if c.o.Raw {
			continue
		}
		all = append(all, t.lat...)
		r.Classes = append(r.Classes, ClassReport{
			Name: c.targets[i].name, Percent: c.targets[i].percent, Requests: t.requests,
			SuccessRatio: ratio(t.ok, t.requests), StatusCodes: t.codes, Latency: latencyOf(t.lat),
		})
	}
	r.SuccessRatio = ratio(ok, r.Requests)
	if c.o.Raw {
		r.Note = RawNote
	} else {
		overall := latencyOf(all)
		r.Overall = &overall
	}
	return r
}
