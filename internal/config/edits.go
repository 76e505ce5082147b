package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/corput/corput/internal/h1"
	"golang.org/x/net/http/httpguts"
)

// Rewrite is routes[].rewrite: what of the request's target and Host the
// origin gets instead of the client's (docs/gateway.md, "Rewrites and
// header edits"). The path rewrites work on the normalized path the route
// matched; the query is kept as sent.
type Rewrite struct {
	// ReplacePrefix replaces the route's matched path_prefix; "/" strips
	// it. Only on a route that matches by path_prefix.
	ReplacePrefix string `yaml:"replace_prefix"`
	// Regex rewrites the path: every match of its pattern is replaced by
	// its substitution. Instead of ReplacePrefix.
	Regex *RegexRewrite `yaml:"regex"`
	// Host is the Host (HTTP/2: :authority) sent upstream; "": the
	// client's.
	Host string `yaml:"host"`
}

// RegexRewrite is routes[].rewrite.regex.
type RegexRewrite struct {
	Pattern      string `yaml:"pattern"`      // RE2, unanchored
	Substitution string `yaml:"substitution"` // $1, ${name}: the pattern's groups
}

// HeaderEdits are routes[].request_headers and routes[].response_headers:
// fields removed, set (every field of the name replaced by one) and added
// (one more line), in that order.
type HeaderEdits struct {
	Add    []HeaderValue `yaml:"add"`
	Set    []HeaderValue `yaml:"set"`
	Remove []string      `yaml:"remove"`
}

// HeaderValue is a field a header edit writes. Its value may name
// variables (ParseTemplate).
type HeaderValue struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

// RequestID is downstream.request_id: every request carries an id, sent
// upstream in Header, written in the access log and on the trace. A
// trusted proxy's (downstream.trusted_proxies) is kept; anyone else's is
// replaced by one generated (a random UUIDv4).
type RequestID struct {
	Header string `yaml:"header"` // default DefaultRequestIDHeader
	// ReturnToClient writes the id in Header on every answer too.
	ReturnToClient bool `yaml:"return_to_client"`
}

// DefaultRequestIDHeader is downstream.request_id.header's default.
const DefaultRequestIDHeader = "X-Request-ID"

func (r *RequestID) setDefaults() { *r = RequestID{Header: DefaultRequestIDHeader} }

// The variables a header edit's value may name, written %name%.
const (
	VarClientIP  = "client_ip"  // the client's address (a trusted proxy's last X-Forwarded-For)
	VarRequestID = "request_id" // downstream.request_id's id
	VarRoute     = "route"      // the route's name (routes[].name, or derived)
	VarOrigin    = "origin"     // the origin the request was sent to
)

var templateVars = []string{VarClientIP, VarRequestID, VarRoute, VarOrigin}

// TemplatePart is a piece of a header edit's value: a literal, or a
// variable (Var set).
type TemplatePart struct {
	Lit, Var string
}

// ParseTemplate splits a header edit's value into literals and variables:
// %name% names a variable (VarClientIP, VarRequestID, VarRoute,
// VarOrigin), %% is a literal '%'. Any other '%' is an error.
func ParseTemplate(s string) ([]TemplatePart, error) {
	var parts []TemplatePart
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			lit.WriteByte(s[i])
			continue
		}
		j := strings.IndexByte(s[i+1:], '%')
		if j < 0 {
			return nil, fmt.Errorf("a '%%' at byte %d opens no variable; write %%%% for a literal %%", i)
		}
		name := s[i+1 : i+1+j]
		i += j + 1
		if name == "" {
			lit.WriteByte('%')
			continue
		}
		if !knownVar(name) {
			return nil, fmt.Errorf("%%%s%% is not a variable; use %%%s%% (or %%%% for a literal %%)", name, strings.Join(templateVars, "%, %"))
		}
		if lit.Len() > 0 {
			parts = append(parts, TemplatePart{Lit: lit.String()})
			lit.Reset()
		}
		parts = append(parts, TemplatePart{Var: name})
	}
	if lit.Len() > 0 {
		parts = append(parts, TemplatePart{Lit: lit.String()})
	}
	return parts, nil
}

func knownVar(name string) bool {
	for _, v := range templateVars {
		if v == name {
			return true
		}
	}
	return false
}

