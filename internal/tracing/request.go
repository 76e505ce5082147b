package tracing

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
)

// corput's own span attributes.
const (
	AttrOrigin    = attribute.Key("corput.origin")
	AttrEndpoint  = attribute.Key("corput.endpoint")
	AttrLoop      = attribute.Key("corput.loop")
	AttrAttempt   = attribute.Key("corput.attempt")  // a client span's: 1 for the first attempt
	AttrAttempts  = attribute.Key("corput.attempts") // the server span's: the attempts the request made
	AttrReason    = attribute.Key("corput.reason")   // the gateway's error reason (X-Corput-Error)
	AttrQueueWait = attribute.Key("corput.queue_wait_ms")
	AttrOutcome   = attribute.Key("corput.outcome")    // how an attempt ended: delivered, again, answer, gone
	AttrLimit     = attribute.Key("corput.limit")      // the time limit that ended an attempt's exchange (forward.Limit)
	AttrRequestID = attribute.Key("corput.request_id") // the server span's: the request's id (downstream.request_id)
)

// Request is one downstream request's spans: its server span and the
// client span of its current attempt. A serving path keeps one per request
// (the fast path one per connection, reused) and passes its address to
// Begin and the origin's Forward, or nil with tracing off: every method of
// a nil *Request does nothing.
//
// A request that is not recorded (unsampled, or sampled and shed because
// the export queue is full) has no SDK span at all: its ids come from the
// Request's own source and its traceparent is written into parent, so it
// allocates nothing.
type Request struct {
	t       *Tracer         // nil before Begin and after End
	ctx     context.Context // the server span's, when recorded
	server  trace.Span      // nil: the request is not recorded
	client  trace.Span      // the current attempt's, when recorded
	tid     trace.TraceID
	state   trace.TraceState // a trusted parent's tracestate
	sampled bool             // the trace's sampled flag, sent upstream
	open    bool             // an attempt is open: parent is its traceparent
	method  string
	path    string
	picked  time.Time // the current attempt's endpoint was picked
	parent  [55]byte  // the current attempt's traceparent
	ids     ids       // kept across requests: the connection's id source
}

// Inbound is what a server span says of the request as received.
type Inbound struct {
	Method, Path, Host string
	Peer               string // the client's address, host:port
	TLS                bool
	Proto              string // "1.1" or "2"
	// RequestID is the request's id (downstream.request_id), "" for none:
	// the server span's corput.request_id.
	RequestID string
}

// Begin starts r's server span for a request with head h (its fields by
// lower-case name). trusted: the peer is a trusted proxy, whose
// traceparent and tracestate are the span's parent, its sampled flag
// deciding; from anyone else the request starts a new trace, sampled by
// sample_ratio on its trace id. A sampled span is recorded only while the
// export queue has room. in's strings may be views of a buffer: what the
// span keeps is copied.
func (t *Tracer) Begin(r *Request, h forward.Prior, trusted bool, in Inbound) {
	*r = Request{t: t, ids: r.ids}
	var psc trace.SpanContext
	if trusted {
		psc = remoteParent(h)
	}
	if psc.IsValid() {
		r.tid, r.sampled, r.state = psc.TraceID(), psc.IsSampled(), psc.TraceState()
	} else {
		r.tid = r.ids.traceID()
		r.sampled = t.ratio.sampled(r.tid)
	}
	if !r.sampled || !t.q.room() {
		return
	}
	ctx := context.Background()
	if psc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, psc)
	} else {
		ctx = context.WithValue(ctx, rootKey{}, r.tid)
	}
	r.ctx, r.server = t.tracer.Start(ctx, spanName(in.Method), trace.WithSpanKind(trace.SpanKindServer))
	r.method, r.path = strings.Clone(in.Method), strings.Clone(in.Path)
	scheme := "http"
	if in.TLS {
		scheme = "https"
	}
	host, hp := port(in.Host)
	peer, pp := port(in.Peer)
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(r.method), semconv.URLPath(r.path), semconv.URLScheme(scheme),
		semconv.ServerAddress(strings.Clone(host)), semconv.ClientAddress(peer), semconv.NetworkPeerAddress(peer),
		semconv.NetworkProtocolVersion(in.Proto),
	}
	if hp > 0 {
		attrs = append(attrs, semconv.ServerPort(hp))
	}
	if pp > 0 {
		attrs = append(attrs, semconv.NetworkPeerPort(pp))
	}
	if in.RequestID != "" {
		attrs = append(attrs, AttrRequestID.String(strings.Clone(in.RequestID)))
	}
	r.server.SetAttributes(attrs...)
}

// spanName is an HTTP span's name: its method (the semantic conventions'
// name when no route template is known), or HTTP for a method they do not
// list.
// method may be a view of a buffer: the name is always a constant.
func spanName(method string) string {
	for _, m := range knownMethods {
		if method == m {
			return m
		}
	}
	return "HTTP"
}

