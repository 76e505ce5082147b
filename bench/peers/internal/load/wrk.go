// Package load drives the proxies under test and measures what it sees:
// wrk and h2load (run as commands, their output parsed), the open-loop
// raw generator, the h2c client that holds streams open, and the openssl
// probe that says what a TLS handshake negotiated.
//
// Invariants:
//   - A client's figure is what the client saw; nothing here reads a
//     proxy's or an origin's own counters.
//   - The open-loop generator times every request from its scheduled
//     arrival (no coordinated omission), allocates nothing per request,
//     and sends exactly the seeded Poisson schedule's arrivals that fall
//     inside the run.
//   - A command's output that lacks the figures asked for is an error
//     that quotes the output's end, never a zero read as a measurement.
package load

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/results"
)

// WrkResult is what a run reads from wrk's output.
type WrkResult struct {
	RPS      float64
	P50MS    float64
	P99MS    float64
	Errors   int64 // socket errors and non-2xx/3xx answers
	Requests int64 // the requests wrk completed ("N requests in ..."); 0 when it printed none
}

// Result is w as a result row: req/s, p50, p99 and errors.
func (w WrkResult) Result() results.Result {
	return results.Result{RPS: w.RPS, P50MS: w.P50MS, P99MS: w.P99MS, Errors: w.Errors}
}

// Wrk runs wrk -t2 -cN -dD --latency against url.
func Wrk(ctx context.Context, url string, conns int, d time.Duration) (WrkResult, error) {
	out, err := command(ctx, "wrk", "-t2", "-c"+strconv.Itoa(conns), "-d"+strconv.Itoa(int(d/time.Second))+"s", "--latency", url)
	if err != nil {
		return WrkResult{}, err
	}
	return parseWrk(out)
}

// command runs argv (its input the null device) and returns what it
// wrote; a failure is an error that quotes the command line and the end
// of its output.
func command(ctx context.Context, argv ...string) (string, error) {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, proc.LastLines(string(out), 5))
	}
	return string(out), nil
}

// parseWrk reads Requests/sec, the requests completed, the 50 % and 99 %
// latencies and the error counts of wrk's --latency output.
func parseWrk(out string) (WrkResult, error) {
	var r WrkResult
	var haveRPS, have99 bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("wrk: Requests/sec %q: %w", f[1], err)
			}
			r.RPS, haveRPS = v, true
		case len(f) == 2 && (f[0] == "50%" || f[0] == "99%"):
			v, err := parseDuration(f[1])
			if err != nil {
				return r, fmt.Errorf("wrk: %w", err)
			}
			if f[0] == "50%" {
				r.P50MS = v
			} else {
				r.P99MS, have99 = v, true
			}
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			// 209420 requests in 10.00s, 25.36MB read
			r.Requests, _ = strconv.ParseInt(f[0], 10, 64)
		case len(f) >= 2 && f[0] == "Socket" && f[1] == "errors:":
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 2; i+1 < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i+1], ","), 10, 64)
				r.Errors += n
			}
		case len(f) >= 5 && f[0] == "Non-2xx":
			// Non-2xx or 3xx responses: N
			n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
			r.Errors += n
		}
	}
	if !haveRPS || !have99 {
		return r, fmt.Errorf("wrk: no Requests/sec or 99%% latency in its output (was --latency given?): %s", proc.LastLines(out, 5))
	}
	return r, nil
}

// parseDuration reads the latency cells wrk and h2load print, in
// milliseconds: 812.00us, 1.53ms, 2.01s, 1.00m.
func parseDuration(s string) (float64, error) {
	units := []struct {
		suffix string
		ms     float64
	}{{"us", 1e-3}, {"ms", 1}, {"m", 60e3}, {"s", 1e3}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("latency %q: %w", s, err)
			}
			return v * u.ms, nil
		}
	}
	return 0, fmt.Errorf("latency %q: unknown unit", s)
}

// percentile is the q quantile of sorted latencies, in milliseconds.
func percentile(sorted []time.Duration, q float64) float64 {
	i := int(float64(len(sorted))*q+0.999999999) - 1
	return msOf(sorted[min(max(i, 0), len(sorted)-1)])
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
