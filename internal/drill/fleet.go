package drill

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/gateway"
	"github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/upstream"
	"github.com/corput/corput/internal/workload"
)

// originName is the one origin (cluster) every drill routes to.
const originName = "app"

// fleetSpec describes the origins and the gateway of a drill.
type fleetSpec struct {
	origins int
	holes   int // endpoints after the origins that accept and never answer
	workers int // per origin; 0 is unlimited
	loops   int
	mix     workload.Mix
	// keys are origin keys beyond name, endpoints and pool, one per line,
	// without indentation (e.g. "timeouts: {connect: 250ms, request: 2s}").
	keys []string
	// pool are the pool keys ("max_connections: 2"); poolOverride's keys
	// (Options.Pool) replace those of the same name.
	pool, poolOverride []string
	// top are top-level keys.
	top        []string
	seed       uint64
	sameJitter bool
	log        *slog.Logger
}

// fleet is a running gateway and its origins.
type fleet struct {
	spec    fleetSpec
	addrs   []string
	gw      *gateway.Gateway
	dials   *dialLog
	timeout time.Duration // origins[].timeouts.request, else response_header

	mu      sync.Mutex // guards following
	origins []*origin.Server
	holes   []*blackhole
	retired int64 // requests answered by origins since stopped

	stopping sync.WaitGroup // origins closing in the background
}

func (s fleetSpec) originOptions(i int, addr string) origin.Options {
	return origin.Options{Listen: addr, ID: fmt.Sprintf("o%d", i), Classes: s.mix.Classes, Workers: s.workers}
}

// startFleet starts the origins and a gateway in front of them, and waits
// until the gateway is ready (its pools pre-warmed).
func startFleet(s fleetSpec) (*fleet, error) {
	f := &fleet{spec: s, dials: &dialLog{}}
	for i := 0; i < s.origins; i++ {
		o, err := origin.Start(s.originOptions(i, "127.0.0.1:0"))
		if err != nil {
			f.close()
			return nil, err
		}
		f.origins = append(f.origins, o)
		f.addrs = append(f.addrs, o.Addr())
	}
	for i := 0; i < s.holes; i++ {
		h, err := startBlackhole("127.0.0.1:0")
		if err != nil {
			f.close()
			return nil, err
		}
		f.holes = append(f.holes, h)
		f.addrs = append(f.addrs, h.ln.Addr().String())
	}
	cfg, err := config.Parse([]byte(s.yaml(f.addrs)), "drill.yaml")
	if err != nil {
		f.close()
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	oc := &cfg.Origins[0]
	f.timeout = oc.Timeouts.Request
	if f.timeout == 0 { // no whole-request limit: a silent origin is cut at the response head's
		f.timeout = oc.Timeouts.ResponseHeader
	}
	d, err := upstream.NewDialer(upstream.Options{Protocol: upstream.Protocol(oc.Protocol), ConnectTimeout: oc.Timeouts.Connect})
	if err != nil {
		f.close()
		return nil, err
	}
	f.dials.next = d
	f.gw, err = gateway.New(cfg, gateway.Options{
		Seed: s.seed, Logger: s.log, SameJitter: s.sameJitter,
		Dialers: map[string]pool.Dialer{originName: f.dials},
	})
	if err != nil {
		f.close()
		return nil, err
	}
	if err := f.gw.Start(); err != nil {
		f.close()
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); !f.gw.Ready(); {
		if time.Now().After(deadline) {
			f.close()
			return nil, fmt.Errorf("gateway not ready within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return f, nil
}

func (s fleetSpec) yaml(addrs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: %d\n", s.loops)
	for _, k := range s.top {
		b.WriteString(k + "\n")
	}
	fmt.Fprintf(&b, "routes: [{path_prefix: /, origin: %s}]\norigins:\n  - name: %s\n    endpoints: [", originName, originName)
	for i, a := range addrs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{address: %q}", a)
	}
	b.WriteString("]\n")
	for _, k := range s.keys {
		b.WriteString("    " + k + "\n")
	}
	if pool := s.poolKeys(); len(pool) > 0 {
		b.WriteString("    pool: {" + strings.Join(pool, ", ") + "}\n")
	}
	return b.String()
}

// poolKeys merges the drill's pool keys with the override.
func (s fleetSpec) poolKeys() []string {
	name := func(kv string) string { k, _, _ := strings.Cut(kv, ":"); return strings.TrimSpace(k) }
	var out []string
	for _, kv := range s.pool {
		if !slices.ContainsFunc(s.poolOverride, func(o string) bool { return name(o) == name(kv) }) {
			out = append(out, kv)
		}
	}
	return append(out, s.poolOverride...)
}

// splitKeys splits "k: v, k2: v2" into its entries.
func splitKeys(s string) []string {
	var out []string
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			out = append(out, kv)
		}
	}
	return out
}

// url is the gateway's base URL.
func (f *fleet) url() string { return "http://" + f.gw.Addr() }

// stopOrigin stops origin i at once, as a crash does: requests in service
// are cut, the port refuses connections. The origin's Close returns only
// once its connections are gone (net/http waits up to 5s for a connection
// that never sent a request, such as a pre-warmed one), so it finishes in
// the background; close waits for it.
func (f *fleet) stopOrigin(i int) {
	f.mu.Lock()
	o := f.origins[i]
	f.origins[i] = nil
	f.mu.Unlock()
	if o == nil {
		return
	}
	stopped := make(chan struct{})
	f.stopping.Add(1)
	go func() {
		defer f.stopping.Done()
		o.Close()
		f.mu.Lock()
		f.retired += o.Stats().Total().Total()
		f.mu.Unlock()
	}()
	go func() { // the listener closes first: wait for that, not for the rest
		for {
			c, err := net.DialTimeout("tcp", f.addrs[i], time.Second)
			if err != nil {
				close(stopped)
				return
			}
			c.Close()
			time.Sleep(time.Millisecond)
		}
	}()
	<-stopped
}

// drainOrigin stops origin i as a graceful restart does: once it has no
// request in service (waiting at most 2s), so none is cut.
func (f *fleet) drainOrigin(i int) {
	f.mu.Lock()
	o := f.origins[i]
	f.mu.Unlock()
	for deadline := time.Now().Add(2 * time.Second); o != nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if st := o.Stats(); st.Concurrency.Current == 0 && st.Queued.Current == 0 {
			break
		}
	}
	f.stopOrigin(i)
}

