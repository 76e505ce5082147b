package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/tracing"
	"github.com/corput/corput/internal/upstream"
)

// ServeHTTP forwards one downstream request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil {
		r.TLS, _ = r.Context().Value(tlsKey{}).(*tls.ConnectionState)
	}
	logged := g.alog.Sample()
	var start time.Time
	if logged {
		start = time.Now()
	}
	// One configuration for the whole request, though a reload swaps it
	// meanwhile.
	st := g.st()
	oc := outcome{loop: -1}
	if t := st.tracer; t != nil {
		status := 0
		oc.trace = beginTrace(st, t, r)
		defer func() { oc.trace.End(status, oc.reason, oc.originName(), oc.loop, oc.attempts) }() // a response that broke mid-body panics
		status = g.serve(w, r, st, &oc)
		g.finish(r, start, logged, status, &oc)
		return
	}
	g.finish(r, start, logged, g.serve(w, r, st, &oc), &oc)
}

// finish counts a request served with status and hands it to the access
// log when it was sampled.
func (g *Gateway) finish(r *http.Request, start time.Time, logged bool, status int, oc *outcome) {
	g.served(status)
	if logged {
		g.logRequest(r, start, status, oc)
	}
}

// beginTrace starts a request's server span; its traceparent is a parent
// only from a trusted proxy.
func beginTrace(st *state, t *tracing.Tracer, r *http.Request) *tracing.Request {
	tr := new(tracing.Request)
	proto := "1.1"
	if r.ProtoMajor == 2 {
		proto = "2"
	}
	t.Begin(tr, forward.HeaderFields(r.Header), st.fwd.Peer(r.RemoteAddr, r.TLS != nil).Trusted, tracing.Inbound{
		Method: r.Method, Path: r.URL.Path, Host: r.Host, Peer: r.RemoteAddr, TLS: r.TLS != nil, Proto: proto,
	})
	return tr
}

// outcome is what the access log needs of a request besides its head and
// status.
type outcome struct {
	bytes    int64          // response body bytes written
	reason   forward.Reason // the gateway's own answer's, None when the origin answered
	origin   *cluster.Origin
	loop     int // the loop the request went through, -1 when it was routed nowhere
	attempts int
	endpoint string
	trace    *tracing.Request // nil: tracing is off
	// setCookie is the Set-Cookie value of a sticky origin's new key
	// cookie (balancer.cookie), "" for none.
	setCookie string
}

// originName is the name of the origin the request was routed to, "" for
// none.
func (oc *outcome) originName() string {
	if oc.origin == nil {
		return ""
	}
	return oc.origin.Name()
}

// logRequest hands a request served through net/http to the access log.
func (g *Gateway) logRequest(r *http.Request, start time.Time, status int, oc *outcome) {
	rec := accesslog.Record{
		Start: start, Duration: time.Since(start), Client: r.RemoteAddr,
		Method: r.Method, Host: r.Host, Target: r.RequestURI, Proto: r.Proto,
		Status: status, Bytes: oc.bytes, Referer: r.Header.Get("Referer"), UserAgent: r.Header.Get("User-Agent"),
		Attempts: oc.attempts, Endpoint: oc.endpoint, Reason: oc.reason.String(), Loop: oc.loop, Origin: oc.originName(),
	}
	g.alog.Add(&rec)
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, st *state, oc *outcome) int {
	if badRequest(r) != "" || !prefetchChunked(r) {
		return refuse(w, r, oc)
	}
	if r.ProtoMajor == 1 && len(r.Header["Upgrade"]) > 0 {
		// The framing guard stops at an Upgrade: unless the upgrade
		// happens, the connection carries no further request.
		w.Header().Set("Connection", "close")
	}
	o, k, ok := st.route(r.Method, r.Host, r.URL.Path)
	if !ok {
		return writeError(w, r, forward.NoRoute, oc)
	}
	if reason := o.Admit(k); reason != forward.None {
		oc.origin = o
		return writeError(w, r, reason, oc)
	}
	ol := o.Place() // a loop per request (docs/decisions.md)
	oc.origin, oc.loop = o, ol.Index()
	return g.proxy(w, r, st, o, ol, k, oc)
}

// writeError writes the gateway's own answer for reason, notes it in oc
// and returns its status.
func writeError(w http.ResponseWriter, r *http.Request, reason forward.Reason, oc *outcome) int {
	h := w.Header()
	reason.Fields(func(name, value string) { h.Set(name, value) })
	// The body's length, to a HEAD too (the length a GET would get), as the
	// fast path writes it: net/http would leave it out of a HEAD answer.
	h.Set("Content-Length", strconv.Itoa(len(reason.Body())))
	w.WriteHeader(reason.Status())
	oc.reason = reason
	if r.Method != http.MethodHead {
		n, _ := w.Write([]byte(reason.Body()))
		oc.bytes = int64(n)
	}
	return reason.Status()
}

