// Package httpserve is the net/http serving path: net/http's server handler
// for every request the fast path does not read itself — HTTP/2 (h2c, and
// h2 by ALPN over TLS), and the HTTP/1.1 connections the fast path hands
// off (a body of unknown length, an upgrade, Expect, HTTP/1.0, ...) or
// every one when downstream.fast_path is false — and the framing guard
// those HTTP/1.1 connections pass through (framing.go).
//
// It is an adapter: a request is served by package proxy, like the fast
// path's, and its answer is written through an http.ResponseWriter
// (netClient, an exchange.Client).
//
// Invariants:
//   - A request the framing guard refused, or whose chunked body breaks in
//     its first chunk, is answered 400 bad_request and its connection
//     closed without reading the rest: its framing cannot be trusted. So
//     is one that breaks the field-name rules (forward.Forwarding.Names),
//     in its head or its trailers.
//   - A request body refused once the request went upstream (a later chunk
//     line the guard refused, a trailer the name rules refuse) ends with
//     exchange.ErrBodyRefused: the upstream request is cut short, the
//     client answered 400 and its connection closed.
//   - A response whose body breaks after the head aborts the downstream
//     stream (http.ErrAbortHandler), once the request is counted and
//     logged: the client sees a truncated response, never a short one.
package httpserve

import (
	"context"
	"crypto/tls"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/route"
)

// Handler is net/http's handler of the gateway's requests.
type Handler struct {
	p *proxy.Handler
	// BodyReadTimeout bounds each read of a request body
	// (downstream.body_read_timeout); 0: none.
	BodyReadTimeout time.Duration
}

// New returns the handler that serves requests through p, its body reads
// bounded by config.DefaultBodyReadTimeout until BodyReadTimeout is set.
func New(p *proxy.Handler) *Handler {
	return &Handler{p: p, BodyReadTimeout: config.DefaultBodyReadTimeout}
}

// tlsKey holds the TLS state of an HTTPS/1.1 connection the fast path
// handed on.
type tlsKey struct{}

// framingKey holds a guarded connection's *framingConn.
type framingKey struct{}

// ConnContext is the downstream server's ConnContext: it keeps what a
// request needs of its connection — the framing guard's verdicts, and the
// TLS state of a connection the fast path handed on (net/http sees no
// *tls.Conn there).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*framingConn); ok {
		ctx = context.WithValue(ctx, framingKey{}, fc)
		if hc, ok := fc.Conn.(interface{ TLS() *tls.ConnectionState }); ok && hc.TLS() != nil {
			ctx = context.WithValue(ctx, tlsKey{}, hc.TLS())
		}
	}
	return ctx
}

// streams recycles the requests' state (package proxy's Stream).
var streams = sync.Pool{New: func() any { return new(proxy.Stream) }}

// ServeHTTP serves one downstream request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil {
		r.TLS, _ = r.Context().Value(tlsKey{}).(*tls.ConnectionState)
	}
	if r.URL.Path == "" && r.URL.Host != "" {
		// An absolute-form target with an empty path is "/" (RFC 9112
		// §3.2.2): routed and forwarded as "/".
		r.URL.Path = "/"
	}
	var rt proxy.Routing
	fwd := h.p.Table().Forwarding
	peer := fwd.Peer(r.RemoteAddr, r.TLS != nil) // read once: routing, the sticky key and X-Forwarded-* see the same
	refuse := badRequest(r, fwd) != ""
	if !refuse {
		checkBody(r, fwd)
		refuse = !prefetchBody(r)
	}
	if refuse {
		// Its framing cannot be trusted, and a client that never finishes
		// the body must not hold the connection open: answered without
		// reading the rest.
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
		rt = proxy.Routing{Table: h.p.Table(), Refuse: forward.BadRequest}
	} else {
		if r.ProtoMajor == 1 && len(r.Header["Upgrade"]) > 0 {
			// The framing guard stops at an Upgrade: unless the upgrade
			// happens, the connection carries no further request.
			w.Header().Set("Connection", "close")
		}
		// The path as sent (EscapedPath: the client's escapes, not
		// URL.Path's decoding), normalized by Route as on the fast path.
		rt = h.p.Route(route.Request{Method: r.Method, Host: r.Host, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Head: forward.HeaderFields(r.Header), Peer: peer})
	}
	in := proxy.Inbound{
		Method: r.Method, Host: r.Host, Path: r.URL.Path, Target: r.RequestURI, Proto: r.Proto,
		Client: r.RemoteAddr, TLS: r.TLS != nil, Head: forward.HeaderFields(r.Header),
		Length: r.ContentLength, GRPCTimeout: grpcTimeout(r.Header["Grpc-Timeout"]),
	}
	if r.Body == nil || r.Body == http.NoBody {
		in.Length = 0
	}
	in.Peer = peer
	s := streams.Get().(*proxy.Stream)
	s.Durable = true // net/http writes the header after the handler returned, and s is reused
	c := &netClient{w: w, r: r, s: s, fwd: rt.Table.Forwarding, bodyWait: h.BodyReadTimeout}
	h.p.Serve(r.Context(), s, &in, rt, c, false)
	c.deadlines.Lock()
	c.ended = true // a duplex body's sender may outlive the handler: no deadline on a finished writer
	c.deadlines.Unlock()
	streams.Put(s)
	if c.aborted && r.Context().Err() == nil {
		// The body broke after the head went out: abort the downstream
		// stream, so the client sees a truncated response rather than a
		// silently short one.
		panic(http.ErrAbortHandler)
	}
}

