// Package edit is what the gateway changes of a request on its way to the
// origin and of the answer on its way back, for both serving paths: a
// route's rewrites (routes[].rewrite: the path's prefix replaced or a
// regular expression's matches substituted, the Host sent upstream), its
// header edits each way (routes[].request_headers, response_headers:
// remove, set, add, with values that may name variables), and the
// request id (downstream.request_id).
//
// A serving path readies the request as the origin is to see it
// (exchange.Request); package proxy then calls State.Request on it, and
// sets the State as the request's exchange.Editor, which the exchange
// calls on the response head before the client's WriteHead.
//
// Invariants:
//   - A Route is immutable once compiled (Compile, at load): its regular
//     expression and value templates are parsed once; a reload compiles
//     new ones.
//   - A path rewrite works on the normalized path the route matched
//     (route.Normalize), never on the client's spelling of it; the query
//     is kept as sent (docs/decisions.md, "Rewrites work on the normalized
//     path").
//   - With a State kept per client connection (the fast path), applying a
//     prefix rewrite, a Host rewrite, header edits and the request id
//     allocates nothing once its buffers have grown: values are expanded
//     into the State's buffer and the fields viewed there. A regular
//     expression's rewrite allocates (package regexp).
//   - Values handed to the client's WriteHead are strings that outlive
//     the request when State.Durable is set (net/http's path, which
//     writes the header after its handler returned).
//   - The fields a header edit may name exclude the hop-by-hop fields,
//     the framing, Host and the trace context (config.NotEditable,
//     enforced by corput check).
package edit

import (
	mrand "math/rand/v2"
	"net/netip"
	"regexp"
	"strings"
	"unsafe"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/h1"
)

// variable is what a template part writes.
type variable uint8

const (
	lit variable = iota
	clientIP
	requestID
	routeName
	originName
)

var varOf = map[string]variable{
	config.VarClientIP: clientIP, config.VarRequestID: requestID,
	config.VarRoute: routeName, config.VarOrigin: originName,
}

type part struct {
	v   variable
	lit string
}

// Value is a header edit's value: a constant, or literals and variables.
type Value struct {
	constant string
	parts    []part // nil: constant
}

// Field is a field a header edit writes.
type Field struct {
	Name  string
	Value Value
}

// Headers are one direction's header edits: fields of the names in
// Remove removed, those of Set's names replaced by Set's, then Add's
// appended.
type Headers struct {
	Remove []string
	Set    []Field
	Add    []Field
}

// empty reports whether h edits nothing.
func (h *Headers) empty() bool { return len(h.Remove)+len(h.Set)+len(h.Add) == 0 }

// drops reports whether a field named name is taken out: removed, or
// replaced by a set.
func (h *Headers) drops(name string) bool {
	for _, n := range h.Remove {
		if h1.EqualFold(n, name) {
			return true
		}
	}
	for i := range h.Set {
		if h1.EqualFold(h.Set[i].Name, name) {
			return true
		}
	}
	return false
}

// Route is a route's rewrites and header edits, compiled.
type Route struct {
	Name string // the route's name: %route%
	// prefix is the route's path_prefix, replaced by replace when
	// hasReplace.
	prefix, replace string
	hasReplace      bool
	regex           *regexp.Regexp // nil: no regex rewrite
	sub             string
	host            string // "": the client's
	Request         Headers
	Response        Headers
}

// Compile compiles route rt's rewrite and header edits (already checked:
// config.Validate); nil when it has none.
func Compile(rt *config.Route) *Route {
	if rt.Rewrite == nil && rt.RequestHeaders == nil && rt.ResponseHeaders == nil {
		return nil
	}
	e := &Route{Name: rt.RouteName(), prefix: rt.PathPrefix}
	if w := rt.Rewrite; w != nil {
		if w.ReplacePrefix != "" {
			e.replace, e.hasReplace = w.ReplacePrefix, true
		}
		if w.Regex != nil {
			e.regex, _ = config.CompileRewrite(w.Regex.Pattern)
			e.sub = w.Regex.Substitution
		}
		e.host = w.Host
	}
	e.Request = compileHeaders(rt.RequestHeaders)
	e.Response = compileHeaders(rt.ResponseHeaders)
	return e
}

func compileHeaders(h *config.HeaderEdits) Headers {
	var out Headers
	if h == nil {
		return out
	}
	out.Remove = append(out.Remove, h.Remove...)
	for _, f := range h.Set {
		out.Set = append(out.Set, Field{Name: f.Name, Value: compileValue(f.Value)})
	}
	for _, f := range h.Add {
		out.Add = append(out.Add, Field{Name: f.Name, Value: compileValue(f.Value)})
	}
	return out
}

