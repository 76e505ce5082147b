package forward

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"unsafe"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/h1"
	"golang.org/x/net/http/httpguts"
)

// Header hygiene, for both serving paths: the hop-by-hop fields that never
// cross the gateway, and the X-Forwarded-* fields it adds.

// RemoveHop deletes hop-by-hop headers and every header named in
// Connection. "TE: trailers" survives (gRPC needs it end to end), and so do
// Connection/Upgrade when upgrade names the protocol being switched to.
func RemoveHop(h http.Header, upgrade string) {
	// Before Connection's names go: a compliant client sends "Connection:
	// TE" with its TE (RFC 9110 §10.1.4), and "trailers" must survive it.
	teTrailers := httpguts.HeaderValuesContainsToken(h["Te"], "trailers")
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" && !h1.EqualFold(name, "Upgrade") {
				h.Del(name)
			}
		}
	}
	for _, name := range h1.HopFields {
		delete(h, name) // canonical already: Del would canonicalise each name again, per request
	}
	if teTrailers {
		h["Te"] = []string{"trailers"}
	}
	if upgrade != "" {
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{upgrade}
	}
}

// UpgradeType returns the protocol a request or response asks to switch
// to, or "". An "h2c" upgrade is about this hop only (RFC 7540 §3.2,
// deprecated by RFC 9113 §3.1): it is never passed through, and the request
// is served as plain HTTP/1.1 with the upgrade headers stripped.
func UpgradeType(h http.Header) string {
	for _, v := range h["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if h1.EqualFold(strings.TrimSpace(tok), "upgrade") {
				if up := h.Get("Upgrade"); !h1.EqualFold(strings.TrimSpace(up), "h2c") {
					return up
				}
				return ""
			}
		}
	}
	return ""
}

// Idempotent reports whether a request of method may be sent twice
// (RFC 9110 §9.2.2).
func Idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// Forwarding sets the X-Forwarded-* headers. Incoming X-Forwarded-* values
// are trusted only from peers inside a trusted proxy prefix; from anyone
// else they are replaced, so a client cannot forge its address.
type Forwarding struct {
	Trusted []netip.Prefix
	// Underscores is downstream.underscore_headers: what a request field
	// whose name has a '_' meets ("" is the default, drop).
	Underscores config.UnderscoreHeaders
	// Forwarded is downstream.forwarded: Write adds the Forwarded field
	// (RFC 7239) beside X-Forwarded-*.
	Forwarded bool
}

// Names applies the field-name rules to h, a request's header or trailer
// fields on net/http's path, and returns why the request must be refused
// ("" when it may go on): a name that disguises a protected one
// (h1.Disguised) whatever Underscores is, and under reject any name with a
// '_'. Under drop (the default) the names with a '_' are deleted from h.
// The fast path applies the same rules to its parsed head (h1.Head's
// Underscores, and a disguised name is not simple there).
func (f Forwarding) Names(h http.Header) string {
	for k := range h {
		if !h1.Underscore(k) && !h1.Disguised(k) {
			continue
		}
		switch {
		case h1.Disguised(k):
			return "a protected field name written with '_' or a run of separators"
		case f.Underscores == config.UnderscoreReject:
			return "a field name with '_' (downstream.underscore_headers: reject)"
		case f.Underscores != config.UnderscoreAllow:
			delete(h, k)
		}
	}
	return ""
}

// Peer is what a downstream connection's X-Forwarded-* fields need, found
// once per connection.
type Peer struct {
	IP      string // the address X-Forwarded-For names
	Trusted bool   // a trusted proxy: its own X-Forwarded-* are kept
	Proto   string // "http" or "https": the connection's scheme
	// Addr is the peer's address (the client's, or the load balancer's
	// PROXY header's), IPv4-mapped addresses unmapped; invalid when
	// remoteAddr had none.
	Addr netip.Addr
	// Forwarded: Write adds the Forwarded field (Forwarding.Forwarded).
	Forwarded bool
}

// Peer describes a connection from remoteAddr, over TLS or not.
func (f Forwarding) Peer(remoteAddr string, tls bool) Peer {
	ip, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		ip = remoteAddr
	}
	p := Peer{IP: ip, Proto: "http", Forwarded: f.Forwarded}
	if tls {
		p.Proto = "https"
	}
	if addr, err := netip.ParseAddr(ip); err == nil {
		addr = addr.Unmap()
		p.Addr = addr
		for _, pr := range f.Trusted {
			if pr.Contains(addr) {
				p.Trusted = true
				break
			}
		}
	}
	return p
}

