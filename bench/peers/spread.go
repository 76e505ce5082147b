package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The spread scenario asks how evenly each proxy spreads requests over
// many identical, healthy endpoints: 800 by default, --spread-origins
// `corput origin` processes × --spread-listeners listeners each (origin
// --listeners), unlimited workers (nothing queues: the 15 ms is the work),
// and three loads through each proxy. The figures come from the origins'
// own per-listener request counts, and for corput from the requests it
// placed on each loop (/admin/origins). It is heavy (800 listening
// sockets, thousands of upstream connections) and not in the default
// --scenarios.
const scSpread = "spread"

// spreadPath is the 15 ms path: the origins' light class (the path's last
// segment picks the class, docs/origin-and-load.md).
const spreadPath = "/light"

// spreadLoad is one of the spread scenario's loads.
type spreadLoad struct {
	name string
	desc string
	h2c  bool // the client speaks h2c by prior knowledge
	run  func(ctx context.Context, url string) (Result, error)
}

// Spread load names, as in peers.json's load field.
const (
	loadManyConns = "h1_many_conns"
	loadH2        = "h2_one_conn"
	loadFewConns  = "h1_few_conns"
)

// spreadLoads are the loads in the order they run.
func (b *bench) spreadLoads() []spreadLoad {
	o := b.o
	wrk := func(conns int) func(context.Context, string) (Result, error) {
		return func(ctx context.Context, url string) (Result, error) {
			w, _, err := runWrk(ctx, url, conns, o.spreadDuration)
			return Result{RPS: w.RPS, P50MS: w.P50MS, P99MS: w.P99MS, Errors: w.Errors}, err
		}
	}
	return []spreadLoad{
		{name: loadManyConns, desc: fmt.Sprintf("wrk -t2 -c%d -d%v", o.spreadConns, o.spreadDuration), run: wrk(o.spreadConns)},
		{name: loadH2, h2c: true, desc: fmt.Sprintf("h2load -c1 -m%d -n%d, h2c by prior knowledge", o.spreadStreams, o.spreadH2Requests),
			run: func(ctx context.Context, url string) (Result, error) {
				h, _, err := runH2load(ctx, url, o.spreadStreams, o.spreadH2Requests)
				return Result{RPS: h.RPS, MeanMS: h.MeanMS, Errors: h.Errors, Requests: h.Requests}, err
			}},
		{name: loadFewConns, desc: fmt.Sprintf("wrk -t2 -c%d -d%v, keep-alive HTTP/1.1", o.spreadFewConns, o.spreadDuration), run: wrk(o.spreadFewConns)},
	}
}

// spreadRuns is how many proxy runs the scenario makes.
func (b *bench) spreadRuns() int { return 3 * len(b.proxies) * b.o.rounds }

// spreadOrigins starts the scenario's origins: --spread-origins processes
// with --spread-listeners listeners each on consecutive free ports, the
// default profile's classes with unlimited workers. It returns the
// processes and every listener's address, in order.
func (b *bench) startSpreadOrigins(ctx context.Context) ([]*originProc, []string, error) {
	var os []*originProc
	var members []string
	for i := 1; i <= b.o.spreadOrigins; i++ {
		id := fmt.Sprintf("s%d", i)
		o, err := startOrigin(ctx, b.ps, b.bin, id, "127.0.0.1:0", uint64(100+i), b.o.originProcs,
			"--listeners", strconv.Itoa(b.o.spreadListeners), "--workers", "0", "--profile", "default")
		if err != nil {
			return os, nil, err
		}
		os = append(os, o)
		st, err := o.stats()
		if err != nil {
			return os, nil, err
		}
		if len(st.Listeners) != b.o.spreadListeners {
			return os, nil, fmt.Errorf("origin %s: %d listeners, want %d", id, len(st.Listeners), b.o.spreadListeners)
		}
		for _, l := range st.Listeners {
			members = append(members, l.Address)
		}
	}
	return os, members, nil
}

// spreadTally is every listener's request count now, by address.
func spreadTally(os []*originProc) (map[string]int64, int64, error) {
	reqs := map[string]int64{}
	var accepted int64
	for _, o := range os {
		st, err := o.stats()
		if err != nil {
			return nil, 0, err
		}
		for _, l := range st.Listeners {
			reqs[l.Address] = l.Requests
			accepted += l.Accepted
		}
	}
	return reqs, accepted, nil
}

