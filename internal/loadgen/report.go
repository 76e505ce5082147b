package loadgen

import (
	"fmt"
	"github.com/corput/corput/internal/latency"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/internal/workload"
)

// RawNote labels a raw run's report.
const RawNote = "RAW THROUGHPUT TEST: tiny uniform responses, throughput only; not evidence for a balancer (" + workload.CodeNoSkew + " applies to any such use)"

// Report is a run's outcome. Latencies are percentiles, never an average:
// p50/p90/p99/max per class and overall, over every answered request
// (whatever its status); a request without an answer (refused, reset, timed
// out) has status "0" and no latency.
type Report struct {
	Target       string           `json:"target"`
	Raw          bool             `json:"raw"`
	Note         string           `json:"note,omitempty"`
	Seed         uint64           `json:"seed"`
	Rate         float64          `json:"rate"`       // asked, per second; 0 = closed loop (raw only)
	DurationS    float64          `json:"duration_s"` // asked
	ElapsedS     float64          `json:"elapsed_s"`  // first request sent to last answer
	Requests     int64            `json:"requests"`
	Answered     int64            `json:"answered"`
	Throughput   float64          `json:"throughput_rps"` // answered / elapsed
	SuccessRatio float64          `json:"success_ratio"`  // 2xx and 3xx / requests
	StatusCodes  map[string]int64 `json:"status_codes"`
	Errors       map[string]int64 `json:"errors,omitempty"` // transport errors by message
	Overall      *Latency         `json:"overall,omitempty"`
	Classes      []ClassReport    `json:"classes,omitempty"`
	// Origins counts answers by the origin that served them (the
	// X-Corput-Origin header of corput's test origins).
	Origins map[string]int64 `json:"origins,omitempty"`
}

// ClassReport is one workload class.
type ClassReport struct {
	Name         string           `json:"name"`
	Percent      float64          `json:"percent"` // asked share
	Requests     int64            `json:"requests"`
	SuccessRatio float64          `json:"success_ratio"`
	StatusCodes  map[string]int64 `json:"status_codes"`
	Latency      Latency          `json:"latency"`
}

// Latency are percentiles in milliseconds (nearest rank).
type Latency = latency.Percentiles

// latencyOf sorts d in place and reads its percentiles.
func latencyOf(d []time.Duration) Latency { return latency.Of(d) }

func ratio(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// Format writes the report as the text `corput load` prints.
func (r Report) Format(w io.Writer) {
	if r.Raw {
		fmt.Fprintln(w, r.Note)
	}
	rate := "closed loop"
	if r.Rate > 0 {
		rate = strconv.FormatFloat(r.Rate, 'g', -1, 64) + " req/s Poisson"
	}
	fmt.Fprintf(w, "target %s, %s for %gs (seed %d)\n", r.Target, rate, r.DurationS, r.Seed)
	fmt.Fprintf(w, "requests %d, answered %d, success %.2f%%, throughput %.1f req/s over %.2fs\n",
		r.Requests, r.Answered, 100*r.SuccessRatio, r.Throughput, r.ElapsedS)
	fmt.Fprintf(w, "status %s\n", Counts(r.StatusCodes))
	for _, msg := range slices.Sorted(maps.Keys(r.Errors)) {
		fmt.Fprintf(w, "error ×%d: %s\n", r.Errors[msg], msg)
	}
	if r.Overall != nil {
		fmt.Fprintf(w, "\n%-10s %7s %9s %8s %9s %9s %9s %9s\n", "class", "share", "requests", "success", "p50 ms", "p90 ms", "p99 ms", "max ms")
		for _, c := range r.Classes {
			row(w, c.Name, fmt.Sprintf("%.1f%%", 100*ratio(c.Requests, r.Requests)), c.Requests, c.SuccessRatio, c.Latency)
		}
		row(w, "overall", "", r.Requests, r.SuccessRatio, *r.Overall)
	}
	if len(r.Origins) > 0 {
		fmt.Fprintf(w, "\norigins %s\n", Counts(r.Origins))
	}
}

func row(w io.Writer, name, share string, n int64, success float64, l Latency) {
	fmt.Fprintf(w, "%-10s %7s %9d %7.2f%%", name, share, n, 100*success)
	for _, v := range []float64{l.P50, l.P90, l.P99, l.Max} {
		if l.Count == 0 {
			fmt.Fprintf(w, " %9s", "-")
		} else {
			fmt.Fprintf(w, " %9.1f", v)
		}
	}
	fmt.Fprintln(w)
}

// Counts formats a tally as "k=v k=v", keys sorted.
func Counts(m map[string]int64) string {
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}
