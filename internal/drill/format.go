package drill

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/corput/corput/internal/loadgen"
)

// Format writes r as the text `corput drill` prints.
func (r *Result) Format(w io.Writer) {
	s := r.Setup
	fmt.Fprintf(w, "drill %s: %s\n", r.Drill, Summary(r.Drill))
	fmt.Fprintf(w, "command: %s\n", r.Command)
	if fl := r.Flood; fl != nil {
		fmt.Fprintf(w, "setup: %s (%s), 1 origin, 2 loops; flood held %gs\n", s.Gateway, s.Path, s.DurationS)
		fmt.Fprintf(w, "\nflood: %d connections against %d descriptors: %d answered 503 fd_limit at once, %d held unanswered, %d closed unanswered\n",
			fl.Conns, fl.Limit, fl.Shed, fl.Held, fl.Closed)
		fmt.Fprintf(w, "after: %s; accept errors %v; /readyz %d, /healthz %d; exit %d\n",
			strings.Join(fl.After, " "), fl.AcceptErrors, fl.Ready, fl.Live, fl.ExitCode)
		for _, line := range fl.Logged {
			fmt.Fprintf(w, "log: %s\n", line)
		}
		r.formatChecks(w)
		return
	}
	workers := "unlimited"
	if s.Workers > 0 {
		workers = fmt.Sprint(s.Workers)
		if s.CapacityRPS > 0 {
			workers += fmt.Sprintf(" (capacity %.0f req/s)", s.CapacityRPS)
		}
	}
	fmt.Fprintf(w, "setup: %s; %d origins, workers %s, %d loops; %.0f req/s Poisson for %gs; request timeout %s, client gives up after %s\n",
		s.Path, s.Origins, workers, s.Loops, s.Rate, s.DurationS, s.RequestTimeout, s.ClientTimeout)
	for _, f := range r.Faults {
		fmt.Fprintf(w, "fault at %5.2fs: %s\n", f.AtS, f.What)
	}
	l := r.Load
	fmt.Fprintf(w, "\nrequests %d, answered %d, lost %d, 2xx %d (%.3f%%), goodput %.0f req/s\n",
		l.Sent, l.Answered, l.Lost, l.OK, 100*l.SuccessRatio, l.GoodputRPS)
	fmt.Fprintf(w, "statuses %s\n", loadgen.Counts(l.Statuses))
	if len(l.Reasons) > 0 {
		fmt.Fprintf(w, "gateway reasons %s\n", loadgen.Counts(l.Reasons))
	}
	for _, e := range slices.Sorted(maps.Keys(l.Errors)) {
		fmt.Fprintf(w, "lost ×%d: %s\n", l.Errors[e], e)
	}
	fmt.Fprintf(w, "\n%-22s %7s %9s %9s %9s %9s\n", "latency", "count", "p50 ms", "p90 ms", "p99 ms", "max ms")
	row(w, "all answers", l.Latency)
	row(w, "2xx", l.OKLatency)
	row(w, "shed 503", l.Shed)
	for _, reason := range slices.Sorted(maps.Keys(l.ShedBy)) {
		row(w, "  "+reason, l.ShedBy[reason])
	}
	g := r.Gateway
	fmt.Fprintf(w, "\ngateway: max pending %d, max pool waiters %d, max in flight per endpoint %d; connections created %d, failed dials %d; origins served %d\n",
		g.MaxPending, g.MaxPoolWaiters, g.MaxActive, g.ConnectionsCreated, g.DialFailures, g.OriginServed)
	for _, a := range slices.Sorted(maps.Keys(g.Ejected)) {
		fmt.Fprintf(w, "ejected %s at %.2fs\n", a, g.Ejected[a])
	}
	if d := r.Deploy; d != nil {
		fmt.Fprintf(w, "\nreconnects after %d restarts (each down %.0f ms), spike window %.0f ms:\n", d.Restarts, d.GapMs, d.WindowMs)
		fmt.Fprintf(w, "%-10s %8s %8s %8s %12s %8s %10s\n", "", "requests", "errors", "error %", "reconnected", "spike", "spread ms")
		for _, a := range []struct {
			name string
			arm  Arm
		}{{"jitter", d.Jitter}, {"no jitter", d.NoJitter}} {
			fmt.Fprintf(w, "%-10s %8d %8d %8.3f %12d %8d %10.0f  %s\n", a.name, a.arm.Sent, a.arm.Errors, 100*a.arm.ErrorRatio, a.arm.Reconnected, a.arm.Spike, a.arm.SpreadMs, loadgen.Counts(a.arm.Reasons))
		}
	}
	p := r.Process
	fmt.Fprintf(w, "\nprocess: goroutines %d → peak %d → %d, fds %d → peak %d → %d, peak RSS %.0f MiB (heap %.0f MiB)\n",
		p.GoroutinesBefore, p.GoroutinesPeak, p.GoroutinesAfter, p.FDsBefore, p.FDsPeak, p.FDsAfter, p.PeakRSSMiB, p.PeakHeapMiB)
	r.formatChecks(w)
}

func (r *Result) formatChecks(w io.Writer) {
	fmt.Fprintln(w, "\nchecks:")
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		note := ""
		if c.Machine {
			note = " (machine-dependent)"
		}
		fmt.Fprintf(w, "  %s %s%s: want %s; got %s\n", mark, c.Name, note, c.Want, c.Got)
	}
}

func row(w io.Writer, name string, p Percentiles) {
	if p.Count == 0 {
		fmt.Fprintf(w, "%-22s %7d %9s %9s %9s %9s\n", name, 0, "-", "-", "-", "-")
		return
	}
	fmt.Fprintf(w, "%-22s %7d %9.2f %9.2f %9.2f %9.2f\n", name, p.Count, p.P50, p.P90, p.P99, p.Max)
}