// NotEditable reports why a header edit may not name a field, "" when it
// may: the hop-by-hop fields (h1.HopFields), the framing (Content-Length,
// Transfer-Encoding), Host (routes[].rewrite.host sets it), the trace
// context (the tracer's), and HTTP/2 pseudo-fields.
func NotEditable(name string) string {
	switch {
	case strings.HasPrefix(name, ":"):
		return "an HTTP/2 pseudo-field"
	case h1.EqualFold(name, "Content-Length"), h1.EqualFold(name, "Transfer-Encoding"):
		return "the body's framing, which corput writes"
	case h1.EqualFold(name, "Host"):
		return "the Host; set the Host sent upstream with rewrite.host"
	case h1.EqualFold(name, "Traceparent"), h1.EqualFold(name, "Tracestate"):
		return "the trace context, which tracing writes"
	}
	for _, hop := range h1.HopFields {
		if h1.EqualFold(name, hop) {
			return "a hop-by-hop field (RFC 9110 §7.6.1), never forwarded"
		}
	}
	return ""
}

// CompileRewrite compiles routes[].rewrite.regex.pattern (unanchored).
func CompileRewrite(expr string) (*regexp.Regexp, error) { return regexp.Compile(expr) }

// checkEdits checks route rt's rewrite and header edits (at key path p).
func (c *Config) checkEdits(r *reporter, p string, rt *Route) {
	if rt.Own() {
		for key, set := range map[string]bool{"rewrite": rt.Rewrite != nil, "request_headers": rt.RequestHeaders != nil, "response_headers": rt.ResponseHeaders != nil} {
			if set {
				r.errorf(p+"."+key, "edits what an origin gets or sends, and this route answers itself (redirect or answer); remove %s, or give the route an origin", key)
			}
		}
		return
	}
	if w := rt.Rewrite; w != nil {
		wp := p + ".rewrite"
		if w.ReplacePrefix != "" || c.Written(wp+".replace_prefix") {
			switch {
			case !strings.HasPrefix(w.ReplacePrefix, "/"):
				r.errorf(wp+".replace_prefix", "%q must start with /: it replaces the matched path_prefix (/ strips it)", w.ReplacePrefix)
			case rt.PathExact != "":
				r.errorf(wp+".replace_prefix", "replaces the matched path_prefix, and this route matches by path_exact; use rewrite.regex instead (e.g. pattern ^/old$, substitution /new)")
			case rt.PathRegex != "":
				r.errorf(wp+".replace_prefix", "replaces the matched path_prefix, and this route matches by path_regex; use rewrite.regex instead")
			case w.Regex != nil:
				r.errorf(wp+".regex", "give one of replace_prefix and regex: a path is rewritten one way")
			case strings.ContainsAny(w.ReplacePrefix, "?#") || !validPathBytes(w.ReplacePrefix):
				r.errorf(wp+".replace_prefix", "%q is not a path: no '?', '#', space or control byte", w.ReplacePrefix)
			}
		}
		if g := w.Regex; g != nil {
			re, err := CompileRewrite(g.Pattern)
			switch {
			case g.Pattern == "":
				r.errorf(wp+".regex.pattern", "missing; write the RE2 expression whose matches are replaced, e.g. ^/v1/(.*)$")
			case err != nil:
				r.errorf(wp+".regex.pattern", "%q does not compile (%v); write an RE2 expression, e.g. ^/v1/(.*)$", g.Pattern, regexProblem(err))
			default:
				if why := substitutionProblem(re, g.Substitution); why != "" {
					r.errorf(wp+".regex.substitution", "%q %s", g.Substitution, why)
				} else if !validPathBytes(g.Substitution) || strings.ContainsAny(g.Substitution, "?#") {
					r.errorf(wp+".regex.substitution", "%q is not a path: no '?', '#', space or control byte", g.Substitution)
				}
			}
		}
		if w.Host != "" || c.Written(wp+".host") {
			if w.Host == "" || !httpguts.ValidHostHeader(w.Host) || strings.ContainsAny(w.Host, "/?# ") {
				r.errorf(wp+".host", "%q is not a Host; write the host (and port) the origin expects, e.g. api.internal or api.internal:8443, or remove host to send the client's", w.Host)
			}
		}
	}
	c.checkHeaderEdits(r, p+".request_headers", rt.RequestHeaders)
	c.checkHeaderEdits(r, p+".response_headers", rt.ResponseHeaders)
}