// badRequest rejects what must never be forwarded. net/http's server has
// already refused much malformed input (bad chunk sizes, conflicting
// Content-Length, unknown Transfer-Encoding, bad targets) before the
// handler runs; the framing guard (framing.go) refused what it lets through
// on the raw bytes (CL+TE, duplicate Content-Length, obs-fold, a bare LF,
// ...), and this is where its verdict is applied. The field-name rules
// (fwd.Names: a disguised protected name, downstream.underscore_headers)
// apply here too, the names with '_' dropped under drop.
func badRequest(r *http.Request, fwd forward.Forwarding) string {
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
	if why := fwd.Names(r.Header); why != "" {
		return why
	}
	return ""
}

// checkBody puts r's body under the rules applied as it is read
// (checkedBody).
func checkBody(r *http.Request, fwd forward.Forwarding) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	fc, _ := r.Context().Value(framingKey{}).(*framingConn)
	if r.ProtoMajor != 1 {
		fc = nil
	}
	r.Body = &checkedBody{rc: r.Body, r: r, fwd: fwd, fc: fc, idx: fc.current()}
}

// bodyRefused reports whether r's body was refused as it was read.
func bodyRefused(r *http.Request) bool {
	cb, ok := r.Body.(*checkedBody)
	if !ok {
		if pb, ok := r.Body.(*prefixedBody); ok {
			cb, _ = pb.rest.(*checkedBody)
		}
	}
	return cb != nil && cb.refused.Load()
}

// checkedBody is a request body under the rules that can only be applied
// as it is read: the framing guard's verdict on its chunk lines and
// trailers (the guard sees the bytes before net/http's reader returns
// them), and the field-name rules on its trailers, once they are read. A
// refusal ends the body with exchange.ErrBodyRefused: before anything went
// upstream (prefetchBody) the request is answered 400; after, the
// exchange aborts it there (the origin sees a truncated body, never the
// rest) and answers 400. Either way the connection is closed (refused).
type checkedBody struct {
	rc      io.ReadCloser
	r       *http.Request
	fwd     forward.Forwarding
	fc      *framingConn // nil: not under the guard (HTTP/2)
	idx     int64        // the request's index on fc
	refused atomic.Bool  // read by the handler's goroutine, set by the exchange's body writer
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if b.fc.refused(b.idx) || err == io.EOF && b.fwd.Names(b.r.Trailer) != "" {
		b.refused.Store(true)
		return 0, exchange.ErrBodyRefused
	}
	return n, err
}

func (b *checkedBody) Close() error { return b.rc.Close() }

// prefetchBody reads the start of a chunked request body before anything
// is forwarded, so a malformed first chunk (net/http's verdict or the
// framing guard's) is answered 400 and never reaches an origin. A later
// malformed chunk aborts the upstream request mid-body: the origin sees a
// truncated request, never a wrong one. What one read gave goes upstream
// as one piece (one chunk), not its first byte alone.
func prefetchBody(r *http.Request) bool {
	if len(r.TransferEncoding) == 0 || r.Body == nil || r.Body == http.NoBody {
		return true
	}
	bp := forward.Buffer()
	n, err := r.Body.Read(*bp)
	for n == 0 && err == nil {
		n, err = r.Body.Read(*bp)
	}
	switch {
	case err != nil && err != io.EOF:
		forward.PutBuffer(bp)
		return false
	case n > 0:
		r.Body = &prefixedBody{buf: bp, pre: (*bp)[:n], rest: r.Body}
		return true
	}
	forward.PutBuffer(bp)
	r.Body = http.NoBody
	return true
}

