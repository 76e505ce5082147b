package gateway

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/cluster"
	testorigin "github.com/corput/corput/internal/origin"
)

// unsentKeys is an origin whose dead endpoints stay in rotation (no
// ejection, no slow start) and are met in a fixed order (round robin).
const unsentKeys = "    balancer: {policy: round_robin}\n    pool: {prewarm: 0}\n    slow_start: {window: 0s}\n" +
	"    outlier: {consecutive_5xx: 1000}\n"

// requestPaths are both downstream request paths, which share the retry
// loop: the fast path (the default for cleartext HTTP/1.1) and net/http's.
var requestPaths = []struct{ name, top string }{
	{"fast_path", ""},
	{"net_http", "downstream: {fast_path: false}\n"},
}

func TestRetryAfterNothingSentAvoidsEveryTriedEndpoint(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) { retryAvoidsEveryTriedEndpoint(t, p.top) })
	}
}

func TestRetryAfterNothingSentIsOutsideTheBudget(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) { retryOutsideTheBudget(t, p.top) })
	}
}

// retryAvoidsEveryTriedEndpoint: two of three
// endpoints refuse connections, as in a rolling deploy when one origin is
// down and the one restarted before it is still refused by its pools'
// reconnect backoff. With one retry that only avoided the previous endpoint,
// a GET that met one dead endpoint was retried on the other and answered
// 502 connect_failed. A failed dial sent nothing, so the request is retried
// on endpoints it has not tried: every GET is served by the live one.
func retryAvoidsEveryTriedEndpoint(t *testing.T, top string) {
	var served sync.Map
	live := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Store(r.Header.Get("X-Req"), true)
	}))
	dead1, dead2 := deadAddr(t), deadAddr(t)
	g := startGateway(t, top+withEndpoints(cfgText(1, unsentKeys), dead1, dead2, live.addr), nil, Options{Seed: 1})
	c := downstream(t, dsH1, nil)
	for i := range 9 {
		tracedGet(t, c, g.Addr(), fmt.Sprint(i), nil) // a 200 from the live endpoint
	}
	pools := g.Origins().([]cluster.OriginView)[0].Loops[0].Pools
	if pools[dead1].Failures == 0 || pools[dead2].Failures == 0 {
		t.Fatalf("dial failures %d and %d: a dead endpoint was never met, the test proves nothing",
			pools[dead1].Failures, pools[dead2].Failures)
	}
}

// retryOutsideTheBudget fills the retry budget (0 %:
// its floor of 3 retries in flight) with GETs that met an overloaded
// endpoint's 503 and are held by a slow one. A GET that then meets a dead
// endpoint is still retried — its failed dial reached no origin, so the
// retry cannot multiply load — while a GET that meets the 503 is not
// (the budget still bounds retries of what reached an origin).
func retryOutsideTheBudget(t *testing.T, top string) {
	var mu sync.Mutex
	at503 := map[string]bool{}
	overloaded := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at503[r.Header.Get("X-Req")] = true
		mu.Unlock()
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	arrived, release := make(chan string, 64), make(chan struct{})
	holding := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("X-Req")
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	dead := deadAddr(t)
	keys := unsentKeys + "    retry: {attempts: 1, budget_percent: 0}\n"
	g := startGateway(t, top+withEndpoints(cfgText(1, keys), overloaded.addr, holding.addr, dead), nil, Options{Seed: 1})

	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	defer cl.Transport.(*http.Transport).CloseIdleConnections()
	type answer struct {
		id     string
		status int
		reason string
	}
	answers := make(chan answer, 64)
	sent := 0
	// send starts one GET and waits until it is held or answered.
	send := func() (held string, a answer) {
		id := fmt.Sprint(sent)
		sent++
		go func() {
			req, _ := http.NewRequest("GET", "http://"+g.Addr()+"/", nil)
			req.Header.Set("X-Req", id)
			resp, err := cl.Do(req)
			if err != nil {
				answers <- answer{id, 0, err.Error()}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answers <- answer{id, resp.StatusCode, resp.Header.Get("X-Corput-Error")}
		}()
		select {
		case h := <-arrived:
			return h, answer{}
		case a := <-answers:
			return "", a
		case <-time.After(10 * time.Second):
			t.Fatalf("GET %s neither held nor answered", id)
		}
		return "", answer{}
	}

	// Fill the budget: three GETs that met the 503 and were retried onto
	// the holding endpoint.
	heldAfter503, heldTotal := 0, 0
	for heldAfter503 < 3 {
		if sent > 30 {
			t.Fatalf("after %d GETs only %d were retried after a 503: the budget is not exercised", sent, heldAfter503)
		}
		id, a := send()
		if id == "" {
			t.Fatalf("GET answered %d %s before the budget was full, want it held", a.status, a.reason)
		}
		heldTotal++
		mu.Lock()
		if at503[id] {
			heldAfter503++
		}
		mu.Unlock()
	}

	// The budget is full. Every GET is now held, answered 503 by the
	// gateway (it met the 503 and may not retry), or — the bug — answered
	// 502 connect_failed because a failed dial could not be retried.
	shed, met503Before := 0, len(at503)
	for range 9 {
		id, a := send()
		switch {
		case id != "":
			heldTotal++
		case a.status == http.StatusServiceUnavailable && a.reason == "upstream_503":
			shed++
		default:
			t.Errorf("GET %s with the budget full: %d %q, want held or 503 upstream_503", a.id, a.status, a.reason)
		}
	}
	mu.Lock()
	met503 := len(at503) - met503Before
	mu.Unlock()
	if shed != met503 {
		t.Errorf("%d GETs met the 503 with the budget full and %d were answered 503: a retry outside the budget reached an origin", met503, shed)
	}
	close(release)
	for range heldTotal {
		if a := <-answers; a.status != 200 {
			t.Errorf("held GET %s answered %d %s", a.id, a.status, a.reason)
		}
	}
	pools := g.Origins().([]cluster.OriginView)[0].Loops[0].Pools
	if pools[dead].Failures == 0 {
		t.Fatal("the dead endpoint was never met: the test proves nothing")
	}
}