// Client is the request's client address: the peer's, or from a trusted
// peer the last address of its last X-Forwarded-For field (the one it
// appended), as source_ip hashing reads it. Rate limits and address rules
// read it. It is invalid when neither is an address.
func (p Peer) Client(f Prior) netip.Addr {
	if p.Trusted {
		if a := lastForwarded(f); len(a) > 0 {
			addr, err := netip.ParseAddr(unsafe.String(unsafe.SliceData(a), len(a)))
			if err != nil {
				return netip.Addr{}
			}
			return addr.Unmap()
		}
	}
	return p.Addr
}

// Prior is a request's own X-Forwarded-* fields, which a trusted peer's
// request keeps.
type Prior interface {
	// Value is the value of the i-th field (from 0) named name (lower
	// case), and whether there is one.
	Value(name string, i int) ([]byte, bool)
}

// Write emits the X-Forwarded-For, -Proto and -Host fields of a request
// from p for host, and Forwarded when p.Forwarded (forwarded.go), calling
// set once per field line (value is valid only
// during the call). A trusted peer's X-Forwarded-For is appended to (its
// blank values skipped), and its -Proto and -Host are kept when the first
// of them has a value; anyone else's are replaced. scratch holds
// X-Forwarded-For's joined value; Write returns it for reuse. It is the
// one writer of both serving paths, and allocates nothing once scratch is
// large enough.
func (p Peer) Write(host []byte, prior Prior, scratch []byte, set func(name string, value []byte)) []byte {
	b := scratch[:0]
	if p.Trusted {
		b = appendPrior(b, prior, "x-forwarded-for")
	}
	b = append(b, p.IP...)
	set("X-Forwarded-For", b)
	p.keepOr(prior, "x-forwarded-proto", "X-Forwarded-Proto", bytesOf(p.Proto), set)
	p.keepOr(prior, "x-forwarded-host", "X-Forwarded-Host", host, set)
	if p.Forwarded {
		b = p.writeForwarded(host, prior, b, set)
	}
	return b
}

// keepOr sets a trusted peer's values of name when the first has one, or
// value.
func (p Peer) keepOr(prior Prior, name, canonical string, value []byte, set func(string, []byte)) {
	if first, _ := prior.Value(name, 0); p.Trusted && len(first) > 0 {
		for i := 0; ; i++ {
			v, ok := prior.Value(name, i)
			if !ok {
				return
			}
			set(canonical, v)
		}
	}
	set(canonical, value)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// Apply rewrites h's X-Forwarded-For, -Proto and -Host for a request
// received from remoteAddr for host over TLS or not (net/http's path; the
// fast path calls Write with the raw head).
func (f Forwarding) Apply(h http.Header, remoteAddr, host string, tls bool) {
	// Write reads a field's prior values before it sets the field, so the
	// lines are collected (their bytes in one buffer) and stored after it:
	// one string and one []string for all of them, not one each.
	type line struct {
		name     string
		from, to int
	}
	var lineArr [8]line
	var bufArr [256]byte
	lines, buf := lineArr[:0], bufArr[:0]
	f.Peer(remoteAddr, tls).Write(bytesOf(host), headerPrior(h), nil, func(name string, value []byte) {
		lines = append(lines, line{name, len(buf), len(buf) + len(value)})
		buf = append(buf, value...)
	})
	all, vals := string(buf), make([]string, len(lines))
	for i := 0; i < len(lines); {
		j := i
		for ; j < len(lines) && lines[j].name == lines[i].name; j++ {
			vals[j] = all[lines[j].from:lines[j].to]
		}
		h[lines[i].name] = vals[i:j:j]
		i = j
	}
}

// bytesOf views s as bytes, for reading only.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// headerPrior is an http.Header as a Prior.
type headerPrior http.Header

// HeaderFields is h as a Prior: what a KeySource and the trace context
// propagator read on net/http's path.
func HeaderFields(h http.Header) Prior { return headerPrior(h) }

func (h headerPrior) Value(name string, i int) ([]byte, bool) {
	vv := h[canonical(name)]
	if i >= len(vv) {
		return nil, false
	}
	return bytesOf(vv[i]), true
}

// canonical is http.CanonicalHeaderKey without an allocation for the
// names Write asks for.
func canonical(name string) string {
	switch name {
	case "x-forwarded-for":
		return "X-Forwarded-For"
	case "x-forwarded-proto":
		return "X-Forwarded-Proto"
	case "x-forwarded-host":
		return "X-Forwarded-Host"
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "cookie":
		return "Cookie"
	case "forwarded":
		return "Forwarded"
	}
	return http.CanonicalHeaderKey(name)
}

// appendPrior appends to b the non-empty values of the request's field
// name (lower case) as it arrived, each trimmed and followed by ", ": a
// trusted peer's chain that the gateway's hop then extends.
func appendPrior(b []byte, prior Prior, name string) []byte {
	for i := 0; ; i++ {
		v, ok := prior.Value(name, i)
		if !ok {
			break
		}
		if v = trimSpace(v); len(v) > 0 {
			b = append(append(b, v...), ", "...)
		}
	}
	return b
}