var knownMethods = [...]string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// StartAttempt starts the client span of an attempt to endpoint (host:port)
// of origin, through loop; attempt counts from 1. It is recorded only when
// the server span is and the export queue has room; either way its
// traceparent (sampled as the trace is) goes upstream, and a sampled span
// not recorded is counted as dropped.
func (r *Request) StartAttempt(origin string, loop, attempt int, endpoint string) {
	if r == nil {
		return
	}
	if r.client != nil {
		r.client.End() // not reached: EndAttempt ends every attempt
		r.client = nil
	}
	r.open = true
	switch {
	case r.server == nil:
		if r.sampled {
			r.t.q.drop() // shed at Begin: so is each of its spans
		}
	case r.t.q.room():
		r.startClient(origin, loop, attempt, endpoint)
		return
	}
	formatParent(&r.parent, r.tid, r.ids.spanID(), r.sampled)
}

// startClient starts the recorded client span of StartAttempt.
func (r *Request) startClient(origin string, loop, attempt int, endpoint string) {
	_, r.client = r.t.tracer.Start(r.ctx, spanName(r.method), trace.WithSpanKind(trace.SpanKindClient))
	formatParent(&r.parent, r.tid, r.client.SpanContext().SpanID(), true)
	r.picked = time.Now()
	host, p := port(endpoint)
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(r.method), semconv.URLPath(r.path),
		semconv.ServerAddress(host), semconv.NetworkPeerAddress(host),
		AttrOrigin.String(origin), AttrEndpoint.String(endpoint), AttrLoop.Int(loop), AttrAttempt.Int(attempt),
	}
	if p > 0 {
		attrs = append(attrs, semconv.ServerPort(p), semconv.NetworkPeerPort(p))
	}
	r.client.SetAttributes(attrs...)
}

// Acquired notes that the attempt holds a stream (or gave up waiting for
// one): the wait since the pick is its queue wait.
func (r *Request) Acquired() {
	if r == nil || r.client == nil {
		return
	}
	r.client.SetAttributes(AttrQueueWait.Float64(float64(time.Since(r.picked)) / float64(time.Millisecond)))
}

// Fields calls set with the trace context fields of the current attempt's
// request: traceparent, and tracestate when the trace has one. Its caller
// writes them in place of the client's own.
func (r *Request) Fields(set func(name string, value []byte)) {
	if r == nil || !r.open {
		return
	}
	set("Traceparent", r.parent[:])
	if r.state.Len() > 0 {
		s := r.state.String()
		set("Tracestate", unsafe.Slice(unsafe.StringData(s), len(s)))
	}
}

// IsTraceField reports whether a field name (any case) is one Fields
// writes: with tracing on, the client's own are not forwarded.
func IsTraceField(name []byte) bool {
	return h1.EqFold(name, "traceparent") || h1.EqFold(name, "tracestate")
}

// EndAttempt ends the current attempt's client span with a's outcome: the
// step it ended with, its response's status, and the reason of a failure.
func (r *Request) EndAttempt(a *forward.Attempt, step forward.Step) {
	if r == nil || !r.open {
		return
	}
	sp := r.client
	r.open, r.client = false, nil
	if sp == nil {
		return
	}
	status := a.Status()
	if status > 0 {
		sp.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	sp.SetAttributes(AttrOutcome.String(step.String()))
	if l := a.Limit(); l != forward.NoLimit {
		sp.SetAttributes(AttrLimit.String(l.String()))
	}
	switch {
	case step == forward.Again || step == forward.Answer:
		reason := a.Reason().String()
		sp.SetAttributes(AttrReason.String(reason), semconv.ErrorTypeKey.String(reason))
		sp.SetStatus(codes.Error, reason)
	case step == forward.Gone:
		sp.SetStatus(codes.Error, "the client left")
	case status >= 400:
		sp.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		sp.SetStatus(codes.Error, "")
	}
	sp.End()
}

// End ends the server span: the status answered (499 when the client
// left), the gateway's own reason (None when the origin answered), and
// where the request went (origin "" and loop -1 when it was routed
// nowhere). A client span still open (a response that broke mid-body) ends
// first.
func (r *Request) End(status int, reason forward.Reason, origin string, loop, attempts int) {
	if r == nil || r.t == nil {
		return
	}
	if r.client != nil {
		r.client.SetStatus(codes.Error, "the response broke")
		r.client.End()
	}
	if sp := r.server; sp != nil {
		sp.SetAttributes(semconv.HTTPResponseStatusCode(status), AttrAttempts.Int(attempts))
		if origin != "" {
			sp.SetAttributes(AttrOrigin.String(origin), AttrLoop.Int(loop))
		}
		if reason != forward.None {
			sp.SetAttributes(AttrReason.String(reason.String()), semconv.ErrorTypeKey.String(reason.String()))
		}
		if status >= 500 {
			sp.SetStatus(codes.Error, reason.String())
		}
		sp.End()
	}
	*r = Request{ids: r.ids}
}

// TraceID is the request's trace id (zero before Begin and after End).
func (r *Request) TraceID() trace.TraceID {
	if r == nil {
		return trace.TraceID{}
	}
	return r.tid
}
