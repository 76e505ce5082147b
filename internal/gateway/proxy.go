package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/h1"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/upstream"
)

// ServeHTTP forwards one downstream request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	loop, _ := r.Context().Value(loopKey{}).(int)
	status := g.serve(w, r, loop)
	g.downstream[classIndex(status)].Inc()
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, loop int) int {
	if badRequest(r) != "" || !prefetchChunked(r) {
		return refuse(w)
	}
	if r.ProtoMajor == 1 && len(r.Header["Upgrade"]) > 0 {
		// The framing guard stops at an Upgrade: unless the upgrade
		// happens, the connection carries no further request.
		w.Header().Set("Connection", "close")
	}
	name, ok := g.router.Match(r.Host, r.URL.Path)
	if !ok {
		return writeError(w, errNoRoute)
	}
	o := g.origins[name]
	return o.proxy(w, r, o.loops[loop])
}

func writeError(w http.ResponseWriter, e gatewayError) int {
	e.write(w)
	return e.status
}

// refuse answers a malformed request 400 and ends its connection without
// reading the rest of it: its framing cannot be trusted, and a client that
// never finishes the body must not hold the connection open.
func refuse(w http.ResponseWriter) int {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	return writeError(w, errBadRequest)
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

// attempt outcomes that decide whether the loop tries again.
type verdict uint8

const (
	done        verdict = iota // a response was written (or the client left)
	retry                      // the request may have reached the origin: try another endpoint, within the retry budget
	retryUnsent                // nothing reached any origin: try an endpoint not tried yet, outside the budget
	retryStale                 // a connection handed out unprobed had been closed by the origin while idle: go again once on a probed stream, outside the budget
	fail                       // answer with the error
	exhausted                  // no endpoint is left that the request has not tried: answer with the last failure
	leased                     // (lease only) a stream is held: go on
)

// proxy forwards r to an endpoint of the origin through loop ol, retrying
// idempotent requests on another endpoint (see retrying).
func (o *origin) proxy(w http.ResponseWriter, r *http.Request, ol *originLoop) int {
	ctx := r.Context()
	if o.reqTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.reqTimeout)
		defer cancel()
	}
	if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
		// The request body streams upstream while the response streams
		// back. Without full duplex net/http's HTTP/1.1 server, once the
		// response headers go out, reads away up to 256 KiB of the unread
		// body itself (a chunked body then reaches the origin with a hole).
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	up := upgradeType(r.Header)
	removeHopHeaders(r.Header, up)
	o.gw.fwd.Apply(r.Header, r.RemoteAddr, r.Host, r.TLS != nil)
	if _, ok := r.Header["User-Agent"]; !ok {
		// Forward no User-Agent rather than the Go client's default.
		r.Header["User-Agent"] = noUserAgent
	}
	out := r.WithContext(ctx)
	out.RequestURI = ""
	out.Close = false
	if r.TLS != nil || o.cfg.TLS != nil {
		out.URL.Scheme = "https"
	} else {
		out.URL.Scheme = "http"
	}
	replayable := isIdempotent(r.Method) && (r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0) && up == ""

	status, v, gerr := o.retrying(replayable, func(tried *triedHosts, mayRetry bool) (int, verdict, gatewayError, *balance.Endpoint) {
		return o.try(w, r, out, ol, tried, up, mayRetry)
	})
	if v == done {
		return status
	}
	return o.answer(w, gerr)
}

// attemptFunc makes one attempt, on an endpoint the request has not tried
// (tried) when the subset offers one (pickFor). mayRetry says whether a
// budgeted retry can follow; without one an origin's 503 goes to the
// client as is. tried is nil on the first attempt only: an attempt that
// can be retried and has tried is nil may take an unprobed connection
// (trust, in lease).
type attemptFunc func(tried *triedHosts, mayRetry bool) (int, verdict, gatewayError, *balance.Endpoint)

