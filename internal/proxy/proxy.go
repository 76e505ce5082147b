// Package proxy is one client request through the gateway, whichever
// serving path read it (the fast path, or net/http's handler): its route,
// the SLO guard's admission, a loop (package dispatch's placement), the
// sticky key, its attempts — each a stream acquired by the origin's
// driver and an exchange (package exchange) — then the gateway's own
// answer when no origin's was relayed, the trace, the count of requests
// served and the access log line.
//
// A serving path holds the request its own way and writes the answer its
// own way; it gives this package the request's facts (Inbound) and one
// small interface (Client: exchange.Client, and the request as the
// exchange sends it). Everything else about a request is written here
// once.
//
// Invariants:
//   - Every request ends in exactly one count of corput_downstream_requests_total
//     (by its status), at most one access-log line (when sampled) and, when
//     tracing, one server span with a client span per attempt.
//   - A request's attempts are package forward's decisions: Serve only
//     runs them (the driver's acquisition, then the exchange) and stops on
//     the step that ends the request.
//   - The gateway's own answer (Answer) is the same bytes whichever path
//     writes it: the reason's status, its fields (X-Corput-Error,
//     Retry-After), its body and Content-Length, the body left out for a
//     HEAD request. A gRPC client (Content-Type application/grpc, +proto,
//     ...) gets it as gRPC's trailers-only answer instead: 200, no body,
//     grpc-status and grpc-message from the reason, the same
//     X-Corput-Error and Retry-After (AnswerGRPC).
//   - A request refused at the edge (403 address_denied, 429
//     rate_limited) is refused before the SLO guard, a loop or any
//     upstream work, and counted by route; the listener's address rules
//     come before the route's, and before 404 no_route.
//   - A request of a route with a mirror (routes[].mirror, mirror.go) is
//     sampled by one random draw; a sampled one is also sent to the shadow
//     origin once it is done, without the primary ever waiting for it.
//   - A route that answers itself (route.Route.Redirect or Answer) is
//     answered right after the edge admitted the request (direct.go): no
//     SLO admission, no loop, no origin; counted, traced and logged with
//     no origin and no reason.
//   - A request's id (downstream.request_id) and its route's rewrites and
//     header edits are applied here, by package edit, to the request the
//     Client readied and (as the exchange's Editor) to the response head:
//     once, for both serving paths.
//   - With a Stream kept per client connection, Serve allocates nothing
//     (bench/hotpath): the table is read with one atomic load, and the
//     access log copies a sampled request's fields into its ring.
package proxy

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/dispatch"
	"github.com/corput/corput/internal/edit"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/replay"
	"github.com/corput/corput/internal/route"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/tracing"
	"github.com/corput/corput/internal/workload"
)

// Table is what requests read of the configuration in force. A reload
// publishes a new one whole (Handler.Publish); requests read it with one
// atomic load.
type Table struct {
	Router     *route.Router
	Classes    *workload.Classifier // the workload's match rules; nil without a workload block
	Origins    map[string]*cluster.Origin
	Forwarding forward.Forwarding
	Tracer     *tracing.Tracer // nil: tracing is off
	// Replays bounds all requests' replay buffers together
	// (limits.replay_buffers_bytes); nil: no gateway-wide bound.
	Replays *replay.Cap
	// Listener is the listener's address rules (downstream.addresses).
	Listener Listener
	// Edges are the routes' admissions, by route.Route.Index; a nil entry
	// (or none) admits everyone.
	Edges []*Edge
	// Mirrors are the routes' mirrorings (routes[].mirror), by
	// route.Route.Index; a nil entry (or none): the route mirrors nothing.
	Mirrors []*Mirror
	// RequestID is downstream.request_id; nil: requests carry no id.
	RequestID *edit.RequestID
}

// Route returns the origin for a request, and the request's kind (its
// workload class and cost, its route's priority) and edge admission; ok is
// false when no route matches, bad when the request's path cannot be
// normalized (route.Normalize: answered 400 before any route or rule).
func (t *Table) Route(q route.Request) (o *cluster.Origin, k cluster.Kind, e *Edge, ok, bad bool) {
	o, k, e, rt, _, bad := t.lookup(&q)
	return o, k, e, rt != nil, bad
}

