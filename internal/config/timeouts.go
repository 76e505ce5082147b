package config

import "time"

// originNamed is the origin of that name, nil for none.
func (c *Config) originNamed(name string) *Origin {
	for i := range c.Origins {
		if c.Origins[i].Name == name {
			return &c.Origins[i]
		}
	}
	return nil
}

// checkTimeouts checks an origin's time limits (timeouts, and
// retry.per_try_timeout, which bounds what they bound).
func (o *Origin) checkTimeouts(r *reporter, p string) {
	t := o.Timeouts
	checkPositive(r, p+".timeouts.connect", t.Connect, "1s")
	if checkPositive(r, p+".timeouts.response_header", t.ResponseHeader, "15s") && t.Connect > t.ResponseHeader {
		r.errorf(p+".timeouts.connect", "%v is longer than timeouts.response_header (%v); the response-head deadline covers the dial", t.Connect, t.ResponseHeader)
	}
	checkNonNegative(r, p+".timeouts.request", t.Request, "0 (none) or 30s")
	checkNonNegative(r, p+".timeouts.stream_idle", t.StreamIdle, "60s")
	checkNonNegative(r, p+".timeouts.grpc_max", t.GRPCMax, "5m")
	if checkNonNegative(r, p+".retry.per_try_timeout", o.Retry.PerTryTimeout, "2s") {
		checkPerTry(r, p+".retry.per_try_timeout", o.Retry.PerTryTimeout, t.Request, p+".timeouts.request")
	}
}

// checkPerTry refuses a per-try timeout above the whole request's: no
// retry could follow it.
func checkPerTry(r *reporter, p string, perTry, request time.Duration, requestKey string) {
	if perTry > 0 && request > 0 && perTry > request {
		r.errorf(p, "%v is above %s (%v): the request would end before a retry could follow; use a per-try timeout below it, e.g. %v", perTry, requestKey, request, request/3)
	}
}

// check checks a route's overrides against its origin's limits.
func (t *RouteTimeouts) check(r *reporter, p string, o *Origin) {
	checkNonNegative(r, p+".response_header", t.ResponseHeader, "15s")
	checkNonNegative(r, p+".request", t.Request, "30s")
	checkNonNegative(r, p+".stream_idle", t.StreamIdle, "60s")
	checkNonNegative(r, p+".grpc_max", t.GRPCMax, "5m")
	eff := t.Over(o.Timeouts)
	if t.ResponseHeader > 0 && o.Timeouts.Connect > t.ResponseHeader {
		r.errorf(p+".response_header", "%v is shorter than the origin's timeouts.connect (%v); the response-head deadline covers the dial", t.ResponseHeader, o.Timeouts.Connect)
	}
	if t.ResponseHeader > 0 && o.Pool.AcquireTimeout >= t.ResponseHeader {
		r.errorf(p+".response_header", "%v is not longer than the origin's pool.acquire_timeout (%v); a request would time out while still waiting for a connection", t.ResponseHeader, o.Pool.AcquireTimeout)
	}
	if t.Request > 0 {
		checkPerTry(r, p+".request", o.Retry.PerTryTimeout, eff.Request, p+".request")
	}
}

// Over is the origin's limits o with the route's overrides: each key the
// route sets (non-zero) wins.
func (t *RouteTimeouts) Over(o Timeouts) Timeouts {
	if t == nil {
		return o
	}
	if t.ResponseHeader > 0 {
		o.ResponseHeader = t.ResponseHeader
	}
	if t.StreamIdle > 0 {
		o.StreamIdle = t.StreamIdle
	}
	if t.Request > 0 {
		o.Request = t.Request
	}
	if t.GRPCMax > 0 {
		o.GRPCMax = t.GRPCMax
	}
	return o
}
