package proxy

import (
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/route"
)

// A route's own answer (routes[].redirect, routes[].answer): written here
// once for both serving paths, after the edge admitted the request and
// before anything else — no SLO admission, no loop, no origin. It is
// counted, logged (origin and error empty) and traced as every request.
// It allocates nothing once the stream's buffers have grown (a stream kept
// per connection on the fast path).

// direct writes route r's own answer to the request in, whose normalized
// path is path, and returns its status. HEAD gets the head alone, with
// the length a GET would get.
func (s *Stream) direct(c exchange.Client, r *route.Route, in *Inbound, path string) int {
	h := &s.ans
	*h = exchange.Head{Fields: s.dirFields[:0], Framing: exchange.Length}
	body := ""
	if rd := r.Redirect; rd != nil {
		h.Status = rd.Status
		s.loc = Location(s.loc[:0], rd, r.PathPrefix, in.Host, path, in.Target, in.TLS)
		h.Fields = append(h.Fields, hpack.HeaderField{Name: "Location", Value: s.edit.Keep(unsafe.String(unsafe.SliceData(s.loc), len(s.loc)))})
	} else {
		a := r.Answer
		h.Status, body = a.Status, a.Body
		for _, f := range a.Fields {
			h.Fields = append(h.Fields, hpack.HeaderField{Name: f[0], Value: f[1]})
		}
	}
	h.Fields = s.edit.AppendID(h.Fields) // downstream.request_id.return_to_client
	s.dirFields = h.Fields[:0]           // grown once, kept
	h.Length = int64(len(body))
	if in.Method == http.MethodHead {
		h.Framing = exchange.None
	}
	if c.WriteHead(h) != nil {
		return h.Status
	}
	n := 0
	if h.Framing == exchange.Length && body != "" {
		n, _ = c.Write(unsafe.Slice(unsafe.StringData(body), len(body))) // the writer copies it
	}
	c.End(nil, int64(n))
	c.Flush()
	return h.Status
}

// Location appends to b the Location of redirect rd for a request for
// host (its Host, with or without a port) and target (its request
// target; an absolute one's scheme and authority are skipped), whose
// normalized path, matched by a route of path prefix prefix, is path;
// tls: the request came over TLS. Each part rd leaves out keeps the
// request's: the scheme; the host; the port — with rd.Scheme set and no
// rd.Port, the scheme's own; the path; the query unless rd.StripQuery. A
// port that is its scheme's own (http 80, https 443) is left out. A
// request without a host, redirected without rd.Host, gets the path
// alone (a relative Location).
func Location(b []byte, rd *route.Redirect, prefix, host, path, target string, tls bool) []byte {
	scheme := rd.Scheme
	if scheme == "" {
		scheme = "http"
		if tls {
			scheme = "https"
		}
	}
	reqHost, reqPort := splitHost(host)
	if h := rd.Host; h != "" || reqHost != "" {
		if h == "" {
			h = reqHost
		}
		b = append(append(append(b, scheme...), "://"...), h...)
		switch {
		case rd.Port != 0:
			if !(rd.Port == 80 && scheme == "http" || rd.Port == 443 && scheme == "https") {
				b = strconv.AppendInt(append(b, ':'), int64(rd.Port), 10)
			}
		case rd.Scheme == "" && reqPort != "":
			b = append(append(b, ':'), reqPort...)
		}
	}
	switch {
	case rd.Path != "":
		b = append(b, rd.Path...)
	case rd.PrefixSet && strings.HasPrefix(path, prefix):
		b = append(append(b, rd.Prefix...), path[len(prefix):]...)
	default:
		b = append(b, path...)
	}
	if !rd.StripQuery {
		if _, q, ok := strings.Cut(target, "?"); ok && q != "" {
			b = append(append(b, '?'), q...)
		}
	}
	return b
}

// splitHost splits a Host field's value into its host (an IPv6 literal
// with its brackets) and port ("" for none), without an allocation.
func splitHost(host string) (string, string) {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			if rest := host[i+1:]; strings.HasPrefix(rest, ":") {
				return host[:i+1], rest[1:]
			}
			return host[:i+1], ""
		}
		return host, ""
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		return host[:i], host[i+1:]
	}
	return host, ""
}
