package forward

import (
	"strconv"
	"strings"
)

// LoadHeader is ORCA's per-response load report (xDS's
// xds.data.orca.v3.OrcaLoadReport in its text form), as an origin may send
// it.
const LoadHeader = "Endpoint-Load-Metrics"

// ParseLoad reads the cpu_utilization of an endpoint-load-metrics value in
// ORCA's text form, "TEXT cpu_utilization=0.83, mem_utilization=0.4,
// named_metrics.queue=3": comma-separated name=value pairs after "TEXT ";
// other names are skipped. ok is false for another form (JSON, BIN), a
// value without cpu_utilization, or a utilization that is not a number
// ≥ 0. It allocates nothing.
func ParseLoad(v string) (util float64, ok bool) {
	const text = "TEXT "
	if len(v) < len(text) || !strings.EqualFold(v[:len(text)], text) {
		return 0, false
	}
	v = v[len(text):]
	for len(v) > 0 {
		var pair string
		if i := strings.IndexByte(v, ','); i >= 0 {
			pair, v = v[:i], v[i+1:]
		} else {
			pair, v = v, ""
		}
		pair = strings.TrimSpace(pair)
		const name = "cpu_utilization="
		if len(pair) > len(name) && pair[:len(name)] == name {
			f, err := strconv.ParseFloat(pair[len(name):], 64)
			if err != nil || !(f >= 0) {
				return 0, false
			}
			return f, true
		}
	}
	return 0, false
}

// Loaded hands the current attempt's endpoint the load its response
// reports: v is the response's endpoint-load-metrics value, "" for none.
func (a *Attempt) Loaded(v string) {
	if v == "" {
		return
	}
	if util, ok := ParseLoad(v); ok {
		a.ep.ReportLoad(util)
	}
}