// lookup is Route with the route matched (nil for none). It normalizes
// q.Path first: routes, address rules and the workload's classes see the
// normalized path.
func (t *Table) lookup(q *route.Request) (o *cluster.Origin, k cluster.Kind, e *Edge, rt *route.Route, tg *route.Target, bad bool) {
	path, ok := route.Normalize(q.Path)
	if !ok {
		return nil, k, nil, nil, nil, true
	}
	q.Path = path
	rt = t.Router.Lookup(q)
	if rt == nil {
		return nil, k, nil, nil, nil, false
	}
	if rt.Index < len(t.Edges) {
		e = t.Edges[rt.Index]
	}
	k = cluster.Kind{Class: rt.Class, Cost: rt.Cost, Low: rt.Low, Retry: rt.Retry}
	if k.Cost == 0 {
		k.Class, k.Cost = -1, 1
		if c, ok := t.Classes.Classify(q.Method, path); ok {
			k.Class, k.Cost = c, t.Classes.ClassCost(c)
		}
	}
	name := rt.Origin
	if rt.Split != nil {
		tg = rt.Split.Pick(q.Head, q.Peer) // the request's attempts all go to its origin
		name, k.Retry = tg.Origin, tg.Retry
	}
	return t.Origins[name], k, e, rt, tg, false
}

// Handler serves the requests of both serving paths with the table in
// force.
type Handler struct {
	table  atomic.Pointer[Table]
	served [5]prometheus.Counter // by code class 1xx..5xx
	log    *accesslog.Log        // nil: no access log
}

// NewHandler returns a Handler serving with t, counting requests served in
// served (corput_downstream_requests_total by code class) and handing
// sampled ones to log (nil: none).
func NewHandler(t *Table, served [5]prometheus.Counter, log *accesslog.Log) *Handler {
	h := &Handler{served: served, log: log}
	h.table.Store(t)
	return h
}

// Table is the table in force.
func (h *Handler) Table() *Table { return h.table.Load() }

// Publish puts t in force for the requests that start from now on.
func (h *Handler) Publish(t *Table) { h.table.Store(t) }

// Routing is a request's route, read once from the table in force.
type Routing struct {
	Table  *Table
	Origin *cluster.Origin // nil unless OK
	Kind   cluster.Kind
	Edge   *Edge        // the route's admission; nil: none
	OK     bool         // a route matched
	Route  *route.Route // the route matched, nil for none
	// Target is the split target picked when the route has a split
	// (its origin is Origin), else nil.
	Target *route.Target
	// Path is the request's normalized path (route.Normalize), as the
	// route matched it: its rewrites work on it.
	Path string
	// Refuse, when not None, is answered at once: the serving path found
	// the request malformed, or its path could not be normalized
	// (BadRequest), before any route.
	Refuse forward.Reason
}

// Route routes a request with the table in force: by its host, its
// normalized path, its method, fields and query (route.Request, which both
// serving paths fill with views of what they read, without an
// allocation). A path that cannot be normalized is refused (BadRequest).
func (h *Handler) Route(q route.Request) Routing {
	t := h.table.Load()
	o, k, e, r, tg, bad := t.lookup(&q)
	if bad {
		return Routing{Table: t, Refuse: forward.BadRequest}
	}
	return Routing{Table: t, Origin: o, Kind: k, Edge: e, OK: r != nil, Route: r, Target: tg, Path: q.Path}
}

// Fast reports whether the fast path serves the request routed so: its
// origin is served by the fast path, and for a split every target's is
// (else the request is handed to net/http whole, which picks its target
// once).
func (rt *Routing) Fast() bool {
	if rt.Route == nil || rt.Route.Split == nil {
		return rt.Origin.Fast()
	}
	for _, tg := range rt.Route.Split.Targets() {
		if o := rt.Table.Origins[tg.Origin]; o == nil || !o.Fast() {
			return false
		}
	}
	return true
}