// prefixedBody is a body whose first bytes were read ahead into buf (a
// pooled buffer, given back once they are read).
type prefixedBody struct {
	buf  *[]byte
	pre  []byte
	rest io.ReadCloser
}

func (p *prefixedBody) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		if p.pre = p.pre[n:]; len(p.pre) == 0 {
			forward.PutBuffer(p.buf)
			p.buf = nil
		}
		return n, nil
	}
	return p.rest.Read(b)
}

func (p *prefixedBody) Close() error { return p.rest.Close() }

// netClient is net/http's side of one request (proxy.Client): its answer
// goes to an http.ResponseWriter, and its client is watched through the
// request's context.
type netClient struct {
	w       http.ResponseWriter
	r       *http.Request
	s       *proxy.Stream
	fwd     forward.Forwarding
	stream  bool          // a body of unknown length: flushed as it comes
	dirty   bool          // body bytes written since the last flush
	aborted bool          // the body broke after the head
	stop    func() bool   // ends the watch
	cut     chan struct{} // closed once the watch has cut the exchange
	// bodyWait is downstream.body_read_timeout; bodyCut is set once the
	// request body was cut (stalled, or above the route's limit): the
	// answer then closes the connection, whose rest of the body is unread.
	bodyWait time.Duration
	bodyCut  atomic.Bool
	// deadlines guards ended: once the handler returned, its
	// ResponseController must not be used (HTTP/2's panics).
	deadlines sync.Mutex
	ended     bool
}