// retrying runs attempts until one is done or fails. A replayable request
// is retried on another endpoint: after a failure that sent nothing (a
// failed dial, a refused stream) up to unsentRetries times, on endpoints
// it has not tried, outside the retry budget; after one that may have
// reached the origin (a connection that broke under it, an overload 503) up
// to retry.attempts times within the budget. Both request paths (the
// net/http handler and the fast path) forward through it. It returns the
// status written (done) or the error to answer (fail).
func (o *origin) retrying(replayable bool, try attemptFunc) (int, verdict, gatewayError) {
	o.budget.begin()
	defer o.budget.end()
	last := errNoHealthy
	var tried *triedHosts // allocated at the first failure: a request that succeeds at once allocates nothing
	retries, unsent, maxUnsent := 0, 0, unsentRetries(o.attempts)
	// charged: the request holds a retry of the budget, from a budgeted
	// retry to the next one or to its end (an attempt after nothing was
	// sent keeps it: the request reached an origin before). It is given
	// back in a defer, even when the handler is aborted mid-body.
	charged := false
	defer func() {
		if charged {
			o.budget.doneRetry()
		}
	}()
	for {
		status, v, gerr, ep := try(tried, replayable && retries+1 < o.attempts)
		switch v {
		case retry, retryUnsent, retryStale:
		case exhausted:
			return 0, fail, last
		default:
			return status, v, gerr
		}
		last = gerr
		if tried == nil {
			tried = new(triedHosts) // non-nil: every later attempt probes (see attemptFunc)
		}
		if v == retryStale && replayable {
			// What the hand-out probe would have caught (pool.AcquireTrusting):
			// the endpoint did nothing wrong, and this happens once.
			o.m.stale.Inc()
			continue
		}
		tried.add(ep)
		if !replayable {
			break
		}
		if v == retryUnsent && unsent < maxUnsent {
			unsent++
			tried.strict = true
			continue
		}
		if charged { // every budgeted retry asks the budget
			o.budget.doneRetry()
			charged = false
		}
		if retries+1 >= o.attempts || !o.budget.tryRetry() {
			break
		}
		retries++
		charged, tried.strict = true, false
	}
	return 0, fail, last
}

// noUserAgent is a present-but-empty User-Agent: both wires then send none.
var noUserAgent = []string{""}

// answer writes a gateway-made error, counting sheds.
func (o *origin) answer(w http.ResponseWriter, e gatewayError) int {
	o.countShed(e)
	return writeError(w, e)
}

// countShed counts a gateway-made error that sheds load.
func (o *origin) countShed(e gatewayError) {
	if c, ok := o.m.shed[e.reason]; ok {
		c.Inc()
	}
}

// try makes one attempt through net/http's request and response (see
// attemptFunc for tried and mayRetry).
func (o *origin) try(w http.ResponseWriter, r, out *http.Request, ol *originLoop, tried *triedHosts, up string, mayRetry bool) (int, verdict, gatewayError, *balance.Endpoint) {
	ep, lease, status, v, gerr := o.lease(out.Context(), r.Context(), ol, tried, false)
	if v != leased {
		return status, v, gerr, ep
	}
	conn := lease.Conn().(upstream.Conn)
	out.URL.Host = ep.Address()
	start := o.gw.clk.Now()
	resp, err := conn.RoundTrip(out)
	if err != nil {
		lease.Release()
		switch {
		case r.Context().Err() != nil:
			ep.Done(0, balance.Shed)
			return 499, done, gatewayError{}, ep
		case out.Context().Err() != nil:
			return o.exchangeFailed(ep, start, failTimeout)
		case upstream.IsRefusedStream(err):
			return o.exchangeFailed(ep, start, failRefused)
		}
		return o.exchangeFailed(ep, start, failBroken)
	}
	headers := o.gw.clk.Now().Sub(start)
	if o.retry503(mayRetry, resp.StatusCode, resp.Header.Get("X-Corput-Error") != "") {
		resp.Body.Close()
		lease.Release()
		ep.Done(headers, balance.ServerError)
		return 0, retry, errUpstream503, ep
	}
	func() {
		// respond aborts the handler (panic) when the body breaks after
		// the headers went out: the endpoint and the lease are settled
		// either way, or the stream would stay busy for good.
		defer o.settle(ep, lease, resp.StatusCode, headers, start)
		status = o.respond(w, r, resp, up)
	}()
	return status, done, gatewayError{}, ep
}