// runSpread runs every load through every proxy, round by round, the
// proxies' order rotating each round, and folds the results.
func (b *bench) runSpread(ctx context.Context) error {
	origins, members, err := b.startSpreadOrigins(ctx)
	defer func() {
		for _, o := range origins {
			o.c.stop(5 * time.Second)
		}
	}()
	if err != nil {
		return err
	}
	loads := b.spreadLoads()
	rounds := map[string][]Result{} // by load/proxy
	for r := 0; r < b.o.rounds; r++ {
		for _, l := range loads {
			for _, p := range b.order(r) {
				dir := filepath.Join(b.dir, fmt.Sprintf("%s-r%d-%s-%s", scSpread, r+1, l.name, p.name()))
				res, err := b.spreadOne(ctx, p, l, dir, origins, members)
				if err != nil {
					return fmt.Errorf("%s %s via %s: %w", scSpread, l.name, p.name(), err)
				}
				k := l.name + "/" + p.name()
				rounds[k] = append(rounds[k], res)
				fmt.Fprintf(b.log, "peers: %s %s round %d %-8s rps %.0f reached %d/%d max/mean %.2f min/mean %.2f%s\n", scSpread, l.name, r+1, p.name(),
					res.RPS, res.EndpointsReached, res.Endpoints, res.PerEndpointMaxOverMean, res.PerEndpointMinOverMean, loopLog(res.Spread))
				b.bar.Add(1)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(pause):
				}
			}
		}
	}
	s := b.res.scenario(scSpread, b.spreadDescription(loads))
	s.Note = spreadNote
	for _, l := range loads {
		for _, p := range b.proxies {
			if rs := rounds[l.name+"/"+p.name()]; len(rs) > 0 {
				s.Results = append(s.Results, median(rs, func(r Result) float64 { return r.PerEndpointMaxOverMean }))
			}
		}
	}
	return nil
}

func loopLog(s *Spread) string {
	if s == nil || s.PerLoopMaxOverMean == nil {
		return ""
	}
	return fmt.Sprintf(" loops max/mean %.2f min/mean %.2f", *s.PerLoopMaxOverMean, *s.PerLoopMinOverMean)
}

func (b *bench) spreadDescription(loads []spreadLoad) string {
	var ls []string
	for _, l := range loads {
		ls = append(ls, l.name+": "+l.desc)
	}
	return fmt.Sprintf("%d identical endpoints (%d origin processes × %d listeners, unlimited workers), GET %s (15 ms of work); "+
		"corput with loops: %d and subset: automatic; loads %s; counted by the origins per listener",
		b.o.spreadOrigins*b.o.spreadListeners, b.o.spreadOrigins, b.o.spreadListeners, spreadPath, b.o.spreadLoops, strings.Join(ls, "; "))
}

// spreadNote says what the spread figures are.
const spreadNote = "per endpoint: the requests each endpoint (origin listener) received during the load, from the origins' own counters; " +
	"max/mean and min/mean over all endpoints (1.00 and 1.00 is a perfect spread; min/mean 0 means some endpoint got nothing), cv = standard deviation / mean. " +
	"per loop (corput): the requests corput placed on each loop (/admin/origins loops[].requests), max/mean and min/mean over its loops. " +
	"corput's balancer is the one in the balancer field (--corput-balancer); nginx least_conn (per worker: no shared zone), HAProxy leastconn, Caddy least_conn. " +
	"h2load reports no percentiles: its rows have the mean request time. For the h2 load nginx and HAProxy listen h2c by prior knowledge only (listen … http2; bind … proto h2), " +
	"Caddy HTTP/1.1 and h2c (protocols h1 h2c); corput's cleartext listener always speaks both. " +
	"upstream connections: those the endpoints accepted during the load (corput's prewarmed ones, one per endpoint and loop, are opened before it)."

