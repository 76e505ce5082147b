package origin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/waitfor"
	"github.com/corput/corput/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// tiny are latency classes short enough for tests.
func tiny(light, heavy time.Duration) []workload.Class {
	return []workload.Class{{Name: "light", Latency: light}, {Name: "heavy", Latency: heavy}}
}

func start(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// client returns an HTTP client of its own whose connections are closed
// when the test ends.
func client(t *testing.T, configure func(*http.Transport)) (*http.Client, *http.Transport) {
	t.Helper()
	tr := &http.Transport{}
	if configure != nil {
		configure(tr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

// get fetches url and returns the status and body.
func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestClassesByPathAndServiceTime(t *testing.T) {
	s := start(t, Options{Classes: tiny(5*time.Millisecond, 40*time.Millisecond), Slowdown: 2, ID: "o7"})
	c, _ := client(t, nil)
	for _, tc := range []struct {
		path string
		min  time.Duration
	}{
		{"/light", 10 * time.Millisecond},
		{"/heavy", 80 * time.Millisecond},
		{"/api/v1/heavy", 80 * time.Millisecond},
		{"/", 0}, {"/heavy/", 0}, {"/ping", 0},
	} {
		began := time.Now()
		resp, body := get(t, c, s.URL()+tc.path)
		took := time.Since(began)
		if resp.StatusCode != 200 || body != "ok\n" || resp.Header.Get(IDHeader) != "o7" {
			t.Fatalf("%s: %d %q id=%q", tc.path, resp.StatusCode, body, resp.Header.Get(IDHeader))
		}
		if took < tc.min {
			t.Errorf("%s answered in %v, before its service time %v", tc.path, took, tc.min)
		}
	}
	st := s.Stats()
	want := map[string]int64{"light": 1, "heavy": 2, RawClass: 3}
	for name, n := range want {
		if got := st.Requests[name]; got.OK != n || got.Total() != n {
			t.Errorf("class %s: %+v, want %d ok", name, got, n)
		}
	}
	if st.Concurrency.Current != 0 || st.Concurrency.Max != 1 {
		t.Errorf("sequential requests: concurrency %+v, want current 0 max 1", st.Concurrency)
	}
}

func TestBodyBytes(t *testing.T) {
	s := start(t, Options{BodyBytes: 1000})
	c, _ := client(t, nil)
	resp, body := get(t, c, s.URL()+"/")
	if len(body) != 1000 || resp.ContentLength != 1000 {
		t.Fatalf("body %d bytes, Content-Length %d, want 1000", len(body), resp.ContentLength)
	}
}

func TestWorkersBoundConcurrency(t *testing.T) {
	const workers, extra = 3, 4
	s, err := Start(Options{Workers: workers, Classes: tiny(time.Millisecond, time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := client(t, nil)
	var wg sync.WaitGroup
	for range workers + extra {
		wg.Go(func() {
			if resp, err := c.Get(s.URL() + "/heavy"); err == nil {
				resp.Body.Close()
				t.Errorf("a request cut by Close got an answer: %d", resp.StatusCode)
			}
		})
	}
	waitfor.Until(t, "every request to arrive", func() bool {
		st := s.Stats()
		return st.Concurrency.Current+st.Queued.Current == workers+extra
	})
	st := s.Stats()
	if st.Concurrency.Current != workers || st.Queued.Current != extra || st.Concurrency.Max != workers {
		t.Fatalf("in service %d (peak %d), waiting %d; want %d and %d", st.Concurrency.Current, st.Concurrency.Max, st.Queued.Current, workers, extra)
	}
	// Raw requests never wait for a worker (and count as in service).
	if resp, _ := get(t, c, s.URL()+"/raw"); resp.StatusCode != 200 {
		t.Fatalf("raw request behind busy workers: %d", resp.StatusCode)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	st = s.Stats()
	if st.Queued.Max != extra || st.Concurrency.Max != workers+1 {
		t.Fatalf("peak waiting %d, in service %d; want %d and %d", st.Queued.Max, st.Concurrency.Max, extra, workers+1)
	}
	if h := st.Requests["heavy"]; h.Canceled != workers+extra || h.OK != 0 {
		t.Fatalf("heavy after Close: %+v, want all %d cut", h, workers+extra)
	}
}

func TestWarmupOnInjectedClock(t *testing.T) {
	fc := clock.NewFake(epoch)
	s := start(t, Options{
		Classes: tiny(10*time.Millisecond, 100*time.Millisecond),
		Warmup:  workload.Warmup{Factor: 8, Window: 40 * time.Second},
		Clock:   fc,
	})
	check := func(factor float64, light time.Duration) {
		t.Helper()
		if got := s.Stats().WarmupFactor; got != factor {
			t.Errorf("at %v: warm-up factor %v, want %v", fc.Now().Sub(epoch), got, factor)
		}
		if got := s.ServiceTime(10 * time.Millisecond); got != light {
			t.Errorf("at %v: light service time %v, want %v", fc.Now().Sub(epoch), got, light)
		}
	}
	check(8, 80*time.Millisecond)
	c, _ := client(t, nil)
	began := time.Now()
	get(t, c, s.URL()+"/light")
	if took := time.Since(began); took < 80*time.Millisecond {
		t.Errorf("a cold light request answered in %v, before 8 × 10ms", took)
	}
	fc.Advance(20 * time.Second)
	check(2.75, 27500*time.Microsecond)
	fc.Advance(20 * time.Second)
	check(1, 10*time.Millisecond)
}

func TestErrorInjectionIsSeeded(t *testing.T) {
	const seed, rate, n = 42, 0.3, 200
	s := start(t, Options{ErrorRate: rate, Seed: seed, Classes: tiny(time.Microsecond, 2*time.Microsecond)})
	c, _ := client(t, nil)
	want := rng.New(seed)
	fails := 0
	for i := range n {
		path := "/light"
		if i%2 == 1 {
			path = "/raw" // raw requests are injected too
		}
		resp, _ := get(t, c, s.URL()+path)
		wantFail := want.Float64() < rate
		if (resp.StatusCode == 500) != wantFail || (resp.StatusCode != 200 && resp.StatusCode != 500) {
			t.Fatalf("request %d: status %d, seeded draw says fail=%v", i, resp.StatusCode, wantFail)
		}
		if wantFail {
			fails++
		}
	}
	if tot := s.Stats().Total(); tot.Error != int64(fails) || tot.OK != int64(n-fails) {
		t.Fatalf("stats %+v, want %d errors of %d", tot, fails, n)
	}
	if fails < n/5 || fails > n*2/5 {
		t.Fatalf("%d of %d failed at rate %v", fails, n, rate)
	}

	always := start(t, Options{ErrorRate: 1})
	for range 5 {
		if resp, _ := get(t, c, always.URL()+"/"); resp.StatusCode != 500 {
			t.Fatalf("error rate 1 answered %d", resp.StatusCode)
		}
	}
}

func TestConnectionCountingAndHistory(t *testing.T) {
	fc := clock.NewFake(epoch)
	s := start(t, Options{Clock: fc, History: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	keep, keepTr := client(t, nil)
	for range 5 {
		get(t, keep, s.URL()+"/")
	}
	if st := s.Stats(); st.Connections != (Connections{Accepted: 1, Open: 1}) {
		t.Fatalf("keep-alive client: %+v, want 1 accepted, 1 open", st.Connections)
	}
	fc.Advance(2 * time.Second)
	once, _ := client(t, func(tr *http.Transport) { tr.DisableKeepAlives = true })
	for range 3 {
		get(t, once, s.URL()+"/")
	}
	if err := s.WaitOpen(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second)
	keepTr.CloseIdleConnections()
	if err := s.WaitOpen(ctx, 0); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Connections != (Connections{Accepted: 4, Open: 0}) || st.Total().OK != 8 {
		t.Fatalf("%+v, %d requests; want 4 accepted, 0 open, 8 requests", st.Connections, st.Total().OK)
	}
	want := []Second{
		{T: 0, Requests: 5, MaxConcurrency: 1, MaxInFlight: 1, Accepted: 1, Open: 1},
		{T: 1, Open: 1},
		{T: 2, Requests: 3, MaxConcurrency: 1, MaxInFlight: 1, Accepted: 3, Closed: 3, Open: 1},
		{T: 3, Closed: 1, Open: 0},
	}
	if len(st.Seconds) != len(want) {
		t.Fatalf("history %+v, want %+v", st.Seconds, want)
	}
	for i := range want {
		if st.Seconds[i] != want[i] {
			t.Errorf("second %d: %+v, want %+v", i, st.Seconds[i], want[i])
		}
	}
	fc.Advance(2 * time.Second) // the ring keeps the last 4 seconds
	if st := s.Stats(); len(st.Seconds) != 4 || st.Seconds[0].T != 2 || st.Seconds[0].Accepted != 3 {
		t.Fatalf("after the ring wrapped: %+v", st.Seconds)
	}
}

func TestHistoryCarriesConcurrencyAcrossQuietSeconds(t *testing.T) {
	var h history
	h.init(8)
	h.at(0, 0).maxConc.Store(3) // three requests entered in second 0 ...
	h.at(0, 0).lastConc.Store(3)
	sl := h.at(3, 3) // ... and were still in service when one left in second 3
	sl.lastConc.Store(2)
	got := h.snapshot(4, 0)
	for i, want := range []int64{3, 3, 3, 3, 2} {
		if got[i].MaxConcurrency != want {
			t.Fatalf("second %d: max concurrency %d, want %d (%+v)", i, got[i].MaxConcurrency, want, got)
		}
	}
	if h.at(3, 0) != sl || h.at(0, 0) == &h.slots[0] && h.slots[0].sec.Load() != 0 {
		t.Fatal("slot lookup is not stable")
	}
	h.at(11, 0)                             // second 11 reuses slot 3
	if old := h.at(3, 0); old != &h.stale { // a late event for second 3 goes nowhere
		t.Fatal("an event older than the ring landed in a live slot")
	}
}

func TestH2CAndTLSWithALPN(t *testing.T) {
	h2c := start(t, Options{Proto: H2C})
	prior, _ := client(t, func(tr *http.Transport) {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	})
	plain, _ := client(t, nil)
	for range 3 {
		if resp, body := get(t, prior, h2c.URL()+"/"); resp.ProtoMajor != 2 || body != "ok\n" {
			t.Fatalf("h2c: %s %q", resp.Proto, body)
		}
	}
	if resp, _ := get(t, plain, h2c.URL()+"/"); resp.ProtoMajor != 1 {
		t.Fatalf("HTTP/1.1 on the h2c port: %s", resp.Proto)
	}
	// One for the h2 client (Go's transport may redial once on a starved
	// CPU) and one for the h1 request; per-request connections would be 4.
	if st := h2c.Stats(); st.Connections.Accepted < 2 || st.Connections.Accepted > 3 {
		t.Fatalf("3 h2 streams and 1 h1 request: %d connections, want 2 (3 at most)", st.Connections.Accepted)
	}

	tlsSrv := start(t, Options{Proto: TLS})
	if !strings.HasPrefix(tlsSrv.URL(), "https://") || tlsSrv.CertPEM() == nil {
		t.Fatalf("TLS origin URL %s", tlsSrv.URL())
	}
	for _, tc := range []struct {
		alpn  []string
		proto string
	}{
		{[]string{"h2", "http/1.1"}, "h2"},
		{[]string{"http/1.1"}, "http/1.1"},
	} {
		c, _ := client(t, func(tr *http.Transport) {
			tr.TLSClientConfig = &tls.Config{RootCAs: tlsSrv.CertPool(), NextProtos: tc.alpn}
			tr.ForceAttemptHTTP2 = tc.proto == "h2"
		})
		resp, body := get(t, c, tlsSrv.URL()+"/light")
		if resp.TLS == nil || resp.TLS.NegotiatedProtocol != tc.proto || body != "ok\n" {
			t.Fatalf("ALPN %v: negotiated %q (%s)", tc.alpn, resp.TLS.NegotiatedProtocol, resp.Proto)
		}
	}
	if got := tlsSrv.Stats().Connections.Accepted; got != 2 {
		t.Fatalf("TLS connections %d, want 2", got)
	}
}

// TestListenersAreCountedApart: an origin with several listeners listens
// on consecutive ports (from a free run with port 0, or from the port
// given), serves the same classes on each, over HTTP/1.1, h2c and TLS, and
// counts every listener's connections and requests apart; the stats page
// is not a request.
func TestListenersAreCountedApart(t *testing.T) {
	for _, proto := range []Proto{H1, H2C, TLS} {
		t.Run(string(proto), func(t *testing.T) {
			s := start(t, Options{Proto: proto, Listeners: 4, Classes: tiny(time.Millisecond, 2*time.Millisecond)})
			addrs := s.Addrs()
			if len(addrs) != 4 || addrs[0] != s.Addr() {
				t.Fatalf("Addrs = %v (Addr %s); want 4, the first Addr", addrs, s.Addr())
			}
			for i := 1; i < len(addrs); i++ {
				if port(t, addrs[i]) != port(t, addrs[0])+i {
					t.Fatalf("ports %v are not consecutive", addrs)
				}
			}
			c, _ := client(t, func(tr *http.Transport) {
				tr.TLSClientConfig = &tls.Config{RootCAs: s.CertPool()}
				if proto == H2C {
					tr.Protocols = new(http.Protocols)
					tr.Protocols.SetUnencryptedHTTP2(true)
				}
			})
			scheme := strings.TrimSuffix(s.URL(), "://"+s.Addr())
			// Listener i gets i requests: 0, 1, 2 and 3.
			for i, a := range addrs {
				for range i {
					if resp, body := get(t, c, scheme+"://"+a+"/light"); resp.StatusCode != 200 || body != "ok\n" {
						t.Fatalf("%s: %s %q", a, resp.Status, body)
					}
				}
			}
			get(t, c, s.URL()+StatsPath)
			st := s.Stats()
			if len(st.Listeners) != 4 {
				t.Fatalf("stats list %d listeners, want 4", len(st.Listeners))
			}
			for i, l := range st.Listeners {
				wantConns := int64(min(i, 1))
				if i == 0 {
					wantConns = 1 // the stats page's
				}
				// Go's h2 transport may redial once on a starved CPU.
				slack := int64(0)
				if proto == H2C {
					slack = 1
				}
				if l.Address != addrs[i] || l.Requests != int64(i) || l.Accepted < wantConns || l.Accepted > wantConns+slack {
					t.Errorf("listener %d: %+v; want %s with %d requests on %d connection", i, l, addrs[i], i, wantConns)
				}
			}
			if st.Requests["light"].OK != 6 || st.Connections.Accepted < 4 {
				t.Errorf("origin-wide: %d light, %d connections; want 6 and 4", st.Requests["light"].OK, st.Connections.Accepted)
			}
		})
	}
	// A port given: the run starts there.
	s := start(t, Options{Listeners: 3})
	base := port(t, s.Addr())
	s.Close()
	again := start(t, Options{Listen: s.Addr(), Listeners: 3})
	if a := again.Addrs(); port(t, a[0]) != base || port(t, a[2]) != base+2 {
		t.Fatalf("from port %d: %v", base, a)
	}
	if st := again.Stats(); len(st.Listeners) != 3 || st.Listeners[2].Requests != 0 {
		t.Fatalf("listeners %+v", st.Listeners)
	}
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStatsEndpoint(t *testing.T) {
	s := start(t, Options{ID: "a", Profile: "raw"})
	c, _ := client(t, nil)
	get(t, c, s.URL()+"/x")
	resp, body := get(t, c, s.URL()+StatsPath+"?since=0")
	var st Stats
	if err := json.Unmarshal([]byte(body), &st); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("stats JSON: %v\n%s", err, body)
	}
	if st.ID != "a" || st.Requests[RawClass].OK != 1 || st.Connections.Open != 1 || len(st.Seconds) == 0 {
		t.Fatalf("stats %+v", st)
	}
	if !strings.Contains(body, `"200": 1`) {
		t.Fatalf("counts are not keyed by status code:\n%s", body)
	}
	if resp, body := get(t, c, s.URL()+StatsPath+"?since=soon"); resp.StatusCode != 400 || !strings.Contains(body, "since=") {
		t.Fatalf("bad since: %d %q", resp.StatusCode, body)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	for name, o := range map[string]Options{
		"proto":      {Proto: "h3"},
		"workers":    {Workers: -1},
		"slowdown":   {Slowdown: 0.5},
		"error rate": {ErrorRate: 1.5},
		"body":       {BodyBytes: -1},
		"class name": {Classes: []workload.Class{{Name: "raw", Latency: time.Millisecond}}},
		"duplicate":  {Classes: []workload.Class{{Name: "a", Latency: 1}, {Name: "a", Latency: 2}}},
		"latency":    {Classes: []workload.Class{{Name: "a"}}},
		"cert":       {Proto: TLS, CertFile: "only-a-cert.pem"},
		"listen":     {Listen: "127.0.0.1:notaport"},
		"listeners":  {Listeners: -1},
		"too many":   {Listeners: maxListeners + 1},
		"past 65535": {Listen: "127.0.0.1:65535", Listeners: 2},
	} {
		if s, err := Start(o); err == nil {
			s.Close()
			t.Errorf("%s: accepted %+v", name, o)
		}
	}
}

func TestProfilesAndFlags(t *testing.T) {
	for name, check := range map[string]func(Options) bool{
		"default": func(o Options) bool { return o.Workers == 8 && len(o.Classes) == 2 && o.Slowdown == 0 },
		"slow":    func(o Options) bool { return o.Slowdown == 5 },
		"cold":    func(o Options) bool { return o.Warmup == workload.Cold() },
		"flaky":   func(o Options) bool { return o.ErrorRate > 0 && o.ErrorRate < 1 },
		"failing": func(o Options) bool { return o.ErrorRate == 1 },
		"raw":     func(o Options) bool { return o.Classes == nil && o.Workers == 0 },
	} {
		o, err := Profile(name)
		if err != nil || !check(o) || o.Profile != name {
			t.Errorf("profile %s: %+v %v", name, o, err)
		}
	}
	if _, err := Profile("fast"); err == nil || !strings.Contains(err.Error(), "slow") {
		t.Fatalf("unknown profile: %v", err)
	}

	parse := func(args ...string) (Options, error) {
		fs := flag.NewFlagSet("origin", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			return Options{}, err
		}
		return f.Options()
	}
	o, err := parse("--profile", "cold", "--workers", "3", "--warmup", "8x:30s", "--proto", "h2c", "--listen", "127.0.0.1:0", "--listeners", "4")
	if err != nil || o.Workers != 3 || o.Warmup != (workload.Warmup{Factor: 8, Window: 30 * time.Second}) || o.Proto != H2C || o.Listeners != 4 {
		t.Fatalf("flags over cold: %+v %v", o, err)
	}
	if o, err := parse("--profile", "slow"); err != nil || o.Workers != 8 || o.Slowdown != 5 {
		t.Fatalf("profile values must stand when no flag overrides them: %+v %v", o, err)
	}
	if o, err := parse("--profile", "raw", "--slowdown", "2"); err != nil || o.Slowdown != 2 || o.Classes != nil {
		t.Fatalf("raw with slowdown: %+v %v", o, err)
	}
	if _, err := parse("--warmup", "soon", "--workload", "nope"); err == nil || !strings.Contains(err.Error(), "soon") || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("both bad flags must be reported: %v", err)
	}
}