// count counts a routed request once, by its route and target
// (corput_route_requests_total).
func (rt *Routing) count() {
	c := rt.Route.Requests
	if rt.Target != nil {
		c = rt.Target.Requests
	}
	if c != nil {
		c.Inc()
	}
}

// Inbound is a client request's facts, as its serving path read them. The
// strings may be views of the connection's buffer, valid during Serve.
type Inbound struct {
	Method, Host, Path, Target string
	Proto                      string // "HTTP/1.1", "HTTP/2.0"
	Client                     string // the peer's address (host:port)
	TLS                        bool
	// Head is the request's fields: the sticky key, the trace context, the
	// access log's Referer and User-Agent and a trusted peer's
	// X-Forwarded-* are read from it.
	Head forward.Prior
	// Peer is the connection's X-Forwarded-* facts (forward.Forwarding.Peer).
	Peer forward.Peer
	// Length is the request body's length (Content-Length; 0 for none), -1
	// when unknown: a longer one than the route's max_request_body_bytes is
	// answered 413 before anything is forwarded.
	Length int64
	// GRPCTimeout is the request's grpc-timeout, 0 for none.
	GRPCTimeout time.Duration
}

// Client is the serving path's side of a request: where its answer goes,
// and the request as its exchanges send it.
type Client interface {
	exchange.Client
	// Request readies the request for origin o, its head rewritten for the
	// origin (hop-by-hop fields out, X-Forwarded-* in, the client's trace
	// context out when s.Tr is set). It is called once a request, after
	// the sticky key was read from the head.
	Request(o *cluster.Origin, s *Stream) *exchange.Request
}

// Stream is one request's state: its attempts, its exchanges' buffers, its
// trace, and what its answer needs. The fast path keeps one per client
// connection, so that its requests allocate nothing; the zero value is
// ready.
type Stream struct {
	attempt forward.Attempt
	x       exchange.State
	trace   tracing.Request
	// Tr is the request's trace while it is traced, else nil.
	Tr *tracing.Request
	// Cookie is the Set-Cookie value of a sticky origin's new key cookie
	// (balancer.cookie) for the answer relayed from the origin, empty for
	// none; the Client writes it with the head.
	Cookie []byte
	// Sent is the answer's body bytes, as the Client wrote them (End,
	// Abort, its own answers): the access log's bytes.
	Sent int64
	// MaxBody is the route's max_request_body_bytes (0: unlimited): the
	// Client's Request bounds a body of unknown length by it
	// (exchange.ErrBodyTooLarge).
	MaxBody int64
	// Durable says the Client keeps the strings of the heads it is given
	// past Serve (net/http's path): the edited values are then allocated
	// (edit.State.Durable).
	Durable bool

	edit edit.State // the request's id and edits

	ans       exchange.Head // the gateway's own answer (Answer)
	ansFields [8]hpack.HeaderField
	// dirFields and loc are a route's own answer's fields and Location
	// (direct), grown once and reused.
	dirFields []hpack.HeaderField
	loc       []byte

	// body is the request body's kept copy, for a retry (made on the
	// first request with a body, then reused); bodyOn: this request has
	// one.
	body   *replay.Body
	bodyOn bool
	stream streamBody // a streaming body's: kept until its first exchange

	// mirror is the request's mirror while its primary is served, nil
	// when it is not sampled; mirrorMax bounds its body.
	mirror    *mirrorJob
	mirrorMax int64
}

