package gateway

import (
	"net"
	"sort"
	"strings"

	"github.com/corput/corput/internal/h1"
)

// Route maps requests for a host and path prefix to an origin.
type Route struct {
	Host       string // "" matches any host; "*.example.com" matches subdomains
	PathPrefix string // "" or "/" matches every path
	Origin     string
}

// Router picks the origin for a request: among routes whose host matches
// (an exact host beats a wildcard, which beats "any"), the longest matching
// path prefix wins. It is immutable after NewRouter.
type Router struct {
	exact    map[string][]Route // by lower-case host
	wildcard []Route            // Host "*.suffix", longest suffix first
	any      []Route
}

// NewRouter builds a Router. Within each host group, routes are tried
// longest prefix first.
func NewRouter(routes []Route) *Router {
	r := &Router{exact: map[string][]Route{}}
	for _, rt := range routes {
		if rt.PathPrefix == "" {
			rt.PathPrefix = "/"
		}
		h := strings.ToLower(rt.Host)
		switch {
		case h == "":
			r.any = append(r.any, rt)
		case strings.HasPrefix(h, "*."):
			rt.Host = h
			r.wildcard = append(r.wildcard, rt)
		default:
			r.exact[h] = append(r.exact[h], rt)
		}
	}
	byPrefix := func(rs []Route) {
		sort.SliceStable(rs, func(i, j int) bool { return len(rs[i].PathPrefix) > len(rs[j].PathPrefix) })
	}
	for _, rs := range r.exact {
		byPrefix(rs)
	}
	byPrefix(r.any)
	sort.SliceStable(r.wildcard, func(i, j int) bool {
		if len(r.wildcard[i].Host) != len(r.wildcard[j].Host) {
			return len(r.wildcard[i].Host) > len(r.wildcard[j].Host)
		}
		return len(r.wildcard[i].PathPrefix) > len(r.wildcard[j].PathPrefix)
	})
	return r
}

// Match returns the origin for host (with or without a port) and path.
func (r *Router) Match(host, path string) (string, bool) {
	host = stripPort(host)
	if rs, ok := r.exact[host]; ok {
		if o, ok := matchPrefix(rs, path); ok {
			return o, true
		}
	} else if lower := strings.ToLower(host); lower != host {
		if o, ok := matchPrefix(r.exact[lower], path); ok {
			return o, true
		}
	}
	for _, rt := range r.wildcard {
		if hasSuffixFold(host, rt.Host[1:]) && strings.HasPrefix(path, rt.PathPrefix) {
			return rt.Origin, true
		}
	}
	return matchPrefix(r.any, path)
}

func matchPrefix(rs []Route, path string) (string, bool) {
	for _, rt := range rs {
		if strings.HasPrefix(path, rt.PathPrefix) {
			return rt.Origin, true
		}
	}
	return "", false
}

func hasSuffixFold(s, suffix string) bool {
	return len(s) > len(suffix) && h1.EqualFold(s[len(s)-len(suffix):], suffix)
}

func stripPort(host string) string {
	if strings.IndexByte(host, ':') < 0 {
		return host // the common case, without the error SplitHostPort would allocate
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}
