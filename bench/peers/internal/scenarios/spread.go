package scenarios

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/corput/corput/bench/peers/internal/load"
	"github.com/corput/corput/bench/peers/internal/origins"
	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
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

// spreadPath is the 15 ms path: the origins' light class (the path's last
// segment picks the class, docs/origin-and-load.md).
const spreadPath = "/light"

// spreadNeeds is the executables the spread scenario runs besides the
// proxies.
var spreadNeeds = []string{"wrk", "h2load"}

// spreadLoad is one of the spread scenario's loads.
type spreadLoad struct {
	name string
	desc string
	h2c  bool // the client speaks h2c by prior knowledge
	run  func(ctx context.Context, url string) (results.Result, error)
}

// Spread load names, as in peers.json's load field.
const (
	loadManyConns = "h1_many_conns"
	loadH2        = "h2_one_conn"
	loadFewConns  = "h1_few_conns"
)

// spreadLoads are the loads in the order they run.
func (b *bench) spreadLoads() []spreadLoad {
	o := b.o.Spread
	wrk := func(conns int) func(context.Context, string) (results.Result, error) {
		return func(ctx context.Context, url string) (results.Result, error) {
			w, err := load.Wrk(ctx, url, conns, o.Duration)
			return w.Result(), err
		}
	}
	return []spreadLoad{
		{name: loadManyConns, desc: fmt.Sprintf("wrk -t2 -c%d -d%v", o.Conns, o.Duration), run: wrk(o.Conns)},
		{name: loadH2, h2c: true, desc: fmt.Sprintf("h2load -c1 -m%d -n%d, h2c by prior knowledge", o.Streams, o.H2Requests),
			run: func(ctx context.Context, url string) (results.Result, error) {
				h, err := load.H2load(ctx, url, o.Streams, o.H2Requests)
				return h.Result(), err
			}},
		{name: loadFewConns, desc: fmt.Sprintf("wrk -t2 -c%d -d%v, keep-alive HTTP/1.1", o.FewConns, o.Duration), run: wrk(o.FewConns)},
	}
}

// runSpread starts the scenario's origins (the default profile's classes,
// unlimited workers), runs every load through every proxy, round by
// round, the proxies' order rotating each round, and folds the results.
func (b *bench) runSpread(ctx context.Context) error {
	group, err := origins.StartGroup(ctx, b.ps, origins.Spec{Bin: b.bin, Prefix: "s", Procs: b.o.Spread.Origins, Seed: 100,
		GOMAXPROCS: b.o.OriginProcs, Listeners: b.o.Spread.Listeners, Args: []string{"--workers", "0", "--profile", "default"}})
	if err != nil {
		return err
	}
	defer group.Stop()
	loads := b.spreadLoads()
	rounds := map[string][]results.Result{} // by load/proxy
	for r := 0; r < b.o.Rounds; r++ {
		for _, l := range loads {
			for _, p := range rotate(b.proxies, r) {
				dir := filepath.Join(b.dir, fmt.Sprintf("%s-r%d-%s-%s", results.ScSpread, r+1, l.name, p.Name()))
				res, err := b.spreadOne(ctx, p, l, dir, group)
				if err != nil {
					return fmt.Errorf("%s %s via %s: %w", results.ScSpread, l.name, p.Name(), err)
				}
				k := l.name + "/" + p.Name()
				rounds[k] = append(rounds[k], res)
				fmt.Fprintf(b.log, "peers: %s %s round %d %-8s rps %.0f reached %d/%d max/mean %.2f min/mean %.2f%s\n", results.ScSpread, l.name, r+1, p.Name(),
					res.RPS, res.EndpointsReached, res.Endpoints, res.PerEndpointMaxOverMean, res.PerEndpointMinOverMean, loopLog(res.Spread))
				if err := b.settle(ctx); err != nil {
					return err
				}
			}
		}
	}
	s := b.res.Scenario(results.ScSpread, b.spreadDescription(loads))
	s.Note = spreadNote
	var keys []string
	for _, l := range loads {
		for _, p := range b.proxies {
			keys = append(keys, l.name+"/"+p.Name())
		}
	}
	s.AddMedians(keys, rounds, func(r results.Result) float64 { return r.PerEndpointMaxOverMean })
	return nil
}

func loopLog(s *results.Spread) string {
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
	o := b.o.Spread
	return fmt.Sprintf("%d identical endpoints (%d origin processes × %d listeners, unlimited workers), GET %s (15 ms of work); "+
		"corput with loops: %d and subset: automatic; loads %s; counted by the origins per listener",
		o.Origins*o.Listeners, o.Origins, o.Listeners, spreadPath, o.Loops, strings.Join(ls, "; "))
}

