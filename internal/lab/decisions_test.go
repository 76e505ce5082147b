package lab

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	corput "github.com/corput/corput/internal/gateway"
	"github.com/corput/corput/internal/pool/memconn"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/workload"
)

// The lab's simulated gateway and the real gateway run the same
// forward.Attempt. This test proves they decide alike: the same scripted
// failures — a dial refused, an origin's 503, a connection reset, a
// connection the origin closed while it sat idle — behind a round-robin
// picker seeded alike give the same attempts, on the same endpoints, with
// the same retries and reasons. The gateway's origins are real sockets on
// loopback; the lab's are memconn connections scripted the same way.

// role is what one endpoint does: refuse every dial, or answer its
// exchanges with script (then serve).
type role struct {
	refuse bool
	script []memconn.Outcome
}

func always(o memconn.Outcome) role { return role{script: slices.Repeat([]memconn.Outcome{o}, 64)} }

type traced struct {
	endpoint string
	step     forward.Step
	reason   forward.Reason
}

func (t traced) String() string { return fmt.Sprintf("%s %v %s", t.endpoint, t.step, t.reason) }

type tracer struct {
	mu  sync.Mutex
	log []traced
}

func (t *tracer) add(ep string, s forward.Step, r forward.Reason) {
	t.mu.Lock()
	t.log = append(t.log, traced{ep, s, r})
	t.mu.Unlock()
}

// over reports whether request i (counting from 0) has ended.
func (t *tracer) over(i int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, x := range t.log {
		if x.step != forward.Again {
			n++
		}
	}
	return n > i
}

func (t *tracer) take() []traced {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.log
	t.log = nil
	return out
}

const decisionsSeed = 7

