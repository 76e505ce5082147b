package config

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// A route's own answers: routes[].redirect and routes[].answer, the
// alternatives to routes[].origin (docs/gateway.md, "Redirects and fixed
// answers"). A route so answered touches no origin.

// RouteRedirect is routes[].redirect: the route's requests are answered
// with a redirect whose Location is built from the request, each part
// left out keeping the request's (Envoy's redirect, the Gateway API's
// RequestRedirect).
type RouteRedirect struct {
	// Scheme is "http" or "https"; "": the request's.
	Scheme string `yaml:"scheme"`
	// Host is the Location's host, without a port; "": the request's.
	Host string `yaml:"host"`
	// Port is the Location's port (left out of Location when it is the
	// scheme's own, 80 or 443); 0: the scheme's when Scheme is set, else
	// the request's Host's port.
	Port int `yaml:"port"`
	// Path replaces the whole path; Prefix replaces the route's
	// path_prefix, keeping the rest. At most one; neither keeps the path.
	Path   string `yaml:"path"`
	Prefix string `yaml:"prefix"`
	// StripQuery leaves the request's query out of Location.
	StripQuery bool `yaml:"strip_query"`
	// Status is 301, 302, 303, 307 or 308; 0 is 302.
	Status int `yaml:"status"`
}

// RouteAnswer is routes[].answer: the route's requests are answered with
// a fixed answer (Envoy's direct_response), e.g. during maintenance.
type RouteAnswer struct {
	Status int    `yaml:"status"` // 200–599
	Body   string `yaml:"body"`   // at most MaxAnswerBody bytes
	// ContentType is the answer's Content-Type; "": text/plain;
	// charset=utf-8 when Body is not empty, none otherwise.
	ContentType string `yaml:"content_type"`
	// Headers are more fields of the answer, in order.
	Headers []AnswerHeader `yaml:"headers"`
}

// AnswerHeader is one of routes[].answer.headers.
type AnswerHeader struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

// MaxAnswerBody bounds routes[].answer.body: a fixed answer is a short
// page, held in memory with the configuration.
const MaxAnswerBody = 64 << 10

// DefaultRedirectStatus is routes[].redirect.status when left out.
const DefaultRedirectStatus = http.StatusFound

// RedirectStatus is the redirect's status: Status, or 302.
func (rd *RouteRedirect) RedirectStatus() int {
	if rd.Status == 0 {
		return DefaultRedirectStatus
	}
	return rd.Status
}

// AnswerContentType is the fixed answer's Content-Type ("" for none).
func (a *RouteAnswer) AnswerContentType() string {
	if a.ContentType == "" && a.Body != "" {
		return "text/plain; charset=utf-8"
	}
	return a.ContentType
}

// actions lists the keys of a route's action that it writes: a route
// has exactly one. A new kind of action is one line here.
func (rt *Route) actions() []string {
	var a []string
	add := func(set bool, key string) {
		if set {
			a = append(a, key)
		}
	}
	add(rt.Origin != "", "origin")
	add(rt.Split != nil, "split")
	add(rt.Redirect != nil, "redirect")
	add(rt.Answer != nil, "answer")
	return a
}

// Own reports whether the route answers its requests itself (a redirect
// or a fixed answer) instead of sending them to an origin.
func (rt *Route) Own() bool { return rt.Redirect != nil || rt.Answer != nil }