// refuse answers a malformed request 400 and ends its connection without
// reading the rest of it: its framing cannot be trusted, and a client that
// never finishes the body must not hold the connection open.
func refuse(w http.ResponseWriter, r *http.Request, oc *outcome) int {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	return writeError(w, r, forward.BadRequest, oc)
}

// badRequest rejects what must never be forwarded. net/http's server has
// already refused much malformed input (bad chunk sizes, conflicting
// Content-Length, unknown Transfer-Encoding, bad targets) before the
// handler runs; the framing guard (framing.go) refused what it lets through
// on the raw bytes (CL+TE, duplicate Content-Length, obs-fold, ...), and
// this is where its verdict is applied.
func badRequest(r *http.Request) string {
	if fc, ok := r.Context().Value(framingKey{}).(*framingConn); ok && r.ProtoMajor == 1 && !fc.admit() {
		return "framing refused"
	}
	if r.Method == http.MethodConnect {
		return "CONNECT is not proxied"
	}
	if r.RequestURI == "*" && r.Method != http.MethodOptions {
		return "asterisk-form target is for OPTIONS only"
	}
	if len(r.TransferEncoding) > 0 && len(r.Header["Content-Length"]) > 0 {
		return "both Transfer-Encoding and Content-Length"
	}
	return ""
}

// prefetchChunked reads the first byte of a chunked request body before
// anything is forwarded, so a malformed first chunk is answered 400 and never
// reaches an origin. A later malformed chunk aborts the upstream request
// mid-body: the origin sees a truncated request, never a wrong one.
func prefetchChunked(r *http.Request) bool {
	if len(r.TransferEncoding) == 0 || r.Body == nil || r.Body == http.NoBody {
		return true
	}
	var b [1]byte
	n, err := io.ReadFull(r.Body, b[:])
	switch {
	case n == 1:
		r.Body = &prefixedBody{first: b[0], rest: r.Body}
	case err == io.EOF:
		r.Body = http.NoBody
	default:
		return false
	}
	return true
}

// prefixedBody is a body whose first byte was read ahead.
type prefixedBody struct {
	first byte
	sent  bool
	rest  io.ReadCloser
}

func (p *prefixedBody) Read(b []byte) (int, error) {
	if !p.sent && len(b) > 0 {
		p.sent = true
		b[0] = p.first
		return 1, nil
	}
	return p.rest.Read(b)
}

func (p *prefixedBody) Close() error { return p.rest.Close() }

// proxy forwards r to an endpoint of origin o through loop ol, retrying
// idempotent requests on another endpoint (package forward).
func (g *Gateway) proxy(w http.ResponseWriter, r *http.Request, st *state, o *cluster.Origin, ol *cluster.Loop, k cluster.Kind, oc *outcome) int {
	ctx := r.Context()
	if t := o.RequestTimeout(); t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
		// The request body streams upstream while the response streams
		// back. Without full duplex net/http's HTTP/1.1 server, once the
		// response headers go out, reads away up to 256 KiB of the unread
		// body itself (a chunked body then reaches the origin with a hole).
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	up := forward.UpgradeType(r.Header)
	forward.RemoveHop(r.Header, up)
	var key balance.Key
	if o.Sticky() { // before X-Forwarded-For is rewritten: source_ip reads the peer's
		key = o.Key(forward.HeaderFields(r.Header), st.fwd.Peer(r.RemoteAddr, r.TLS != nil))
		if !key.Valid() {
			var c []byte
			if c, key, _ = o.NewCookie(nil); len(c) > 0 {
				oc.setCookie = string(c)
			}
		}
	}
	st.fwd.Apply(r.Header, r.RemoteAddr, r.Host, r.TLS != nil)
	if oc.trace != nil {
		// Each attempt sends its own span's trace context (exchangeHTTP).
		delete(r.Header, "Traceparent")
		delete(r.Header, "Tracestate")
	}
	if _, ok := r.Header["User-Agent"]; !ok {
		// Forward no User-Agent rather than the Go client's default.
		r.Header["User-Agent"] = noUserAgent
	}
	out := r.WithContext(ctx)
	out.RequestURI = ""
	out.Close = false
	if r.TLS != nil || o.Config().TLS != nil {
		out.URL.Scheme = "https"
	} else {
		out.URL.Scheme = "http"
	}
	replayable := forward.Idempotent(r.Method) && (r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0) && up == ""

	var a forward.Attempt
	start := o.Started(k)
	o.Begin(&a, ol, replayable, k.Cost, key)
	defer o.Finish(&a, ol)
	status, reason := o.Forward(ctx, &a, ol, false, oc.trace, func(a *forward.Attempt) (int, forward.Step) {
		return exchangeHTTP(w, r, out, a, up, oc)
	})
	if reason == forward.None && status != 499 {
		o.Served(k, start)
	}
	oc.attempts = a.Attempts()
	if ep := a.LastEndpoint(); ep != nil {
		oc.endpoint = ep.Address()
	}
	if reason != forward.None {
		return writeError(w, r, reason, oc)
	}
	return status
}

