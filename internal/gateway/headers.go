package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/corput/corput/internal/h1"
)

// hopHeaders are the hop-by-hop headers of RFC 9110 §7.6.1, removed before
// a request or response crosses the gateway.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopHeaders deletes hop-by-hop headers and every header named in
// Connection. "TE: trailers" survives (gRPC needs it end to end), and so do
// Connection/Upgrade when upgrade names the protocol being switched to.
func removeHopHeaders(h http.Header, upgrade string) {
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
	for _, name := range hopHeaders {
		h.Del(name)
	}
	if teTrailers {
		h["Te"] = []string{"trailers"}
	}
	if upgrade != "" {
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{upgrade}
	}
}

// upgradeType returns the protocol a request or response asks to switch
// to, or "". An "h2c" upgrade is about this hop only (RFC 7540 §3.2,
// deprecated by RFC 9113 §3.1): it is never passed through, and the request
// is served as plain HTTP/1.1 with the upgrade headers stripped.
func upgradeType(h http.Header) string {
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

// Forwarding sets the X-Forwarded-* headers. Incoming X-Forwarded-* values
// are trusted only from peers inside a trusted proxy prefix; from anyone
// else they are replaced, so a client cannot forge its address.
type Forwarding struct {
	Trusted []netip.Prefix
}

func (f Forwarding) trusted(peer netip.Addr) bool {
	for _, p := range f.Trusted {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// peer returns the address X-Forwarded-For names for a connection from
// remoteAddr, and whether that peer is a trusted proxy.
func (f Forwarding) peer(remoteAddr string) (ip string, trusted bool) {
	ip, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		ip = remoteAddr
	}
	addr, perr := netip.ParseAddr(ip)
	return ip, perr == nil && f.trusted(addr.Unmap())
}

// joinNonBlank joins the non-blank values of a list header with ", ", so a
// blank X-Forwarded-For from a proxy adds no empty element.
func joinNonBlank(vv []string) string {
	var out string
	for _, v := range vv {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if out != "" {
			out += ", "
		}
		out += v
	}
	return out
}

// Apply rewrites out's X-Forwarded-For, -Proto and -Host for a request
// received from remoteAddr for host over TLS or not.
func (f Forwarding) Apply(out http.Header, remoteAddr, host string, tls bool) {
	ipStr, trusted := f.peer(remoteAddr)
	prior := ""
	if trusted {
		prior = joinNonBlank(out["X-Forwarded-For"])
	}
	if prior != "" {
		out.Set("X-Forwarded-For", prior+", "+ipStr)
	} else {
		out.Set("X-Forwarded-For", ipStr)
	}
	if !trusted || out.Get("X-Forwarded-Proto") == "" {
		if tls {
			out.Set("X-Forwarded-Proto", "https")
		} else {
			out.Set("X-Forwarded-Proto", "http")
		}
	}
	if !trusted || out.Get("X-Forwarded-Host") == "" {
		out.Set("X-Forwarded-Host", host)
	}
}