// Request rewrites r's head for origin o and readies it for the exchanges:
// hop-by-hop fields out (an upgrade's Connection and Upgrade kept),
// X-Forwarded-* in, the client's trace context out when each attempt sends
// its own; the fields in sorted order, and the body streaming both ways
// (Duplex) with its trailers.
func (n *netClient) Request(o *cluster.Origin, s *proxy.Stream) *exchange.Request {
	r := n.r
	if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
		// The request body streams upstream while the response streams
		// back. Without full duplex net/http's HTTP/1.1 server, once the
		// response headers go out, reads away up to 256 KiB of the unread
		// body itself (a chunked body then reaches the origin with a hole).
		_ = http.NewResponseController(n.w).EnableFullDuplex()
	}
	up := forward.UpgradeType(r.Header)
	forward.RemoveHop(r.Header, up)
	n.fwd.Apply(r.Header, r.RemoteAddr, r.Host, r.TLS != nil)
	if s.Tr != nil {
		delete(r.Header, "Traceparent")
		delete(r.Header, "Tracestate")
	}
	req := &exchange.Request{
		Method: r.Method, Target: r.URL.RequestURI(), Host: r.Host, Scheme: "http",
		Upgrade: up, Trace: s.Tr, MaxHead: o.MaxResponseHead(),
	}
	if r.TLS != nil || o.TLS() {
		req.Scheme = "https"
	}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		body := &clientBody{r: r.Body, wait: n.bodyWait, n: n, rc: http.NewResponseController(n.w)}
		if r.ContentLength < 0 {
			body.max = s.MaxBody // a known length above it was answered 413 already
		}
		req.Body, req.Length, req.Trailer, req.Duplex = body, r.ContentLength, r.Trailer, true
	}
	h := r.Header
	if te := h["Te"]; len(te) == 1 && te[0] == "trailers" {
		req.TE = true
	}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if k == "Te" || k == "Content-Length" || k == "Transfer-Encoding" || k == "Host" {
			continue
		}
		for _, v := range h[k] {
			req.Fields = append(req.Fields, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return req
}

func (n *netClient) WriteHead(h *exchange.Head) error {
	hd := n.w.Header()
	if n.bodyCut.Load() && n.r.ProtoMajor == 1 {
		// The rest of the body is not read: the connection carries no
		// further request, and net/http must not wait to drain it.
		hd.Set("Connection", "close")
		_ = http.NewResponseController(n.w).SetReadDeadline(time.Unix(1, 0))
	}
	for i := range h.Fields {
		hd.Add(h.Fields[i].Name, h.Fields[i].Value)
	}
	if len(n.s.Cookie) > 0 {
		hd.Add("Set-Cookie", string(n.s.Cookie))
	}
	if n.r.ProtoMajor == 1 && bodyRefused(n.r) {
		// The rest of the connection cannot be trusted.
		hd.Set("Connection", "close")
		_ = http.NewResponseController(n.w).SetReadDeadline(time.Unix(1, 0))
	}
	if h.Length >= 0 && h.Framing != exchange.Stream && h.Status != http.StatusNoContent {
		hd.Set("Content-Length", strconv.FormatInt(h.Length, 10))
	}
	n.stream = h.Length < 0
	n.w.WriteHeader(h.Status)
	return nil
}

func (n *netClient) Write(p []byte) (int, error) {
	n.dirty = true
	return n.w.Write(p)
}

// Flush flushes a body of unknown length (a stream: SSE, gRPC, chunked) as
// it comes, once bytes of it were written; net/http flushes the rest (and
// a head alone) when the handler returns. So an answer without a body
// leaves as one HEADERS frame, END_STREAM on it, which gRPC's
// trailers-only answer needs.
func (n *netClient) Flush() error {
	if n.stream && n.dirty {
		n.dirty = false
		if f, ok := n.w.(http.Flusher); ok {
			f.Flush()
		}
	}
	return nil
}

func (n *netClient) End(trailer []hpack.HeaderField, size int64) error {
	n.s.Sent = size
	hd := n.w.Header()
	for _, f := range trailer {
		k := http.TrailerPrefix + http.CanonicalHeaderKey(f.Name)
		hd[k] = append(hd[k], f.Value)
	}
	return nil
}

func (n *netClient) Abort(size int64) {
	n.s.Sent = size
	n.aborted = true
}

// RawChunks: net/http writes the framing itself.
func (n *netClient) RawChunks() bool { return false }

// Watch cuts the exchange when the request's context ends (the client
// left).
func (n *netClient) Watch(up io.Closer) {
	cut := make(chan struct{})
	n.cut = cut
	n.stop = context.AfterFunc(n.r.Context(), func() {
		up.Close()
		close(cut)
	})
}

// Unwatch ends the watch; a cut that has begun is waited for, so that the
// exchange's stream or connection is never touched by it once it goes
// back.
func (n *netClient) Unwatch() bool {
	if !n.stop() {
		<-n.cut
		return true
	}
	return false
}

// Upgrade completes a 101 Switching Protocols: the downstream connection is
// hijacked and bytes are copied both ways until either side closes (the
// origin's count as the response's body).
func (n *netClient) Upgrade(h *exchange.Head, backend io.ReadWriteCloser) int {
	conn, brw, err := http.NewResponseController(n.w).Hijack()
	if err != nil {
		return n.s.Answer(n, forward.UpgradeUnsupported, n.r.Method)
	}
	defer conn.Close()
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	for i := range h.Fields {
		brw.WriteString(h.Fields[i].Name)
		brw.WriteString(": ")
		brw.WriteString(h.Fields[i].Value)
		brw.WriteString("\r\n")
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
		k, err := io.Copy(conn, backend) // origin → client
		sent = k
		errc <- err
	}()
	<-errc
	backend.Close()
	conn.Close()
	<-errc
	n.s.Sent = sent
	return http.StatusSwitchingProtocols
}

// clientBody is a request body as the exchanges read it: each read within
// downstream.body_read_timeout (a stalled client: exchange.ErrBodyTimeout),
// and a body of unknown length bounded by the route's
// max_request_body_bytes (exchange.ErrBodyTooLarge). Either cuts the
// upstream request: the exchange resets its stream or closes its
// connection.
type clientBody struct {
	r         io.ReadCloser
	rc        *http.ResponseController
	wait      time.Duration
	max, read int64
	n         *netClient
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.wait > 0 {
		b.n.deadlines.Lock()
		if !b.n.ended {
			_ = b.rc.SetReadDeadline(time.Now().Add(b.wait))
		}
		b.n.deadlines.Unlock()
	}
	k, err := b.r.Read(p)
	b.read += int64(k)
	if b.max > 0 && b.read > b.max {
		b.n.bodyCut.Store(true)
		return 0, exchange.ErrBodyTooLarge // not a byte over the limit goes on
	}
	if err != nil && err != io.EOF {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			b.n.bodyCut.Store(true)
			return k, exchange.ErrBodyTimeout
		}
	}
	return k, err
}

func (b *clientBody) Close() error { return b.r.Close() }

// grpcTimeout parses a gRPC request's grpc-timeout (an integer of at most
// 8 digits and a unit: H, M, S, m, u, n); 0 for none or a malformed one.
func grpcTimeout(v []string) time.Duration {
	if len(v) != 1 || len(v[0]) < 2 || len(v[0]) > 9 {
		return 0
	}
	s := v[0]
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0
	}
	if n > int64(1<<62)/int64(unit) {
		return 1 << 62
	}
	return time.Duration(n) * unit
}
