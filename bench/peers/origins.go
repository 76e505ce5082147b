package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/corput/corput/internal/origin"
)

// originProc is a `corput origin` child.
type originProc struct {
	id    string
	addr  string
	c     *child
	https *http.Client // reads a TLS origin's stats (tlsorigins.go); nil: cleartext
}

// originListening is `corput origin`'s first line on stdout.
var originListening = regexp.MustCompile(`listening on https?://(\S+)`)

// startOrigin runs `corput origin --listen listen --id id` with extra
// flags (a profile), with gomaxprocs processors when it is above 0, and
// waits for its listening line.
func startOrigin(ctx context.Context, ps *procs, bin, id, listen string, seed uint64, gomaxprocs int, extra ...string) (*originProc, error) {
	argv := append([]string{bin, "origin", "--listen", listen, "--id", id, "--seed", fmt.Sprint(seed)}, extra...)
	var env []string
	if gomaxprocs > 0 {
		env = []string{fmt.Sprintf("GOMAXPROCS=%d", gomaxprocs)}
	}
	c, err := ps.start("origin-"+id, env, argv...)
	if err != nil {
		return nil, err
	}
	m, err := c.waitLog(ctx, originListening)
	if err != nil {
		c.stop(time.Second)
		return nil, err
	}
	return &originProc{id: id, addr: m[1], c: c}, nil
}

var statsClient = &http.Client{Timeout: 5 * time.Second}

// stats reads the origin's ground truth.
func (o *originProc) stats() (origin.Stats, error) {
	var st origin.Stats
	client, url := statsClient, "http://"+o.addr+origin.StatsPath
	if o.https != nil {
		client, url = o.https, "https://"+o.addr+origin.StatsPath
	}
	resp, err := client.Get(url)
	if err != nil {
		return st, fmt.Errorf("origin %s stats: %w", o.id, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("origin %s stats: %w", o.id, err)
	}
	// The decoder stops at the value's end: read the rest (the encoder's
	// newline, a chunked body's last chunk) so the keep-alive connection
	// is reused. A body closed before its end closes the connection, and
	// the redial (a TCP connection, over TLS a full handshake) would be
	// counted as the running proxy's.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return st, fmt.Errorf("origin %s stats: %w", o.id, err)
	}
	return st, nil
}

// tally is the origins' counters at one moment.
type tally struct {
	accepted int64
	requests map[string]int64 // class requests by origin id
}

func takeTally(os []*originProc) (tally, error) {
	t := tally{requests: map[string]int64{}}
	for _, o := range os {
		st, err := o.stats()
		if err != nil {
			return t, err
		}
		t.accepted += st.Connections.Accepted
		t.requests[o.id] = classRequests(st)
	}
	return t, nil
}

// classRequests counts an origin's finished class requests (light,
// heavy): raw ones are health checks and the raw test.
func classRequests(st origin.Stats) int64 {
	var n int64
	for name, c := range st.Requests {
		if name != origin.RawClass {
			n += c.Total()
		}
	}
	return n
}

// since is what happened between t0 and t.
func (t tally) since(t0 tally) tally {
	d := tally{accepted: t.accepted - t0.accepted, requests: map[string]int64{}}
	for id, n := range t.requests {
		d.requests[id] = n - t0.requests[id]
	}
	return d
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
func joinResult(st origin.Stats, sp joinSpans) *JoinResult {
	j := &JoinResult{WindowS: sp.window, EarlyS: sp.early, LateFromS: sp.late}
	j.Requests = classRequests(st)
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