// lease picks an endpoint the request has not tried when the subset offers
// one (pickFor), admits the request to it and acquires a stream of its pool
// for the loop. v is leased when it holds a stream; otherwise the attempt ends
// with status, v and gerr. ctx bounds a wait for a stream; client is the downstream
// request's context (the client left when it ends). trust takes an idle
// HTTP/1.1 connection without its probe read (pool.AcquireTrusting): the
// caller turns a connection found closed into failStale.
func (o *origin) lease(ctx, client context.Context, ol *originLoop, tried *triedHosts, trust bool) (*balance.Endpoint, pool.Lease, int, verdict, gatewayError) {
	ep, err := pickFor(ol.picker, tried)
	if errors.Is(err, balance.ErrAllTried) {
		return nil, pool.Lease{}, 0, exhausted, gatewayError{}
	}
	if err != nil {
		return nil, pool.Lease{}, 0, fail, errNoHealthy
	}
	if !ep.TryAdmit() {
		ep.Done(0, balance.Shed)
		return ep, pool.Lease{}, 0, fail, errPendingFull
	}
	p, err := o.poolFor(ol, ep.Address())
	if err != nil {
		ep.Release()
		ep.Done(0, balance.Shed)
		return ep, pool.Lease{}, 0, fail, errNoHealthy
	}
	var lease pool.Lease
	if trust {
		lease, err = p.AcquireTrusting(ctx)
	} else {
		lease, err = p.Acquire(ctx)
	}
	ep.Release()
	if err != nil {
		status, v, gerr, _ := o.acquireFailed(client, ep, err)
		return ep, pool.Lease{}, status, v, gerr
	}
	return ep, lease, 0, leased, gatewayError{}
}

func (o *origin) acquireFailed(client context.Context, ep *balance.Endpoint, err error) (int, verdict, gatewayError, *balance.Endpoint) {
	var de *pool.DialError
	switch {
	case errors.As(err, &de):
		ep.Done(0, balance.ConnectFailure)
		if o.retryOn.connect { // nothing was sent: no connection, or none tried in the backoff
			return 0, retryUnsent, errConnectFailed, ep
		}
		return 0, fail, errConnectFailed, ep
	case errors.Is(err, pool.ErrPendingFull):
		ep.Done(0, balance.Shed)
		return 0, fail, errPendingFull, ep
	case errors.Is(err, pool.ErrAcquireTimeout):
		ep.Done(0, balance.Shed)
		return 0, fail, errAcquireTimeout, ep
	case errors.Is(err, pool.ErrOverCap):
		ep.Done(0, balance.Shed)
		return 0, fail, errOverCap, ep
	case errors.Is(err, pool.ErrClosed):
		// The endpoint just left the subset: another endpoint may serve.
		ep.Done(0, balance.Shed)
		return 0, retryUnsent, errNoHealthy, ep
	}
	ep.Done(0, balance.Shed)
	return clientGone(client, err)
}

// settle ends an exchange that got a response: the endpoint learns its
// outcome and latency (to the response headers), the stream goes back,
// and the request's duration is observed. Both request paths end here.
func (o *origin) settle(ep *balance.Endpoint, lease pool.Lease, status int, headers time.Duration, start time.Time) {
	ep.Done(headers, balance.OutcomeOf(status))
	lease.Release()
	o.m.duration[classIndex(status)].Observe(o.gw.clk.Now().Sub(start).Seconds())
}

// retry503 says whether an origin's 503 is retried rather than passed on:
// an overloaded origin gives the next attempt a chance when one can follow
// (mayRetry) and retry.on names 503. A 503 another corput made (it has
// X-Corput-Error) is passed on: that gateway already shed or retried.
func (o *origin) retry503(mayRetry bool, status int, fromCorput bool) bool {
	return mayRetry && status == http.StatusServiceUnavailable && o.retryOn.status503 && !fromCorput
}

var errUpstream503 = gatewayError{status: http.StatusServiceUnavailable, reason: "upstream_503", shed: true}

// How an exchange failed before any response arrived.
type failure uint8

const (
	failTimeout failure = iota // timeouts.request passed
	failRefused                // the origin is known not to have processed it (refused stream, unusable connection)
	failBroken                 // the connection broke
	failStale                  // the connection was handed out unprobed and the origin had closed it while idle (upstream.Raw.Stale)
)