// checkAction checks that route i has exactly one action, and that
// action; origins counts the routes naming each origin.
func (c *Config) checkAction(r *reporter, i int, origins map[string]int) {
	rt := &c.Routes[i]
	p := joinIndex("routes", i)
	switch a := rt.actions(); len(a) {
	case 0:
		r.errorf(p+".origin", "missing; name the origin this route sends to (or split it between origins: split: [{origin: v1, weight: 95}, {origin: v2, weight: 5}]; or give it a redirect or an answer)")
		return
	case 1:
	default:
		r.errorf(p+"."+a[1], "the route has both %s and %s; give exactly one of origin, split, redirect and answer", a[0], a[1])
		return
	}
	switch {
	case rt.Redirect != nil:
		c.checkRedirect(r, i)
	case rt.Answer != nil:
		checkAnswer(r, p+".answer", rt.Answer)
	case rt.Split != nil:
		c.checkSplit(r, p, rt, origins)
		return
	default:
		if c.knownOrigin(r, p+".origin", rt.Origin, origins) {
			origins[rt.Origin]++
		}
		return
	}
	for _, k := range []string{"retry", "timeouts", "class", "priority", "max_request_body_bytes"} {
		if c.Written(p + "." + k) {
			r.warnf(p+"."+k, "has no effect: the route answers itself and sends nothing to an origin; remove it")
		}
	}
}

func (c *Config) checkRedirect(r *reporter, i int) {
	rt := &c.Routes[i]
	rd := rt.Redirect
	p := joinIndex("routes", i) + ".redirect"
	switch rd.Status {
	case 0, 301, 302, 303, 307, 308:
	default:
		r.errorf(p+".status", "%d is not a redirect status; use 301, 302 (the default), 303, 307 or 308", rd.Status)
	}
	switch rd.Scheme {
	case "", "http", "https":
	default:
		r.errorf(p+".scheme", "%q: use http or https, or leave it out to keep the request's", rd.Scheme)
	}
	if rd.Host != "" {
		if strings.HasPrefix(rd.Host, "*") {
			r.errorf(p+".host", "%q: a redirect names one host; write it without a wildcard", rd.Host)
		} else {
			checkRouteHost(r, p+".host", rd.Host)
		}
	}
	if rd.Port != 0 {
		checkRange(r, p+".port", rd.Port, 1, 65535, "the port written into Location (80 for http and 443 for https are left out)")
	}
	for _, k := range []struct{ key, v string }{{"path", rd.Path}, {"prefix", rd.Prefix}} {
		if k.v == "" {
			continue
		}
		if !strings.HasPrefix(k.v, "/") || !locationPath(k.v) {
			r.errorf(p+"."+k.key, "%q is not a path; start it with / and write it as it goes into Location, without a query, fragment, spaces or control characters (percent-encode them)", k.v)
		}
	}
	switch {
	case rd.Path != "" && rd.Prefix != "":
		r.errorf(p+".prefix", "give one of path (replaces the whole path) and prefix (replaces the matched path_prefix)")
	case rd.Prefix != "" && (rt.PathExact != "" || rt.PathRegex != ""):
		r.errorf(p+".prefix", "replaces the route's path_prefix, and the route matches its path with path_exact or path_regex; use path instead")
	}
	if why := c.redirectLoops(i); why != "" {
		r.errorf(p, "loops: %s; change the scheme, host, port or path it sends to", why)
	}
}