// substitutionProblem is what is wrong with a regex rewrite's
// substitution: a group the pattern does not have.
func substitutionProblem(re *regexp.Regexp, sub string) string {
	names := re.SubexpNames()
	for i := 0; i < len(sub); i++ {
		if sub[i] != '$' || i+1 == len(sub) {
			continue
		}
		if sub[i+1] == '$' {
			i++
			continue
		}
		var name string
		if sub[i+1] == '{' {
			end := strings.IndexByte(sub[i:], '}')
			if end < 0 {
				return "has a ${ without its }"
			}
			name, i = sub[i+2:i+end], i+end
		} else {
			j := i + 1
			for j < len(sub) && (sub[j] == '_' || 'a' <= sub[j]|0x20 && sub[j]|0x20 <= 'z' || '0' <= sub[j] && sub[j] <= '9') {
				j++
			}
			name, i = sub[i+1:j], j-1
		}
		if name == "" {
			continue
		}
		if n, err := strconv.Atoi(name); err == nil {
			if n >= len(names) {
				return fmt.Sprintf("names group $%d, and the pattern has %d; write $$ for a literal $", n, len(names)-1)
			}
			continue
		}
		if !slices.Contains(names, name) { // name is not "", names[0]'s
			return fmt.Sprintf("names group %q, which the pattern does not have (write ${1}x, not $1x, before a letter; $$ for a literal $)", name)
		}
	}
	return ""
}

// validPathBytes reports whether s has only bytes a request target may
// carry as they are: visible ASCII.
func validPathBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// checkHeaderEdits checks one request_headers or response_headers block.
func (c *Config) checkHeaderEdits(r *reporter, p string, e *HeaderEdits) {
	if e == nil {
		return
	}
	seen := map[string]string{} // lower-case name → the list it is in
	name := func(key, list, n string) {
		if !httpguts.ValidHeaderFieldName(n) {
			r.errorf(key, "%q is not a header field name; name the field, e.g. X-Env", n)
			return
		}
		if why := NotEditable(n); why != "" {
			r.errorf(key, "%q cannot be edited: it is %s", n, why)
			return
		}
		if id := c.Downstream.RequestID; id != nil && h1.EqualFold(n, id.Header) {
			r.errorf(key, "%q is downstream.request_id's header, which corput writes; remove the edit, or write the id under another name with %%request_id%%", n)
			return
		}
		lower := strings.ToLower(n)
		if other, dup := seen[lower]; dup && (other != "add" || list != "add") {
			r.errorf(key, "%q is also under %s; name a field in one of add, set and remove (set replaces every field of the name)", n, other)
			return
		}
		seen[lower] = list
	}
	value := func(key, v string) {
		if !httpguts.ValidHeaderFieldValue(v) {
			r.errorf(key, "%q has a control byte; a field value is one line of visible text", v)
			return
		}
		parts, err := ParseTemplate(v)
		if err != nil {
			r.errorf(key, "%v", err)
			return
		}
		for _, pt := range parts {
			if pt.Var == VarRequestID && c.Downstream.RequestID == nil {
				r.errorf(key, "%%request_id%% needs downstream.request_id; add downstream.request_id: {} (header X-Request-ID), or remove the variable")
			}
		}
	}
	for _, l := range []struct {
		list string
		vs   []HeaderValue
	}{{"remove", nil}, {"set", e.Set}, {"add", e.Add}} {
		if l.list == "remove" {
			for j, n := range e.Remove {
				name(joinIndex(p+".remove", j), "remove", n)
			}
			continue
		}
		for j, hv := range l.vs {
			hp := joinIndex(p+"."+l.list, j)
			name(hp+".name", l.list, hv.Name)
			value(hp+".value", hv.Value)
		}
	}
}

// checkRequestID checks downstream.request_id.
func (c *Config) checkRequestID(r *reporter) {
	id := c.Downstream.RequestID
	if id == nil {
		return
	}
	switch {
	case !httpguts.ValidHeaderFieldName(id.Header):
		r.errorf("downstream.request_id.header", "%q is not a header field name; X-Request-ID is the default", id.Header)
	case NotEditable(id.Header) != "":
		r.errorf("downstream.request_id.header", "%q cannot carry the id: it is %s", id.Header, NotEditable(id.Header))
	}
}
