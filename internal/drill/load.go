package drill

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/latency"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/workload"
)

// Load is what the clients saw.
type Load struct {
	Sent     int64 `json:"sent"`
	Answered int64 `json:"answered"`
	// Lost is requests without an HTTP answer before the client's timeout
	// (request timeout + a margin): refused, reset or hung. Must be 0.
	Lost         int64            `json:"lost"`
	OK           int64            `json:"ok"` // 2xx
	SuccessRatio float64          `json:"success_ratio"`
	Statuses     map[string]int64 `json:"statuses"`
	// Reasons counts gateway-made answers by X-Corput-Error.
	Reasons map[string]int64 `json:"reasons,omitempty"`
	// OriginErrors are 5xx without X-Corput-Error: an origin's own.
	OriginErrors int64            `json:"origin_errors"`
	Errors       map[string]int64 `json:"errors,omitempty"` // transport errors of lost requests
	Latency      Percentiles      `json:"latency"`          // every answered request
	OKLatency    Percentiles      `json:"ok_latency"`       // 2xx only
	// Shed are the gateway's 503s; ShedWithRetryAfter carried
	// Retry-After: 1.
	Shed               Percentiles `json:"shed"`
	ShedWithRetryAfter int64       `json:"shed_with_retry_after"`
	// ShedBy splits Shed by X-Corput-Error; ShedAtOnce are the 503s
	// that did not wait for a connection (all but acquire_timeout).
	ShedBy     map[string]Percentiles `json:"shed_by,omitempty"`
	ShedAtOnce Percentiles            `json:"shed_at_once"`
	// GoodputRPS is 2xx answers completed while load was offered, per
	// second.
	GoodputRPS float64 `json:"goodput_rps"`
}

// Percentiles are nearest-rank latencies in milliseconds.
type Percentiles = latency.Percentiles

func percentiles(d []time.Duration) Percentiles { return latency.Of(d) }

func ms(d time.Duration) float64 { return latency.Millis(d) }

// loadSpec is one open-loop run against the gateway.
type loadSpec struct {
	target   string // gateway base URL
	rate     float64
	duration time.Duration
	mix      workload.Mix
	seed     uint64
	timeout  time.Duration // the client's: a request without an answer by then is lost
	progress func(elapsed, total time.Duration)
}

// tally collects results as they arrive.
type tally struct {
	load            Load
	start, end      time.Time // when load was offered
	okInWindow      int64
	lat, okLat, shd []time.Duration
	shedBy          map[string][]time.Duration
}

func (t *tally) add(r *vegeta.Result) {
	l := &t.load
	l.Sent++
	if r.Code == 0 {
		l.Lost++
		if l.Errors == nil {
			l.Errors = map[string]int64{}
		}
		if len(l.Errors) < 16 {
			l.Errors[r.Error]++
		} else {
			l.Errors["other"]++
		}
		return
	}
	l.Answered++
	l.Statuses[strconv.Itoa(int(r.Code))]++
	t.lat = append(t.lat, r.Latency)
	reason := r.Headers.Get("X-Corput-Error")
	switch {
	case r.Code >= 200 && r.Code < 300:
		l.OK++
		if !r.End().After(t.end) {
			t.okInWindow++
		}
		t.okLat = append(t.okLat, r.Latency)
	case reason != "":
		if l.Reasons == nil {
			l.Reasons = map[string]int64{}
		}
		l.Reasons[reason]++
		if r.Code == http.StatusServiceUnavailable {
			t.shd = append(t.shd, r.Latency)
			t.shedBy[reason] = append(t.shedBy[reason], r.Latency)
			if r.Headers.Get("Retry-After") == "1" {
				l.ShedWithRetryAfter++
			}
		}
	case r.Code >= 500:
		l.OriginErrors++
	}
}

func (t *tally) finish() Load {
	l := t.load
	l.Latency, l.OKLatency, l.Shed = percentiles(t.lat), percentiles(t.okLat), percentiles(t.shd)
	var atOnce []time.Duration
	for reason, d := range t.shedBy {
		if l.ShedBy == nil {
			l.ShedBy = map[string]Percentiles{}
		}
		if reason != forward.AcquireTimeout.String() {
			atOnce = append(atOnce, d...)
		}
		l.ShedBy[reason] = percentiles(d)
	}
	l.ShedAtOnce = percentiles(atOnce)
	if l.Sent > 0 {
		l.SuccessRatio = float64(l.OK) / float64(l.Sent)
	}
	l.GoodputRPS = float64(t.okInWindow) / t.end.Sub(t.start).Seconds()
	return l
}

// runLoad sends open-loop Poisson GETs with the mix's classes (Target/<class>)
// and tallies every answer. It returns when every request has an answer or
// gave up, or early (with what it has) when ctx ends.
func runLoad(ctx context.Context, s loadSpec) Load {
	base, _ := url.Parse(s.target)
	urls := make([]string, len(s.mix.Classes))
	for i, c := range s.mix.Classes {
		urls[i] = base.JoinPath(c.Name).String()
	}
	classes := rng.New(rng.Mix64(s.seed))
	targeter := func(t *vegeta.Target) error {
		name := s.mix.Pick(classes.Float64()).Name
		t.Method = http.MethodGet
		t.URL = urls[slices.IndexFunc(s.mix.Classes, func(c workload.Class) bool { return c.Name == name })]
		return nil
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     30 * time.Second,
	}
	defer tr.CloseIdleConnections()
	atk := vegeta.NewAttacker(
		vegeta.Client(&http.Client{Transport: tr, Timeout: s.timeout}),
		vegeta.MaxBody(0),
		vegeta.KeepAlive(true),
	)
	t := &tally{load: Load{Statuses: map[string]int64{}}, shedBy: map[string][]time.Duration{}}
	t.start = time.Now()
	t.end = t.start.Add(s.duration)
	var tick func(time.Duration)
	if s.progress != nil {
		tick = func(elapsed time.Duration) { s.progress(min(elapsed, s.duration), s.duration) }
	}
	results := atk.Attack(targeter, loadgen.NewPoisson(s.rate, rng.New(s.seed)), s.duration, "drill")
	loadgen.Collect(ctx, atk, results, t.add, tick)
	return t.finish()
}