// locationPath reports whether s can be written into Location as a path:
// no query, fragment, space or control character.
func locationPath(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '?' || c == '#' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// redirectLoops reports, best effort, why route i's redirect would send
// the client back to route i itself ("" when it would not): same scheme
// (a redirect's scheme against the listener's), the request's host or
// one the route names (a route for any host redirecting to a named host
// is not judged), the listener's port or none, and a path the route's own path
// match matches (a prefix: any path it writes), when no other route of
// the same host ranks before it for that path. Routes with method,
// header or query matches are judged as if those matched, except a query
// match and strip_query.
func (c *Config) redirectLoops(i int) string {
	rt := &c.Routes[i]
	rd := rt.Redirect
	scheme := "http"
	if c.TLS != nil {
		scheme = "https"
	}
	if rd.Scheme != "" && rd.Scheme != scheme {
		return ""
	}
	if rd.Port != 0 {
		if _, port, err := net.SplitHostPort(c.Listen); err != nil || port != strconv.Itoa(rd.Port) {
			return ""
		}
	}
	if rd.Host != "" && (rt.Host == "" || !hostMatches(rt.Host, rd.Host)) {
		return "" // a route for any host cannot tell whether another host is served here
	}
	if len(rt.Query) > 0 && rd.StripQuery {
		return ""
	}
	var path string
	switch {
	case rd.Path != "":
		path = rd.Path
	case rd.Prefix != "":
		if !strings.HasPrefix(rd.Prefix, rt.PathPrefix) {
			return "" // each redirect shortens the matched part: it ends
		}
		path = rd.Prefix
	default:
		return "it keeps the path, so its Location is the request's own URL"
	}
	if !pathMatches(rt, path) {
		return ""
	}
	for j := range c.Routes {
		o := &c.Routes[j]
		if j == i || o.Host != rt.Host || !pathMatches(o, path) || len(o.Methods)+len(o.Headers)+len(o.Query) > 0 {
			continue
		}
		if o.PathExact != "" && rt.PathExact == "" || o.PathExact == "" && o.PathRegex == "" && rt.PathExact == "" && rt.PathRegex == "" && len(o.PathPrefix) > len(rt.PathPrefix) {
			return "" // that route takes the Location
		}
	}
	return fmt.Sprintf("its Location's path %s is matched by this route again", path)
}

// hostMatches reports whether a route of host routeHost ("" any,
// "*.suffix" or exact) matches requests for host.
func hostMatches(routeHost, host string) bool {
	host = strings.ToLower(host)
	switch {
	case routeHost == "":
		return true
	case strings.HasPrefix(routeHost, "*."):
		return len(host) > len(routeHost)-1 && strings.HasSuffix(host, routeHost[1:])
	}
	return routeHost == host
}

// pathMatches reports whether rt's path match matches path.
func pathMatches(rt *Route, path string) bool {
	switch {
	case rt.PathExact != "":
		return rt.PathExact == path
	case rt.PathRegex != "":
		re, err := CompileMatch(rt.PathRegex)
		return err == nil && re.MatchString(path)
	}
	return strings.HasPrefix(path, rt.PathPrefix)
}

// answerFields are the fields a fixed answer may not set in headers: the
// framing, hop-by-hop fields, and Content-Type (content_type sets it).
var answerFields = map[string]string{
	"content-length": "the gateway writes the body's length", "transfer-encoding": "the gateway frames the body",
	"connection": "it is hop-by-hop", "keep-alive": "it is hop-by-hop", "upgrade": "it is hop-by-hop",
	"te": "it is hop-by-hop", "trailer": "it is hop-by-hop", "proxy-connection": "it is hop-by-hop",
	"content-type": "use answer.content_type", "date": "the gateway writes it",
}

func checkAnswer(r *reporter, p string, a *RouteAnswer) {
	if a.Status < 200 || a.Status > 599 {
		r.errorf(p+".status", "%d: give a status from 200 to 599, e.g. 503 for maintenance", a.Status)
	}
	if len(a.Body) > MaxAnswerBody {
		r.errorf(p+".body", "is %d bytes; a fixed answer's body is at most %d bytes (64 KiB): shorten it", len(a.Body), MaxAnswerBody)
	}
	if (a.Status == http.StatusNoContent || a.Status == http.StatusNotModified) && a.Body != "" {
		r.errorf(p+".body", "a %d answer has no body; remove body, or use another status", a.Status)
	}
	if !httpguts.ValidHeaderFieldValue(a.ContentType) {
		r.errorf(p+".content_type", "%q is not a field value; remove its control characters", a.ContentType)
	}
	for j, h := range a.Headers {
		hp := joinIndex(p+".headers", j)
		if !httpguts.ValidHeaderFieldName(h.Name) {
			r.errorf(hp+".name", "%q is not a header field name, e.g. Retry-After", h.Name)
		} else if why, ok := answerFields[strings.ToLower(h.Name)]; ok {
			r.errorf(hp+".name", "%s cannot be set here: %s", h.Name, why)
		}
		if !httpguts.ValidHeaderFieldValue(h.Value) {
			r.errorf(hp+".value", "%q is not a field value; remove its control characters", h.Value)
		}
	}
}