func compileValue(s string) Value {
	parts, _ := config.ParseTemplate(s)
	if len(parts) == 0 {
		return Value{}
	}
	if len(parts) == 1 && parts[0].Var == "" {
		return Value{constant: parts[0].Lit}
	}
	v := Value{parts: make([]part, len(parts))}
	for i, p := range parts {
		v.parts[i] = part{v: varOf[p.Var], lit: p.Lit}
	}
	return v
}

// rewritePath appends the path the origin gets for path (the normalized
// path the route matched) to dst, and reports whether the route rewrites
// it.
func (e *Route) rewritePath(dst []byte, path string) ([]byte, bool) {
	switch {
	case len(path) == 0 || path[0] != '/':
		return dst, false // "*": nothing to rewrite
	case e.hasReplace:
		// The prefix's own trailing '/' stays with the rest, so that "/"
		// replacing "/api/" leaves "/x" of "/api/x", as replacing "/api".
		p := strings.TrimSuffix(e.prefix, "/")
		if !strings.HasPrefix(path, p) {
			return dst, false
		}
		start := len(dst)
		dst = append(dst, strings.TrimSuffix(e.replace, "/")...)
		rest := path[len(p):]
		if len(dst) == start && (rest == "" || rest[0] != '/') {
			dst = append(dst, '/')
		}
		return append(dst, rest...), true
	case e.regex != nil:
		out := e.regex.ReplaceAllString(path, e.sub)
		if out == "" || out[0] != '/' {
			dst = append(dst, '/')
		}
		return append(dst, out...), true
	}
	return dst, false
}

// RequestID is downstream.request_id, readied for requests.
type RequestID struct {
	header string // as configured, e.g. X-Request-ID
	lower  string // its lower-case name, as a head's Value looks it up
	ret    bool   // returned to the client
	// rand draws the generated ids' bits: nil is math/rand/v2's
	// (runtime's ChaCha8, per thread, no lock).
	rand func() uint64
}

// NewRequestID readies c (nil: none) for requests; rand draws generated
// ids' bits (nil: math/rand/v2's generator; a test's seeded source).
func NewRequestID(c *config.RequestID, rand func() uint64) *RequestID {
	if c == nil {
		return nil
	}
	return &RequestID{header: c.Header, lower: strings.ToLower(c.Header), ret: c.ReturnToClient, rand: rand}
}

// Fields is a request's header fields, by lower-case name (both serving
// paths' heads: forward.Prior).
type Fields interface {
	Value(name string, i int) ([]byte, bool)
}

// maxID is the longest id kept from a trusted proxy; a longer one is
// replaced.
const maxID = 128

// State is one request's edits: its request id, the variables' values,
// and the buffers its expanded values and rewritten target live in. The
// fast path keeps one per client connection (in package proxy's Stream);
// the zero value is ready.
type State struct {
	// Durable says the client keeps the response head's strings past the
	// request (net/http's path): the values written there are then
	// allocated, not views of the State's buffer.
	Durable bool
	// ID is the request's id, "" without downstream.request_id; a view of
	// the State, valid until the next Begin.
	ID string

	rid    *RequestID
	rt     *Route
	client netip.Addr
	origin string
	idBuf  [maxID]byte
	buf    []byte
	resp   []hpack.HeaderField
}

// Begin starts a request: its id is a trusted proxy's (its first field
// of the name, when it is 1 to 128 visible ASCII bytes), else one
// generated, when rid is set; none without.
func (s *State) Begin(rid *RequestID, head Fields, trusted bool) {
	s.rid, s.rt, s.ID, s.buf = rid, nil, "", s.buf[:0]
	if rid == nil {
		return
	}
	if trusted && head != nil {
		if v, ok := head.Value(rid.lower, 0); ok && validID(v) {
			n := copy(s.idBuf[:], v)
			s.ID = view(s.idBuf[:n])
			return
		}
	}
	s.ID = view(rid.generate(&s.idBuf))
}

