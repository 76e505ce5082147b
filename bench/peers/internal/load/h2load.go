package load

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/results"
)

// H2loadResult is what a run reads from h2load's output.
type H2loadResult struct {
	RPS      float64
	MeanMS   float64 // mean time for request
	Requests int64   // total
	Errors   int64   // requests that did not succeed (h2load's failed include non-2xx answers)
	Protocol string  // the application protocol it spoke
}

// Result is h as a result row: req/s, the mean request time (h2load
// reports no percentiles), errors and requests.
func (h H2loadResult) Result() results.Result {
	return results.Result{RPS: h.RPS, MeanMS: h.MeanMS, Errors: h.Errors, Requests: h.Requests}
}

// H2load runs h2load -c1 -mM -nN against url (h2c by prior knowledge for
// an http:// URL) and checks it spoke h2c.
func H2load(ctx context.Context, url string, streams, n int) (H2loadResult, error) {
	out, err := command(ctx, "h2load", "-c1", "-m"+strconv.Itoa(streams), "-n"+strconv.Itoa(n), url)
	if err != nil {
		return H2loadResult{}, err
	}
	r, err := parseH2load(out)
	if err == nil && r.Protocol != "h2c" {
		err = fmt.Errorf("h2load spoke %q, not h2c: %s", r.Protocol, proc.LastLines(out, 5))
	}
	return r, err
}

// parseH2load reads h2load's summary:
//
//	Application protocol: h2c
//	finished in 7.05s, 5673.21 req/s, 1.23MB/s
//	requests: 40000 total, 40000 started, 40000 done, 39990 succeeded, 10 failed, 0 errored, 0 timeout
//	status codes: 39990 2xx, 0 3xx, 0 4xx, 0 5xx
//	time for request:    15.33ms     16.67ms     15.67ms       169us    70.00%
func parseH2load(out string) (H2loadResult, error) {
	var r H2loadResult
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
			v, err := parseDuration(f[5])
			if err != nil {
				return r, fmt.Errorf("h2load: mean %q: %w", f[5], err)
			}
			r.MeanMS = v
		}
	}
	if !haveRPS || !haveReqs {
		return r, fmt.Errorf("h2load: no req/s or requests line in its output: %s", proc.LastLines(out, 5))
	}
	return r, nil
}
