// Package route maps a request to the route that serves it: among the
// routes whose host matches (an exact host beats a wildcard, which beats
// "any"), the longest matching path prefix wins.
//
// Invariants:
//   - A Router is immutable once built: a reload builds a new one, and
//     requests read it without a lock.
//   - Lookup allocates nothing for a host without a port (the common
//     case).
package route

import (
	"net"
	"sort"
	"strings"
	"time"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
)

// Route maps requests for a host and path prefix to an origin.
type Route struct {
	Host       string // "" matches any host; "*.example.com" matches subdomains
	PathPrefix string // "" or "/" matches every path
	Origin     string
	// Cost and Class are the route's workload class's (routes[].class)
	// cost and index; Cost 0: the route names no class, and the
	// workload's match rules decide.
	Cost  float64
	Class int
	// Low: routes[].priority is low, shed first by the SLO guard.
	Low bool
	// Retry is the route's own retry policy (routes[].retry) on its
	// origin; nil: the origin's.
	Retry *forward.Policy
	// Index is the route's place in routes[]: per-route state kept
	// elsewhere (rate limits, address rules) is found by it.
	Index int
	// Timeouts are the route's overrides of its origin's time limits
	// (routes[].timeouts); a zero one takes the origin's.
	Timeouts Timeouts
	// MaxBody is routes[].max_request_body_bytes; 0: unlimited.
	MaxBody int64
}

// Timeouts are time limits a route may set for its requests
// (docs/gateway.md, "Time limits").
type Timeouts struct {
	ResponseHeader, StreamIdle, Request, GRPCMax time.Duration
	PerTry                                       time.Duration // routes[].retry.per_try_timeout
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
	if rt := r.Lookup(host, path); rt != nil {
		return rt.Origin, true
	}
	return "", false
}

// Lookup returns the route for host (with or without a port) and path, nil
// when none matches. The route is the router's: do not change it.
func (r *Router) Lookup(host, path string) *Route {
	host = stripPort(host)
	if rs, ok := r.exact[host]; ok {
		if rt := matchPrefix(rs, path); rt != nil {
			return rt
		}
	} else if lower := strings.ToLower(host); lower != host {
		if rt := matchPrefix(r.exact[lower], path); rt != nil {
			return rt
		}
	}
	for i := range r.wildcard {
		if rt := &r.wildcard[i]; hasSuffixFold(host, rt.Host[1:]) && strings.HasPrefix(path, rt.PathPrefix) {
			return rt
		}
	}
	return matchPrefix(r.any, path)
}

func matchPrefix(rs []Route, path string) *Route {
	for i := range rs {
		if strings.HasPrefix(path, rs[i].PathPrefix) {
			return &rs[i]
		}
	}
	return nil
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