// startOrigin starts origin i again on its address.
func (f *fleet) startOrigin(i int) error {
	o, err := origin.Start(f.spec.originOptions(i, f.addrs[i]))
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.origins[i] = o
	f.mu.Unlock()
	return nil
}

// served sums the requests the origins answered (ground truth), stopped
// ones included.
func (f *fleet) served() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	total := f.retired
	for _, o := range f.origins {
		if o != nil {
			total += o.Stats().Total().Total()
		}
	}
	return total
}

func (f *fleet) close() {
	if f.gw != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		f.gw.Shutdown(ctx)
		cancel()
	}
	f.stopping.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.origins {
		if o != nil {
			o.Close()
		}
	}
	for _, h := range f.holes {
		h.close()
	}
}

// view is the gateway's admin view of the drill's origin.
func (f *fleet) view() cluster.OriginView {
	return f.gw.Origins().([]cluster.OriginView)[0]
}

// dialLog is the gateway's dialer for the drill: it times every
// connection the pools open, and hands them on as they are, so the path
// that serves them is the one production takes (DialsFast passes the
// upstream dialer's answer on: the fast path serves an HTTP/1.1 origin).
type dialLog struct {
	next pool.Dialer

	mu    sync.Mutex // guards following
	ok    []dialEvent
	fails int
}

type dialEvent struct {
	at   time.Time
	addr string
}

// DialsFast implements upstream.FastDialer.
func (d *dialLog) DialsFast() bool { return upstream.DialsFast(d.next) }

func (d *dialLog) Dial(addr string, done func(pool.Conn, error)) {
	d.next.Dial(addr, func(c pool.Conn, err error) {
		d.mu.Lock()
		if err == nil {
			d.ok = append(d.ok, dialEvent{time.Now(), addr})
		} else {
			d.fails++
		}
		d.mu.Unlock()
		done(c, err)
	})
}

// created returns the successful dials to addr ("" for any) at or after
// since.
func (d *dialLog) created(addr string, since time.Time) []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []time.Time
	for _, e := range d.ok {
		if (addr == "" || e.addr == addr) && !e.at.Before(since) {
			out = append(out, e.at)
		}
	}
	return out
}

// blackhole accepts TCP connections and reads them without ever
// answering, until closed.
type blackhole struct {
	ln net.Listener
	wg sync.WaitGroup

	mu             sync.Mutex // guards following
	conns          map[net.Conn]bool
	accepted, peak int
	closed         bool
}

func startBlackhole(addr string) (*blackhole, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("blackhole %s: %w", addr, err)
	}
	h := &blackhole{ln: ln, conns: map[net.Conn]bool{}}
	h.wg.Add(1)
	go h.serve()
	return h, nil
}

func (h *blackhole) serve() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			c.Close()
			return
		}
		h.conns[c] = true
		h.accepted++
		h.peak = max(h.peak, len(h.conns))
		h.mu.Unlock()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			buf := make([]byte, 4096)
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			c.Close()
			h.mu.Lock()
			delete(h.conns, c)
			h.mu.Unlock()
		}()
	}
}

// stats returns connections accepted and the most open at once.
func (h *blackhole) stats() (accepted, peak int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.accepted, h.peak
}

func (h *blackhole) close() {
	h.mu.Lock()
	h.closed = true
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.ln.Close()
	h.wg.Wait()
}
