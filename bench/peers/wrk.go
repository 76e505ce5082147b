package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what the raw test reads from wrk's output.
type wrkResult struct {
	RPS      float64
	P50MS    float64
	P99MS    float64
	Errors   int64 // socket errors and non-2xx/3xx answers
	Requests int64 // the requests wrk completed ("N requests in ..."); 0 when it printed none
}

// runWrk runs wrk -t2 -cN -dD --latency against url.
func runWrk(ctx context.Context, url string, conns int, d time.Duration) (wrkResult, string, error) {
	args := []string{"-t2", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(d/time.Second)) + "s", "--latency", url}
	out, err := exec.CommandContext(ctx, "wrk", args...).CombinedOutput()
	if err != nil {
		return wrkResult{}, string(out), fmt.Errorf("wrk %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	r, err := parseWrk(string(out))
	return r, string(out), err
}

// parseWrk reads Requests/sec, the requests completed, the 50 % and 99 %
// latencies and the error counts of wrk's --latency output.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
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
			v, err := parseWrkDuration(f[1])
			if err != nil {
				return r, err
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
		return r, fmt.Errorf("wrk: no Requests/sec or 99%% latency in its output (was --latency given?): %s", lastLines(out, 5))
	}
	return r, nil
}

// parseWrkDuration reads wrk's latency cells: 812.00us, 1.53ms, 2.01s,
// 1.00m.
func parseWrkDuration(s string) (float64, error) {
	units := []struct {
		suffix string
		ms     float64
	}{{"us", 1e-3}, {"ms", 1}, {"m", 60e3}, {"s", 1e3}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("wrk: latency %q: %w", s, err)
			}
			return v * u.ms, nil
		}
	}
	return 0, fmt.Errorf("wrk: latency %q: unknown unit", s)
}