// noUserAgent is a present-but-empty User-Agent: both wires then send none.
var noUserAgent = []string{""}

// exchangeHTTP makes one attempt's exchange through net/http's request and
// response.
func exchangeHTTP(w http.ResponseWriter, r, out *http.Request, a *forward.Attempt, up string, oc *outcome) (int, forward.Step) {
	conn, ok := a.Conn().(upstream.Conn)
	if !ok {
		return 0, a.Failed(forward.Refused)
	}
	out.URL.Host = a.Endpoint().Address()
	oc.trace.Fields(func(name string, value []byte) { out.Header[name] = []string{string(value)} })
	resp, err := conn.RoundTrip(out)
	if err != nil {
		switch {
		case r.Context().Err() != nil:
			return 0, a.Failed(forward.ClientLeft)
		case out.Context().Err() != nil:
			return 0, a.Failed(forward.Timeout)
		case upstream.IsRefusedStream(err):
			return 0, a.Failed(forward.Refused)
		case errors.Is(err, upstream.ErrHeadTooLarge):
			return 0, a.Failed(forward.HeadTooLarge)
		}
		return 0, a.Failed(forward.Broken)
	}
	a.Loaded(resp.Header.Get(forward.LoadHeader))
	if !a.Respond(resp.StatusCode, resp.Header.Get("X-Corput-Error") != "") {
		resp.Body.Close()
		return 0, a.Settle()
	}
	// respond aborts the handler (panic) when the body breaks after the
	// headers went out: the exchange is settled either way, or the
	// stream would stay busy for good.
	defer a.Settle()
	return respond(w, r, resp, up, oc), forward.Delivered
}

// respond streams resp to the client: headers minus hop-by-hop, body with
// flushes for streaming responses, then trailers. A body that breaks after
// the headers were sent aborts the downstream stream, so the client sees a
// truncated response rather than a silently short one.
func respond(w http.ResponseWriter, r *http.Request, resp *http.Response, up string, oc *outcome) int {
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return upgrade(w, r, resp, up, oc)
	}
	forward.RemoveHop(resp.Header, "")
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	if oc.setCookie != "" {
		h.Add("Set-Cookie", oc.setCookie)
	}
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	if len(resp.Trailer) > 0 && r.ProtoMajor == 1 {
		// HTTP/1.1 carries trailers only in chunked framing; an h2 origin
		// may send Content-Length with trailers.
		h.Del("Content-Length")
	}
	w.WriteHeader(resp.StatusCode)
	if r.Method != http.MethodHead {
		flush := resp.ContentLength == -1
		n, err := copyBody(w, resp.Body, flush)
		oc.bytes = n
		if err != nil {
			if r.Context().Err() == nil {
				panic(http.ErrAbortHandler)
			}
			return resp.StatusCode
		}
	}
	for k, vv := range resp.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
	return resp.StatusCode
}

// copyBody copies src to w, flushing after each write when flush is set
// (streaming responses: SSE, gRPC, chunked).
func copyBody(w http.ResponseWriter, src io.Reader, flush bool) (int64, error) {
	var fl func() error
	if f, ok := w.(http.Flusher); ok && flush {
		fl = func() error { f.Flush(); return nil }
	}
	return forward.Copy(w, src, fl)
}

// upgrade completes a 101 Switching Protocols: the downstream connection is
// hijacked and bytes are copied both ways until either side closes (the
// origin's count as the response's body).
func upgrade(w http.ResponseWriter, r *http.Request, resp *http.Response, up string, oc *outcome) int {
	backend, ok := resp.Body.(io.ReadWriteCloser)
	if !ok || up == "" || !h1.EqualFold(resp.Header.Get("Upgrade"), up) {
		return writeError(w, r, forward.UpstreamReset, oc)
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return writeError(w, r, forward.UpgradeUnsupported, oc)
	}
	defer conn.Close()
	forward.RemoveHop(resp.Header, up)
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n"); err != nil {
		return http.StatusSwitchingProtocols
	}
	if err := resp.Header.Write(brw); err != nil {
		return http.StatusSwitchingProtocols
	}
	if _, err := brw.WriteString("\r\n"); err != nil || brw.Flush() != nil {
		return http.StatusSwitchingProtocols
	}
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(backend, brw.Reader) // client → origin, buffered bytes first
		errc <- err
	}()
	var sent int64
	go func() {
		n, err := io.Copy(conn, backend) // origin → client
		sent = n
		errc <- err
	}()
	<-errc
	backend.Close()
	conn.Close()
	<-errc
	oc.bytes = sent
	return http.StatusSwitchingProtocols
}