// Serve serves one request routed by rt, answering it through c, and
// returns the status it was answered with (499 when the client left
// first). ctx ends a wait for a stream when the client leaves; trust lets
// a request that can go again take an idle HTTP/1.1 connection unprobed
// (the fast path's first attempt: one read saved a request; a closed one
// is Stale and the retry probes).
func (h *Handler) Serve(ctx context.Context, s *Stream, in *Inbound, rt Routing, c Client, trust bool) int {
	logged := h.log.Sample()
	var start time.Time
	if logged {
		start = time.Now()
	}
	s.Sent = 0
	s.Cookie = s.Cookie[:0]
	s.edit.Durable = s.Durable
	s.edit.Begin(rt.Table.RequestID, in.Head, in.Peer.Trusted)
	s.beginTrace(rt.Table.Tracer, in)
	o, loop, reason, status, own := rt.Origin, -1, rt.Refuse, 0, false
	switch {
	case reason != forward.None:
	case !rt.OK:
		reason = forward.NoRoute
		if !rt.Table.Listener.Rules.Empty() {
			reason = rt.Table.admit(nil, in) // a denied client learns nothing of the routes
			if reason == forward.None {
				reason = forward.NoRoute
			}
		}
	default:
		rt.count()
		if reason = rt.Table.admit(rt.Edge, in); reason == forward.None {
			if own = rt.Route.Redirect != nil || rt.Route.Answer != nil; own {
				status = s.direct(c, rt.Route, in, rt.Path) // the route's own answer: no origin
			} else if rt.Route.MaxBody > 0 && in.Length > rt.Route.MaxBody {
				reason = forward.RequestBodyTooLarge // nothing is forwarded
			} else {
				reason = o.Admit(rt.Kind)
			}
		}
	}
	if reason == forward.None && !own {
		ol := o.Place() // a loop per request (docs/decisions.md, "A loop per request")
		loop = ol.Index()
		s.MaxBody = rt.Route.MaxBody
		m := rt.Table.mirrorOf(rt.Route.Index)
		if m != nil && !m.sample() {
			m = nil
		}
		status, reason = s.forward(ctx, in, o, ol, rt.Kind, rt.Route, rt.Path, c, trust, rt.Table.Replays, m)
	}
	if reason != forward.None {
		s.Cookie = s.Cookie[:0]
		status = s.answer(c, reason, in)
	}
	attempts := 0
	if loop >= 0 {
		attempts = s.attempt.Attempts()
		if reason == forward.None && s.attempt.IdleCut() {
			reason = forward.UpstreamIdleTimeout // relayed, then cut: logged and traced so
		}
	}
	s.Tr.End(status, reason, nameOf(o), loop, attempts) // nil with tracing off: nothing
	h.served[telemetry.ClassIndex(status)].Inc()
	if logged {
		h.logRequest(s, in, start, status, o, loop, reason)
	}
	return status
}

// forward runs the request's attempts through loop ol of origin o: each
// acquires a stream (the origin's driver) and makes an exchange on it,
// until one is delivered or the request is answered. It returns the status
// delivered (499 when the client left), or the reason to answer with. A
// request sampled for mirroring (m not nil) hands its mirror off as it
// ends.
func (s *Stream) forward(ctx context.Context, in *Inbound, o *cluster.Origin, ol *cluster.Loop, k cluster.Kind, rt *route.Route, path string, c Client, trust bool, replays *replay.Cap, m *Mirror) (int, forward.Reason) {
	started := o.Started(k)
	key := o.Key(in.Head, in.Peer) // before X-Forwarded-For is rewritten: source_ip reads the peer's
	if !key.Valid() {
		s.Cookie, key, _ = o.NewCookie(s.Cookie)
	}
	req := c.Request(o, s)
	req.Edit = nil // a serving path may keep its Request between requests
	if s.edit.On(rt.Edit) {
		// The request id, the route's rewrites and header edits: the
		// same for both serving paths (package edit).
		s.edit.Request(req, rt.Edit, path, in.Peer.Client(in.Head), o.Name())
	}
	pol := k.Retry
	if pol == nil {
		pol = o.Policy()
	}
	if m != nil {
		s.beginMirror(m, req)
		s.mirrorMax = m.mirrorBody(pol.ReplayBuffer)
	}
	r := s.replay(in, req, pol, replays)
	a := &s.attempt
	o.Begin(a, ol, pol, r, k.Cost, key)
	defer o.Finish(a, ol)
	defer s.endBody()
	if s.mirror != nil {
		defer s.endMirror(req, s.mirrorMax) // before endBody: it takes the body's kept copy
	}
	lim := limitsOf(o, rt)
	var grpcBy time.Time // the request's grpc-timeout: the whole request's, every attempt's
	if g := in.GRPCTimeout; g > 0 {
		if lim.grpcMax > 0 {
			g = min(g, lim.grpcMax)
		}
		grpcBy = time.Now().Add(g)
	}
	step, status := attempts(ctx, o.Driver(), a, ol.Index(), trust, s.Tr, pol, &s.x, req, c, lim, grpcBy, s)
	switch step {
	case forward.Delivered:
		if status != 499 {
			o.Served(k, started)
		}
		return status, forward.None
	case forward.Answer:
		return 0, a.Reason()
	}
	return 499, forward.None // the client left
}

