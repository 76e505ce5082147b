package cluster

import (
	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
)

// Begin starts a's request on loop ol under pol (Policy's, or a route's
// own: RoutePolicy) (r: what of it may be sent again; cost: its workload
// class's cost, 1 when it has none; key: its key, Key's, for a sticky
// origin). Finish ends it.
func (o *Origin) Begin(a *forward.Attempt, ol *Loop, pol *forward.Policy, r forward.Replay, cost float64, key balance.Key) {
	o.m.requests[ol.idx].Inc()
	o.drv.Begin(ol.idx)
	a.Start(pol, ol.picker, r, cost, key)
}

// Policy is the origin's retry policy in force: every route's to it but
// one with its own.
func (o *Origin) Policy() *forward.Policy { return o.policy.Load() }

// RoutePolicy is the retry policy of a route to o with its own retry rules
// (routes[].retry): o's clock and metrics, a budget of its own.
func (o *Origin) RoutePolicy(r config.Retry) *forward.Policy { return o.newPolicy(r) }

// Key is the key of a request with fields f from peer p when the origin
// is sticky (balancer.hash_on), else the zero Key. It allocates nothing
// on the fast path's head.
func (o *Origin) Key(f forward.Prior, p forward.Peer) balance.Key {
	if ks := o.keys.Load(); ks != nil {
		return ks.Key(f, p)
	}
	return balance.Key{}
}

// NewCookie is the key cookie of a request that has none (Key's zero
// Key) when the origin sets one (balancer.cookie): the Set-Cookie value
// appended to dst and the key to place the request by
// (forward.KeySource.NewCookie); ok false otherwise.
func (o *Origin) NewCookie(dst []byte) ([]byte, balance.Key, bool) {
	if ks := o.keys.Load(); ks != nil {
		return ks.NewCookie(dst)
	}
	return dst, balance.Key{}, false
}

// Sticky reports whether the origin routes requests by a key.
func (o *Origin) Sticky() bool { return o.keys.Load() != nil }

// keySource is oc's key source, nil when its policy is not sticky.
func keySource(oc *config.Origin) *forward.KeySource {
	if !oc.Balancer.Sticky() {
		return nil
	}
	h, err := config.ParseHashOn(oc.Balancer.HashOn)
	if err != nil {
		return nil // refused by config validation: not reached
	}
	ks := forward.NewKeySource(h, oc.Balancer.Cookie)
	return &ks
}

// Finish ends a's request on loop ol (forward.Attempt.Finish) and takes it
// off the loop's requests in flight.
func (o *Origin) Finish(a *forward.Attempt, ol *Loop) {
	a.Finish()
	o.drv.Finish(ol.idx)
}