// spreadOne starts p fresh in front of members, runs load l and reads
// the spread.
func (b *bench) spreadOne(ctx context.Context, p proxy, l spreadLoad, dir string, origins []*originProc, members []string) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	p = spreadVariant(p, b.o.spreadLoops, l.h2c)
	c, addr, err := startProxy(ctx, b.ps, p, dir, members, "", nil)
	if err != nil {
		return Result{}, err
	}
	defer c.stop(10 * time.Second)
	var admin string
	var loops0 []uint64
	if p.name() == nameCorput {
		if admin, err = corputAdmin(dir); err != nil {
			return Result{}, err
		}
		if loops0, err = corputLoopRequests(admin); err != nil {
			return Result{}, err
		}
	}
	t0, a0, err := spreadTally(origins)
	if err != nil {
		return Result{}, err
	}
	res, err := l.run(ctx, "http://"+addr+spreadPath)
	if err != nil {
		return Result{}, err
	}
	t1, a1, err := spreadTally(origins)
	if err != nil {
		return Result{}, err
	}
	res.Proxy = p.name()
	sp := spreadOf(members, t0, t1)
	sp.Load = l.name
	sp.OriginConnections = a1 - a0
	if admin != "" {
		loops1, err := corputLoopRequests(admin)
		if err != nil {
			return Result{}, err
		}
		sp.Balancer = b.o.balancer
		sp.setLoops(loops0, loops1)
	}
	res.Spread = &sp
	return res, nil
}

// spreadVariant is p as the spread scenario runs it: corput with its
// loops, and for an h2c load every proxy's listener set up for h2c.
func spreadVariant(p proxy, loops int, h2c bool) proxy {
	switch v := p.(type) {
	case corputProxy:
		v.loops, v.prior = loops, h2c
		return v
	case nginxProxy:
		v.prior = h2c
		return v
	case haproxyProxy:
		v.prior = h2c
		return v
	case caddyProxy:
		v.prior = h2c
		return v
	}
	return p
}

// spreadOf is the spread of the requests between two tallies over
// members.
func spreadOf(members []string, before, after map[string]int64) Spread {
	s := Spread{Endpoints: len(members)}
	if len(members) == 0 {
		return s
	}
	counts := make([]float64, len(members))
	s.PerEndpointMin = math.MaxInt64
	for i, m := range members {
		n := after[m] - before[m]
		counts[i] = float64(n)
		s.OriginRequests += n
		s.PerEndpointMax = max(s.PerEndpointMax, n)
		s.PerEndpointMin = min(s.PerEndpointMin, n)
		if n > 0 {
			s.EndpointsReached++
		}
	}
	s.PerEndpointMean = float64(s.OriginRequests) / float64(len(members))
	if s.PerEndpointMean > 0 {
		s.PerEndpointMaxOverMean = round3(float64(s.PerEndpointMax) / s.PerEndpointMean)
		s.PerEndpointMinOverMean = round3(float64(s.PerEndpointMin) / s.PerEndpointMean)
		s.PerEndpointCV = round3(stddev(counts, s.PerEndpointMean) / s.PerEndpointMean)
	}
	s.PerEndpointMean = round3(s.PerEndpointMean)
	return s
}

func stddev(xs []float64, mean float64) float64 {
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss / float64(len(xs)))
}

// setLoops records the requests placed on each loop between two readings
// and their max/mean and min/mean.
func (s *Spread) setLoops(before, after []uint64) {
	if len(after) == 0 {
		return
	}
	s.LoopRequests = make([]uint64, len(after))
	var total, hi uint64
	lo := uint64(math.MaxUint64)
	for i, n := range after {
		if i < len(before) {
			n -= before[i]
		}
		s.LoopRequests[i] = n
		total += n
		hi, lo = max(hi, n), min(lo, n)
	}
	if total == 0 {
		return
	}
	mean := float64(total) / float64(len(after))
	mx, mn := round3(float64(hi)/mean), round3(float64(lo)/mean)
	s.PerLoopMaxOverMean, s.PerLoopMinOverMean = &mx, &mn
}

// corputAdmin reads the admin address from the corput.yaml that
// corputProxy.files wrote in dir.
func corputAdmin(dir string) (string, error) {
	path := filepath.Join(dir, "corput.yaml")
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "admin: "); ok {
			return strings.TrimSpace(a), nil
		}
	}
	return "", fmt.Errorf("%s: no admin line", path)
}