// rewinder readies a request's body for an attempt: from its first byte.
type rewinder interface{ rewind(req *exchange.Request) }

// attempts runs a request's attempts on driver d (loop l) until one ends
// it: each acquires a stream and, given one, sends req on it through c
// (exchange x) within the limits lim (and the request's grpc-timeout,
// grpcBy), its body rewound by b; a step to go again waits the policy's
// backoff. It returns the step that ended the request — Delivered (with
// the status relayed), Answer, or Gone (the client, or ctx, left) — and is
// the one attempt loop of a proxied request and of a mirror.
func attempts(ctx context.Context, d *dispatch.Driver, a *forward.Attempt, l int, trust bool, tr *tracing.Request,
	pol *forward.Policy, x *exchange.State, req *exchange.Request, c exchange.Client, lim limits, grpcBy time.Time, b rewinder) (forward.Step, int) {
	for {
		step, status := d.Acquire(ctx, a, l, trust, tr), 0
		if step == forward.Send {
			lim.set(req, time.Now(), grpcBy)
			b.rewind(req)
			status, step = x.Do(a, req, c)
		}
		tr.EndAttempt(a, step) // nil with tracing off: nothing
		switch step {
		case forward.Again:
			if w := a.Backoff(); w > 0 && !clock.Sleep(ctx, pol.Clock, w) {
				return forward.Gone, 499
			}
		case forward.Delivered, forward.Gone, forward.Answer:
			return step, status
		}
	}
}

// rewind gives the attempt the request's kept body from its first byte
// (for this attempt only); a streaming body is started from here on.
func (s *Stream) rewind(req *exchange.Request) {
	if s.bodyOn {
		req.Body = s.body.Reader()
	}
	s.stream.started = true
}

// beginTrace starts the request's server span when tracing is on (s.Tr is
// then its Request, else nil); its traceparent is a parent only from a
// trusted proxy.
func (s *Stream) beginTrace(t *tracing.Tracer, in *Inbound) {
	s.Tr = nil
	if t == nil {
		return
	}
	s.Tr = &s.trace
	proto := "1.1"
	if in.Proto == "HTTP/2.0" {
		proto = "2"
	}
	t.Begin(s.Tr, in.Head, in.Peer.Trusted, tracing.Inbound{
		Method: in.Method, Path: in.Path, Host: in.Host, Peer: in.Client, TLS: in.TLS, Proto: proto,
		RequestID: s.edit.ID,
	})
}

// logRequest hands the request just served to the access log; the record's
// strings are views the log copies.
func (h *Handler) logRequest(s *Stream, in *Inbound, start time.Time, status int, o *cluster.Origin, loop int, reason forward.Reason) {
	r := accesslog.Record{
		Start: start, Duration: time.Since(start), Client: in.Client,
		Method: in.Method, Host: in.Host, Target: in.Target, Proto: in.Proto,
		Status: status, Bytes: s.Sent, Reason: reason.String(), Loop: loop,
		RequestID: s.edit.ID,
	}
	if v, ok := in.Head.Value("referer", 0); ok {
		r.Referer = h1.View(v)
	}
	if v, ok := in.Head.Value("user-agent", 0); ok {
		r.UserAgent = h1.View(v)
	}
	r.Origin = nameOf(o)
	if loop >= 0 {
		r.Attempts = s.attempt.Attempts()
		r.Limit = s.attempt.Limit().String()
		if ep := s.attempt.LastEndpoint(); ep != nil {
			r.Endpoint = ep.Address()
		}
	}
	h.log.Add(&r)
}

// nameOf is the name of the origin a request was routed to, "" for none.
func nameOf(o *cluster.Origin) string {
	if o == nil {
		return ""
	}
	return o.Name()
}
