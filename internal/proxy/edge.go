package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/corput/corput/internal/addrrule"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/ratelimit"
)

// Edge is a route's admission at the ingress edge: its address rules and
// its rate limit, checked before any upstream work.
type Edge struct {
	Rules addrrule.Rules
	// Limit is the route's rate limit; nil: none.
	Limit *ratelimit.Limiter
	// KeyAddr keys Limit by the client's address; else Header, when not
	// empty, names (lower case) the request header whose value keys it;
	// else the route has one bucket.
	KeyAddr bool
	Header  string
	// Denied and Limited count the route's refusals
	// (corput_requests_refused_total).
	Denied, Limited prometheus.Counter
}

// Listener is the listener's own admission: its address rules, and the
// count of their refusals.
type Listener struct {
	Rules  addrrule.Rules
	Denied prometheus.Counter
}

// admit decides a routed request at the edge: the listener's address
// rules, then the route's, then its rate limit. It allocates nothing.
func (t *Table) admit(e *Edge, in *Inbound) forward.Reason {
	if !t.Listener.Rules.Empty() && !t.Listener.Rules.Allows(in.Peer.Client(in.Head)) {
		t.Listener.Denied.Inc()
		return forward.AddressDenied
	}
	if e == nil {
		return forward.None
	}
	if !e.Rules.Empty() && !e.Rules.Allows(in.Peer.Client(in.Head)) {
		e.Denied.Inc()
		return forward.AddressDenied
	}
	if e.Limit == nil {
		return forward.None
	}
	var ok bool
	switch {
	case e.KeyAddr:
		ok = e.Limit.AllowAddr(in.Peer.Client(in.Head))
	case e.Header != "":
		v, _ := in.Head.Value(e.Header, 0)
		ok = e.Limit.AllowBytes(v)
	default:
		ok = e.Limit.Allow()
	}
	if !ok {
		e.Limited.Inc()
		return forward.RateLimited
	}
	return forward.None
}
