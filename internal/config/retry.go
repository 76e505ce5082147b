package config

import (
	"net/http"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// inheritRetry completes every route's own retry block with its origin's
// keys: a route writes only what differs (routes[].retry defaults to its
// origin's retry, key by key).
func (c *Config) inheritRetry() {
	for i := range c.Routes {
		rt := &c.Routes[i]
		if rt.Retry == nil {
			continue
		}
		name := rt.Origin
		if len(rt.Split) > 0 {
			name = rt.Split[0].Origin
		}
		base := DefaultOrigin().Retry
		if o, ok := c.Origin(name); ok {
			base = o.Retry
		}
		p := joinIndex("routes", i) + ".retry."
		own := *rt.Retry
		merge := func(m Retry) Retry {
			take := func(key string, set func()) {
				if c.Written(p + key) {
					set()
				}
			}
			take("attempts", func() { m.Attempts = own.Attempts })
			take("budget_percent", func() { m.BudgetPercent = own.BudgetPercent })
			take("on", func() { m.On = own.On })
			take("backoff.base", func() { m.Backoff.Base = own.Backoff.Base })
			take("backoff.max", func() { m.Backoff.Max = own.Backoff.Max })
			take("idempotency_header", func() { m.IdempotencyHeader = own.IdempotencyHeader })
			take("replay_buffer", func() { m.ReplayBuffer = own.ReplayBuffer })
			take("per_try_timeout", func() { m.PerTryTimeout = own.PerTryTimeout })
			return m
		}
		c.splitRetry(i, merge)
		*rt.Retry = merge(base)
	}
}

// checkRetry checks one retry block at p (an origin's or a route's).
func checkRetry(r *reporter, p string, rt Retry, limits Limits) {
	checkRange(r, p+".attempts", rt.Attempts, 0, maxRetryAttempts, "retries after the first try; 1 is the default, 0 turns retries off")
	checkRange(r, p+".budget_percent", rt.BudgetPercent, 0, 100, "20 is the default")
	for i, on := range rt.On {
		ip := joinIndex(p+".on", i)
		checkEnum(r, ip, on, RetryConnectFailure, RetryRefusedStream, Retry502, Retry503, Retry504, RetryGatewayError)
		if slices.Index(rt.On, on) < i {
			r.errorf(ip, "%q is listed twice; list it once", on)
		}
	}
	if rt.onGatewayError() && (slices.Contains(rt.On, Retry502) || slices.Contains(rt.On, Retry503) || slices.Contains(rt.On, Retry504)) {
		r.errorf(p+".on", "gateway-error is 502, 503 and 504 together; list either it or the statuses")
	}
	b := rt.Backoff
	if checkNonNegative(r, p+".backoff.base", b.Base, "25ms") && checkNonNegative(r, p+".backoff.max", b.Max, "250ms") &&
		b.Base > 0 && b.Max > 0 && b.Max < b.Base {
		r.errorf(p+".backoff.max", "%v is below backoff.base (%v); the cap of the jittered wait is at least its base, e.g. max: 10× base", b.Max, b.Base)
	}
	if h := rt.IdempotencyHeader; h != "" && !httpguts.ValidHeaderFieldName(h) {
		r.errorf(p+".idempotency_header", "%q is not a header field name; write one such as Idempotency-Key", h)
	}
	switch n := rt.ReplayBuffer; {
	case n < 0:
		r.errorf(p+".replay_buffer", "%d: an unbounded replay buffer is refused (INV-LB-05); give a size in bytes up to %d, e.g. 65536, or 0 to keep no body", n, MaxReplayBuffer)
	case n > MaxReplayBuffer:
		r.errorf(p+".replay_buffer", "%d is over %d bytes; a larger body is better not replayed, e.g. 65536", n, MaxReplayBuffer)
	case n > limits.ReplayBuffersBytes && limits.ReplayBuffersBytes > 0:
		r.errorf(p+".replay_buffer", "%d is over limits.replay_buffers_bytes (%d), the bound of all replay buffers together; lower it or raise the limit", n, limits.ReplayBuffersBytes)
	}
}

// onGatewayError reports whether retry.on lists gateway-error.
func (rt Retry) onGatewayError() bool { return slices.Contains(rt.On, RetryGatewayError) }

// ReplaysSent reports whether the rules replay a request that may have
// reached an origin: a broken connection or an origin's 5xx.
func (rt Retry) ReplaysSent() bool {
	if rt.Attempts == 0 {
		return false
	}
	for _, on := range rt.On {
		if on != RetryRefusedStream {
			return true
		}
	}
	return false
}

// checkLimits checks the gateway-wide limits.
func (c *Config) checkLimits(r *reporter) {
	if n := c.Limits.ReplayBuffersBytes; n <= 0 || n > MaxReplayBuffersBytes {
		r.errorf("limits.replay_buffers_bytes", "%d: all replay buffers together need a bound (INV-LB-05); give 1 to %d bytes, e.g. %d", n, MaxReplayBuffersBytes, DefaultReplayBuffersBytes)
	}
}

// checkRouteRetry checks route i's own retry block: its keys, and that a
// route whose path serves only methods that are not idempotent does not
// replay sent requests without an idempotency header.
func (c *Config) checkRouteRetry(r *reporter, i int) {
	rt := c.Routes[i]
	if rt.Retry == nil {
		return
	}
	p := joinIndex("routes", i) + ".retry"
	checkRetry(r, p, *rt.Retry, c.Limits)
	for t, name := range rt.Origins() {
		if o := c.originNamed(name); o != nil {
			checkPerTry(r, p+".per_try_timeout", c.TargetRetry(i, t).PerTryTimeout, rt.Timeouts.Over(o.Timeouts).Request, "the route's timeouts.request")
		}
	}
	if rt.Class == "" || c.Workload == nil || !rt.Retry.ReplaysSent() || rt.Retry.IdempotencyHeader != "" {
		return
	}
	k, ok := c.Workload.Index(rt.Class)
	if !ok || c.Workload.Classes[k].Match == nil {
		return
	}
	ms := c.Workload.Classes[k].Match.Methods
	if len(ms) == 0 || slices.ContainsFunc(ms, idempotentMethod) {
		return
	}
	r.errorf(p+".on", "replays sent requests, and the route's class %s matches only %s, which is not idempotent: such a request is never replayed without a key; set retry.idempotency_header (e.g. Idempotency-Key) so that keyed requests are, or keep retry.on to connect-failure and refused-stream", rt.Class, strings.Join(ms, ", "))
}

// idempotentMethod is RFC 9110 §9.2.2's list.
func idempotentMethod(m string) bool {
	switch strings.ToUpper(m) {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}