// validID reports whether v may be kept as an id: 1 to maxID visible
// ASCII bytes.
func validID(v []byte) bool {
	if len(v) == 0 || len(v) > maxID {
		return false
	}
	for _, c := range v {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// generate writes a random UUIDv4 (RFC 9562 §5.4) into b and returns it.
func (r *RequestID) generate(b *[maxID]byte) []byte {
	var hi, lo uint64
	if r.rand != nil {
		hi, lo = r.rand(), r.rand()
	} else {
		hi, lo = mrand.Uint64(), mrand.Uint64()
	}
	hi = hi&^(0xf<<12) | 0x4<<12 // version 4
	lo = lo&^(0x3<<62) | 0x2<<62 // variant 10
	const digits = "0123456789abcdef"
	out := b[:36]
	j := 0
	for i := 0; i < 32; i++ {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			out[j] = '-'
			j++
		}
		w := hi
		if i >= 16 {
			w = lo
		}
		out[j] = digits[w>>(60-4*(i%16))&0xf]
		j++
	}
	return out
}

// On reports whether the request has anything to edit: a request id, or
// a route's edits.
func (s *State) On(rt *Route) bool { return s.rid != nil || rt != nil }

// Request applies the request's edits to r, the request as its serving
// path readied it for the origin named origin: the request id in its
// field (any other of the name out), then route rt's (nil: none) path
// rewrite of path (the normalized path it matched; the query kept from
// r.Target), its Host, and its request header edits. client is the
// client's address (%client_ip%). It sets r.Edit to s when the response
// has edits to take (rt's, or the id returned to the client).
func (s *State) Request(r *exchange.Request, rt *Route, path string, client netip.Addr, origin string) {
	s.rt, s.client, s.origin = rt, client, origin
	r.Edit = nil
	if s.rid != nil {
		r.Fields = remove(r.Fields, s.rid.header, nil)
		r.Fields = append(r.Fields, hpack.HeaderField{Name: s.rid.header, Value: s.ID})
		if s.rid.ret {
			r.Edit = s
		}
	}
	if rt == nil {
		return
	}
	start := len(s.buf)
	if b, ok := rt.rewritePath(s.buf, path); ok {
		if q := strings.IndexByte(r.Target, '?'); q >= 0 {
			b = append(b, r.Target[q:]...)
		}
		s.buf = b
		r.Target = view(s.buf[start:])
	}
	if rt.host != "" {
		r.Host = rt.host
	}
	h := &rt.Request
	if !h.empty() {
		r.Fields = remove(r.Fields, "", h)
		r.Fields = s.appendFields(r.Fields, h, false)
	}
	if !rt.Response.empty() {
		r.Edit = s
	}
}

// EditHead applies the response edits to h (exchange.Editor): the route's
// response header edits, then the request id returned to the client.
func (s *State) EditHead(h *exchange.Head) {
	f := s.resp[:0]
	var rh *Headers
	if s.rt != nil && !s.rt.Response.empty() {
		rh = &s.rt.Response
	}
	ret := s.rid != nil && s.rid.ret
	for i := range h.Fields {
		name := h.Fields[i].Name
		if rh != nil && rh.drops(name) || ret && h1.EqualFold(name, s.rid.header) {
			continue
		}
		f = append(f, h.Fields[i])
	}
	if rh != nil {
		f = s.appendFields(f, rh, s.Durable)
	}
	if ret {
		f = append(f, hpack.HeaderField{Name: s.rid.header, Value: s.durable(s.ID)})
	}
	s.resp = f
	h.Fields = f
}

// AppendID appends the request id's field to an answer the gateway makes
// itself when it is returned to the client.
func (s *State) AppendID(f []hpack.HeaderField) []hpack.HeaderField {
	if s.rid == nil || !s.rid.ret {
		return f
	}
	return append(f, hpack.HeaderField{Name: s.rid.header, Value: s.durable(s.ID)})
}

// Keep is v, a view of a buffer of the request's, as a string the client
// may keep past the request when s.Durable (a copy), else v itself.
func (s *State) Keep(v string) string { return s.durable(v) }

// durable is v as a string that outlives the request when s.Durable.
func (s *State) durable(v string) string {
	if s.Durable {
		return strings.Clone(v)
	}
	return v
}

// remove drops the fields named name, or that h drops.
func remove(fs []hpack.HeaderField, name string, h *Headers) []hpack.HeaderField {
	out := fs[:0]
	for _, f := range fs {
		if name != "" && h1.EqualFold(f.Name, name) || h != nil && h.drops(f.Name) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// appendFields appends h's set and added fields, their values expanded.
func (s *State) appendFields(fs []hpack.HeaderField, h *Headers, durable bool) []hpack.HeaderField {
	for i := range h.Set {
		fs = append(fs, hpack.HeaderField{Name: h.Set[i].Name, Value: s.expand(&h.Set[i].Value, durable)})
	}
	for i := range h.Add {
		fs = append(fs, hpack.HeaderField{Name: h.Add[i].Name, Value: s.expand(&h.Add[i].Value, durable)})
	}
	return fs
}

// expand is v's value for this request: a constant as it is, else written
// into the State's buffer and viewed there (allocated when durable).
func (s *State) expand(v *Value, durable bool) string {
	if v.parts == nil {
		return v.constant
	}
	start := len(s.buf)
	for _, p := range v.parts {
		switch p.v {
		case lit:
			s.buf = append(s.buf, p.lit...)
		case clientIP:
			if s.client.IsValid() {
				s.buf = s.client.AppendTo(s.buf)
			}
		case requestID:
			s.buf = append(s.buf, s.ID...)
		case routeName:
			if s.rt != nil {
				s.buf = append(s.buf, s.rt.Name...)
			}
		case originName:
			s.buf = append(s.buf, s.origin...)
		}
	}
	if durable {
		return string(s.buf[start:])
	}
	return view(s.buf[start:])
}

// view is b as a string, without a copy: b is not written while the view
// is in use (a buffer that grows leaves its old array to the views).
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