func decisionsConfig(addrs []string) string {
	eps := make([]string, len(addrs))
	for i, a := range addrs {
		eps[i] = fmt.Sprintf("{address: %q}", a)
	}
	return fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    endpoints: [%s]
    subset: {algorithm: none}
    balancer: {policy: round_robin}
    slow_start: {window: 0s}
    pool: {prewarm: 0}
`, strings.Join(eps, ", "))
}

func TestLabAndGatewayDecideAlike(t *testing.T) {
	cases := []struct {
		name     string
		roles    []role
		requests int
	}{
		{"refused, 503, reset", []role{{refuse: true}, always(memconn.Unavailable), always(memconn.Reset)}, 3},
		{"every dial refused", []role{{refuse: true}, {refuse: true}}, 2},
		{"503 then served", []role{{script: []memconn.Outcome{memconn.Unavailable}}, {}, {}}, 2},
		{"reset then served", []role{always(memconn.Reset), {}}, 2},
		{"stale connection", []role{{script: []memconn.Outcome{memconn.ServeThenClose}}}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got, want []traced
			for try := 0; ; try++ {
				addrs := startScripted(t, c.roles)
				var ok bool
				got, ok = gatewayDecisions(t, addrs, c.requests)
				want = labDecisions(t, addrs, c.roles, c.requests)
				if ok || try == 2 {
					break
				}
				// The gateway trusts an idle connection only within
				// upstream.TrustWindow of its last exchange: a machine too
				// busy to send the next request in time makes the stale
				// case moot. Run it again.
				t.Logf("try %d: the next request came too late to find the connection stale; again", try+1)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("decisions differ\ngateway: %v\nlab:     %v", got, want)
			}
			if len(got) < c.requests {
				t.Fatalf("only %d attempts for %d requests: %v", len(got), c.requests, got)
			}
			t.Logf("%v", got)
		})
	}
}

// gatewayDecisions sends requests GETs one after the other through a real
// gateway and returns its attempts. ok is false when a request took longer
// to follow the one before than the trust window allows.
func gatewayDecisions(t *testing.T, addrs []string, requests int) ([]traced, bool) {
	cfg, err := config.Parse([]byte(decisionsConfig(addrs)), "decisions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracer{}
	g, err := corput.New(cfg, corput.Options{Seed: decisionsSeed, Logger: slog.New(slog.DiscardHandler),
		Trace: func(_, ep string, s forward.Step, r forward.Reason) { tr.add(ep, s, r) }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	if !g.FastPath("app") {
		t.Fatal("the fast path does not serve the test's origin")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	ok := true
	var last time.Time
	for i := range requests {
		if i > 0 && time.Since(last) > 50*time.Millisecond {
			ok = false
		}
		resp, err := client.Get("http://" + g.Addr() + "/r")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		last = time.Now()
	}
	return tr.take(), ok
}

// labDecisions sends the same requests through the lab's simulated gateway
// over memconn origins scripted alike, its balancer seeded as the
// gateway's is (gateway.origin: Seed ^ Mix64(FNV(name))).
func labDecisions(t *testing.T, addrs []string, roles []role, requests int) []traced {
	cfg, err := config.Parse([]byte(decisionsConfig(addrs)), "decisions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	oc := &cfg.Origins[0]
	pc := fleetPool()
	pc.Prewarm = 0
	mix := workload.Mix{Classes: []workload.Class{{Name: "tiny", Percent: 100, Latency: time.Millisecond}}}
	e := newEngine(1, mix, fleetOptions{
		gateways: 1, loops: 1, algorithm: subset.NameNone, scope: perLoop, pool: pc,
		conn: memconn.Config{Trusting: true}, balance: balance.FromConfig(oc), workers: 8,
		retries: oc.Retry.Attempts,
	})
	sorted := slices.Sorted(slices.Values(addrs)) // as the gateway orders members
	var members []*instance
	for _, a := range sorted {
		in := e.newInstance(a, 1, workload.Warmup{}, 0)
		i := slices.Index(addrs, a)
		in.dialer.SetDown(roles[i].refuse)
		in.dialer.Script(roles[i].script...)
		members = append(members, in)
	}
	if err := e.place(members); err != nil {
		t.Fatal(err)
	}
	gw := e.gws[0]
	bal, err := balance.NewOrigin("app", balance.FromConfig(oc), membersOf(members), balance.Options{
		Clock: e.clk, Rand: rng.New(decisionsSeed ^ rng.Mix64(rng.FNV("app")))})
	if err != nil {
		t.Fatal(err)
	}
	defer bal.Close()
	gw.bal, gw.loops[0].picker = bal, bal.NewWarmPicker(sorted, gw.drv.Warm(0))
	tr := &tracer{}
	gw.policy = forward.NewPolicy(oc.Retry, e.clk, nil)
	gw.policy.Trace = tr.add
	for i := range requests {
		r := e.newRequest()
		r.begin(gw, gw.loops[0], 0, time.Millisecond, forward.Replay{Resend: true}, 1)
		r.attempt()
		// Only until the request is over: stepping on would run the pools'
		// keepalive probes and idle timers, which real time does not reach
		// between the gateway's requests.
		for !tr.over(i) && e.clk.Step() {
		}
		if e.err != nil {
			t.Fatal(e.err)
		}
	}
	return tr.take()
}

// startScripted starts one loopback origin per role, speaking just enough
// HTTP/1.1: each request head gets the role's next outcome. A refusing
// role gets an address nothing listens on.
func startScripted(t *testing.T, roles []role) []string {
	var addrs []string
	for _, r := range roles {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		if r.refuse {
			ln.Close()
			continue
		}
		s := &scripted{ln: ln, script: slices.Clone(r.script)}
		s.wg.Add(1)
		go s.serve()
		t.Cleanup(s.close)
	}
	return addrs
}

type scripted struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	script []memconn.Outcome
	conns  []net.Conn
}

func (s *scripted) next() memconn.Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		return memconn.Serve
	}
	o := s.script[0]
	s.script = s.script[1:]
	return o
}

func (s *scripted) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			br := bufio.NewReader(c)
			for {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				switch s.next() {
				case memconn.Unavailable:
					io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
				case memconn.Reset:
					return
				case memconn.ServeThenClose:
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					return
				default:
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}
		}()
	}
}

func (s *scripted) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