// exchangeFailed settles an exchange on ep that got no response.
func (o *origin) exchangeFailed(ep *balance.Endpoint, start time.Time, f failure) (int, verdict, gatewayError, *balance.Endpoint) {
	switch f {
	case failTimeout:
		ep.Done(o.gw.clk.Now().Sub(start), balance.ServerError)
		return 0, fail, errUpstreamTimeout, ep
	case failRefused:
		ep.Done(0, balance.Shed)
		if o.retryOn.refused {
			return 0, retryUnsent, errUpstreamReset, ep
		}
		return 0, fail, errUpstreamReset, ep
	case failStale:
		ep.Done(0, balance.Shed)
		return 0, retryStale, errUpstreamReset, ep
	}
	// The connection broke before any response: an origin that crashed
	// with the request in flight, or closed a kept-alive connection as it
	// was reused. The balancer counts a connect failure, and under
	// retry.on connect-failure an idempotent request without a body (the
	// caller decides) is replayed on another endpoint (RFC 9110 §9.2.2).
	ep.Done(0, balance.ConnectFailure)
	if o.retryOn.connect {
		return 0, retry, errUpstreamReset, ep
	}
	return 0, fail, errUpstreamReset, ep
}

// clientGone classifies an acquisition that ended because the request's
// context did: the client left (no answer needed) or the request timed out.
func clientGone(ctx context.Context, err error) (int, verdict, gatewayError, *balance.Endpoint) {
	if errors.Is(err, context.DeadlineExceeded) {
		return 0, fail, errUpstreamTimeout, nil
	}
	return 499, done, gatewayError{}, nil
}

// respond streams resp to the client: headers minus hop-by-hop, body with
// flushes for streaming responses, then trailers. A body that breaks after
// the headers were sent aborts the downstream stream, so the client sees a
// truncated response rather than a silently short one.
func (o *origin) respond(w http.ResponseWriter, r *http.Request, resp *http.Response, up string) int {
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return o.upgrade(w, resp, up)
	}
	removeHopHeaders(resp.Header, "")
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
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
		if _, err := copyBody(w, resp.Body, flush); err != nil {
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

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody copies src to w, flushing after each write when flush is set
// (streaming responses: SSE, gRPC, chunked).
func copyBody(w http.ResponseWriter, src io.Reader, flush bool) (int64, error) {
	var fl func() error
	if f, ok := w.(http.Flusher); ok && flush {
		fl = func() error { f.Flush(); return nil }
	}
	return copyThrough(w, src, fl)
}

// copyThrough copies src to dst through a pooled buffer, calling flush (when
// not nil) after every write.
func copyThrough(dst io.Writer, src io.Reader, flush func() error) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var n int64
	for {
		nr, rerr := src.Read(*bp)
		if nr > 0 {
			nw, werr := dst.Write((*bp)[:nr])
			n += int64(nw)
			if werr != nil {
				return n, werr
			}
			if flush != nil {
				if ferr := flush(); ferr != nil {
					return n, ferr
				}
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// upgrade completes a 101 Switching Protocols: the downstream connection is
// hijacked and bytes are copied both ways until either side closes.
func (o *origin) upgrade(w http.ResponseWriter, resp *http.Response, up string) int {
	backend, ok := resp.Body.(io.ReadWriteCloser)
	if !ok || up == "" || !h1.EqualFold(resp.Header.Get("Upgrade"), up) {
		return writeError(w, errUpstreamReset)
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return writeError(w, gatewayError{http.StatusBadRequest, "upgrade_unsupported", false})
	}
	defer conn.Close()
	removeHopHeaders(resp.Header, up)
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
	go func() {
		_, err := io.Copy(conn, backend) // origin → client
		errc <- err
	}()
	<-errc
	backend.Close()
	conn.Close()
	<-errc
	return http.StatusSwitchingProtocols
}

func isIdempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// classIndex maps a status to 0..4 for 1xx..5xx (499 counts as 4xx).
func classIndex(status int) int {
	switch {
	case status >= 500:
		return 4
	case status >= 400:
		return 3
	case status >= 300:
		return 2
	case status >= 200:
		return 1
	}
	return 0
}
