// Package route maps a request to the route that serves it. Routes are
// grouped by host (an exact host beats a wildcard, the longest wildcard
// first, which beats "any"); within a group the first route, in precedence
// order, whose path, methods, headers and query all match wins, and a
// group without one falls through to the next. The precedence follows the
// Gateway API's HTTPRoute rules (docs/decisions.md, "Route matching"): an
// exact path, then the longest prefix (a regular expression ranks as a
// prefix as long as its literal prefix, after a prefix of that length),
// then a route with methods, then more header matches, then more query
// matches, then config order. Routes of host and path prefix alone are
// matched as they always were: exact host, wildcard, any, longest prefix.
//
// Paths are matched normalized (Normalize): a caller normalizes the path
// before Lookup, and answers 400 to one that cannot be.
//
// Invariants:
//   - A Router is immutable once built: a reload builds a new one, and
//     requests read it without a lock; regular expressions are compiled
//     once, by the configuration's loader.
//   - Lookup allocates nothing for a host without a port (the common
//     case) and routes of host and path prefix; Normalize allocates
//     nothing for a path that is already normal.
package route

import (
	"net"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/corput/corput/internal/edit"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h1"
)

// Route maps requests for a host and path prefix to an origin.
type Route struct {
	Host       string // "" matches any host; "*.example.com" matches subdomains
	PathPrefix string // "" or "/" matches every path; unused with PathExact or PathRegex
	// PathExact, when set, is the one path the route matches.
	PathExact string
	// PathRegex, when set, must match the whole path (RE2; the loader
	// anchors it).
	PathRegex *regexp.Regexp
	// Methods, when set, are the methods the route matches (exact, case
	// sensitive).
	Methods []string
	// Headers and Query must all match.
	Headers []HeaderMatch
	Query   []QueryMatch
	Origin  string // "" with Split
	// Split, when set, picks the origin of each request instead of
	// Origin (routes[].split).
	Split *Split
	// Requests counts the requests routed by a route without a split
	// (corput_route_requests_total{route,origin}); nil: none.
	Requests Counter
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
	// Redirect or Answer, when set, is the route's own answer: it has no
	// Origin.
	Redirect *Redirect
	Answer   *Answer
	// Edit is the route's rewrites and header edits (routes[].rewrite,
	// request_headers, response_headers), nil for none.
	Edit *edit.Route
}

// Timeouts are time limits a route may set for its requests
// (docs/gateway.md, "Time limits").
type Timeouts struct {
	ResponseHeader, StreamIdle, Request, GRPCMax time.Duration
	PerTry                                       time.Duration // routes[].retry.per_try_timeout
}

// Router picks the route for a request (the package doc's precedence). It
// is immutable after NewRouter.
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
	byPrecedence := func(rs []Route) {
		sort.SliceStable(rs, func(i, j int) bool { return before(&rs[i], &rs[j]) })
	}
	for _, rs := range r.exact {
		byPrecedence(rs)
	}
	byPrecedence(r.any)
	sort.SliceStable(r.wildcard, func(i, j int) bool {
		if len(r.wildcard[i].Host) != len(r.wildcard[j].Host) {
			return len(r.wildcard[i].Host) > len(r.wildcard[j].Host)
		}
		return before(&r.wildcard[i], &r.wildcard[j])
	})
	return r
}

// Match returns the origin for host (with or without a port) and path,
// for a GET without fields or query.
func (r *Router) Match(host, path string) (string, bool) {
	if rt := r.Lookup(&Request{Method: "GET", Host: host, Path: path}); rt != nil {
		return rt.Origin, true
	}
	return "", false
}

// Lookup returns the route for q, nil when none matches; q.Path is
// normalized (Normalize). The route is the router's: do not change it.
func (r *Router) Lookup(q *Request) *Route {
	host := stripPort(q.Host)
	if rs, ok := r.exact[host]; ok {
		if rt := matchFirst(rs, q); rt != nil {
			return rt
		}
	} else if lower := strings.ToLower(host); lower != host {
		if rt := matchFirst(r.exact[lower], q); rt != nil {
			return rt
		}
	}
	for i := range r.wildcard {
		if rt := &r.wildcard[i]; hasSuffixFold(host, rt.Host[1:]) && rt.matches(q) {
			return rt
		}
	}
	return matchFirst(r.any, q)
}

func matchFirst(rs []Route, q *Request) *Route {
	for i := range rs {
		if rs[i].matches(q) {
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