// corputLoopRequests reads the requests corput placed on each loop of the
// bench origin, by loop index, from /admin/origins.
func corputLoopRequests(admin string) ([]uint64, error) {
	resp, err := statsClient.Get("http://" + admin + "/admin/origins")
	if err != nil {
		return nil, fmt.Errorf("corput /admin/origins: %w", err)
	}
	defer resp.Body.Close()
	var origins []struct {
		Name  string `json:"name"`
		Loops []struct {
			Loop     int    `json:"loop"`
			Requests uint64 `json:"requests"`
		} `json:"loops"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&origins); err != nil {
		return nil, fmt.Errorf("corput /admin/origins: %w", err)
	}
	for _, o := range origins {
		if o.Name != corputOrigin {
			continue
		}
		out := make([]uint64, len(o.Loops))
		for _, l := range o.Loops {
			if l.Loop < 0 || l.Loop >= len(out) {
				return nil, fmt.Errorf("corput /admin/origins: loop %d of %d", l.Loop, len(out))
			}
			out[l.Loop] = l.Requests
		}
		return out, nil
	}
	return nil, fmt.Errorf("corput /admin/origins: no origin %q", corputOrigin)
}

// h2loadResult is what the spread scenario reads from h2load's output.
type h2loadResult struct {
	RPS      float64
	MeanMS   float64 // mean time for request
	Requests int64   // total
	Errors   int64   // requests that did not succeed (h2load's failed include non-2xx answers)
	Protocol string  // the application protocol it spoke
}

// runH2load runs h2load -c1 -mM -nN against url (h2c by prior knowledge
// for an http:// URL) and checks it spoke h2c.
func runH2load(ctx context.Context, url string, streams, n int) (h2loadResult, string, error) {
	args := []string{"-c1", "-m" + strconv.Itoa(streams), "-n" + strconv.Itoa(n), url}
	out, err := exec.CommandContext(ctx, "h2load", args...).CombinedOutput()
	if err != nil {
		return h2loadResult{}, string(out), fmt.Errorf("h2load %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	r, err := parseH2load(string(out))
	if err == nil && r.Protocol != "h2c" {
		err = fmt.Errorf("h2load spoke %q, not h2c: %s", r.Protocol, lastLines(string(out), 5))
	}
	return r, string(out), err
}

// parseH2load reads h2load's summary:
//
//	Application protocol: h2c
//	finished in 7.05s, 5673.21 req/s, 1.23MB/s
//	requests: 40000 total, 40000 started, 40000 done, 39990 succeeded, 10 failed, 0 errored, 0 timeout
//	status codes: 39990 2xx, 0 3xx, 0 4xx, 0 5xx
//	time for request:    15.33ms     16.67ms     15.67ms       169us    70.00%
func parseH2load(out string) (h2loadResult, error) {
	var r h2loadResult
	var haveRPS, haveReqs bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(strings.NewReplacer(",", " ").Replace(line))
		switch {
		case strings.HasPrefix(line, "Application protocol:"):
			r.Protocol = strings.TrimSpace(strings.TrimPrefix(line, "Application protocol:"))
		case strings.HasPrefix(line, "finished in") && len(f) >= 5 && f[4] == "req/s":
			v, err := strconv.ParseFloat(f[3], 64)
			if err != nil {
				return r, fmt.Errorf("h2load: req/s %q: %w", f[3], err)
			}
			r.RPS, haveRPS = v, true
		case strings.HasPrefix(line, "requests:"):
			var succeeded int64
			for i := 1; i+1 < len(f); i += 2 {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				switch f[i+1] {
				case "total":
					r.Requests = v
				case "succeeded":
					succeeded = v
				}
			}
			r.Errors += r.Requests - succeeded
			haveReqs = true
		case strings.HasPrefix(line, "time for request:") && len(f) >= 6:
			v, err := parseWrkDuration(f[5])
			if err != nil {
				return r, fmt.Errorf("h2load: mean %q: %w", f[5], err)
			}
			r.MeanMS = v
		}
	}
	if !haveRPS || !haveReqs {
		return r, fmt.Errorf("h2load: no req/s or requests line in its output: %s", lastLines(out, 5))
	}
	return r, nil
}

// spreadNeeds is the executables the spread scenario runs besides the
// proxies.
var spreadNeeds = []string{"wrk", "h2load"}

// usesStandardOrigins reports whether any scenario that shares the four
// standard origins runs (ownsOrigins: the others start their own).
func usesStandardOrigins(scenarios []string) bool {
	return slices.ContainsFunc(scenarios, func(s string) bool { return !ownsOrigins(s) })
}