// spreadNote says what the spread figures are.
const spreadNote = "per endpoint: the requests each endpoint (origin listener) received during the load, from the origins' own counters; " +
	"max/mean and min/mean over all endpoints (1.00 and 1.00 is a perfect spread; min/mean 0 means some endpoint got nothing), cv = standard deviation / mean. " +
	"per loop (corput): the requests corput placed on each loop (/admin/origins loops[].requests), max/mean and min/mean over its loops. " +
	"corput's balancer is the one in the balancer field (--corput-balancer); nginx least_conn (per worker: no shared zone), HAProxy leastconn, Caddy least_conn. " +
	"h2load reports no percentiles: its rows have the mean request time. For the h2 load nginx and HAProxy listen h2c by prior knowledge only (listen … http2; bind … proto h2), " +
	"Caddy HTTP/1.1 and h2c (protocols h1 h2c); corput's cleartext listener always speaks both. " +
	"upstream connections: those the endpoints accepted during the load (corput's prewarmed ones, one per endpoint and loop, are opened before it)."

// spreadOne starts p fresh in front of group's endpoints, runs load l and
// reads the spread.
func (b *bench) spreadOne(ctx context.Context, p proxies.Proxy, l spreadLoad, dir string, group origins.Group) (results.Result, error) {
	if err := ctx.Err(); err != nil {
		return results.Result{}, err
	}
	members := group.Endpoints()
	p = proxies.Spread(p, b.o.Spread.Loops, l.h2c)
	c, addr, err := proxies.Start(ctx, b.ps, p, dir, members, "", nil)
	if err != nil {
		return results.Result{}, err
	}
	defer c.Stop(10 * time.Second)
	var admin string
	var loops0 []uint64
	if p.Name() == results.Corput {
		if admin, err = proxies.CorputAdmin(dir); err != nil {
			return results.Result{}, err
		}
		if loops0, err = proxies.CorputLoopRequests(admin); err != nil {
			return results.Result{}, err
		}
	}
	var res results.Result
	d, err := group.During(func() (err error) {
		res, err = l.run(ctx, "http://"+addr+spreadPath)
		return err
	})
	if err != nil {
		return results.Result{}, err
	}
	res.Proxy = p.Name()
	sp := spreadOf(members, d.Endpoint)
	sp.Load = l.name
	sp.OriginConnections = d.Accepted
	if admin != "" {
		loops1, err := proxies.CorputLoopRequests(admin)
		if err != nil {
			return results.Result{}, err
		}
		sp.Balancer = b.o.Balancer
		setLoops(&sp, loops0, loops1)
	}
	res.Spread = &sp
	return res, nil
}

// spreadOf is the spread over members of the requests each received
// (counts, by address; a member missing from counts received none).
func spreadOf(members []string, counts map[string]int64) results.Spread {
	s := results.Spread{Endpoints: len(members)}
	if len(members) == 0 {
		return s
	}
	xs := make([]float64, len(members))
	s.PerEndpointMin = math.MaxInt64
	for i, m := range members {
		n := counts[m]
		xs[i] = float64(n)
		s.OriginRequests += n
		s.PerEndpointMax = max(s.PerEndpointMax, n)
		s.PerEndpointMin = min(s.PerEndpointMin, n)
		if n > 0 {
			s.EndpointsReached++
		}
	}
	s.PerEndpointMean = float64(s.OriginRequests) / float64(len(members))
	if s.PerEndpointMean > 0 {
		s.PerEndpointMaxOverMean = results.Round3(float64(s.PerEndpointMax) / s.PerEndpointMean)
		s.PerEndpointMinOverMean = results.Round3(float64(s.PerEndpointMin) / s.PerEndpointMean)
		s.PerEndpointCV = results.Round3(stddev(xs, s.PerEndpointMean) / s.PerEndpointMean)
	}
	s.PerEndpointMean = results.Round3(s.PerEndpointMean)
	return s
}

func stddev(xs []float64, mean float64) float64 {
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss / float64(len(xs)))
}

// setLoops records in s the requests placed on each loop between two
// readings and their max/mean and min/mean.
func setLoops(s *results.Spread, before, after []uint64) {
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
	mx, mn := results.Round3(float64(hi)/mean), results.Round3(float64(lo)/mean)
	s.PerLoopMaxOverMean, s.PerLoopMinOverMean = &mx, &mn
}
