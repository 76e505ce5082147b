package route

import (
	"regexp"

	"github.com/corput/corput/internal/forward"
	"strings"

	"github.com/corput/corput/internal/h1"
)

// Request is what a route matches of a request, as its serving path read
// it. The strings may be views of the connection's buffer: Lookup keeps
// none of them.
type Request struct {
	Method, Host string
	Path         string // normalized (Normalize)
	Query        string // the raw query, after '?'; "" for none
	Head         Fields // nil: no fields
	// Peer is the client connection's facts: a split sticky by source_ip
	// reads the client's address from it (Split.Pick).
	Peer forward.Peer
}

// Fields is a request's header fields: both serving paths' heads satisfy
// it (forward.Prior).
type Fields interface {
	// Value is the value of the i-th field (from 0) named name (lower
	// case), and whether there is one.
	Value(name string, i int) ([]byte, bool)
}

// Kind is how a header or query match compares.
type Kind uint8

// The match kinds. Query matches are Exact or Present.
const (
	Exact   Kind = iota // a field (parameter) of the name has this value
	Present             // a field of the name is present, whatever its value
	Absent              // no field of the name is present
	Regex               // a field's whole value matches Regex
)

// HeaderMatch is one condition on the request's fields.
type HeaderMatch struct {
	Name  string // lower case
	Kind  Kind
	Value string         // Exact
	Regex *regexp.Regexp // Regex: anchored by the loader
}

// QueryMatch is one condition on the request's query parameters, compared
// percent-decoded ('+' is a space).
type QueryMatch struct {
	Name  string
	Kind  Kind // Exact or Present
	Value string
}

// matches reports whether q matches the route's path, methods, headers
// and query.
func (rt *Route) matches(q *Request) bool {
	switch {
	case rt.PathExact != "":
		if q.Path != rt.PathExact {
			return false
		}
	case rt.PathRegex != nil:
		if !rt.PathRegex.MatchString(q.Path) {
			return false
		}
	default:
		if !strings.HasPrefix(q.Path, rt.PathPrefix) {
			return false
		}
	}
	if len(rt.Methods) > 0 && !contains(rt.Methods, q.Method) {
		return false
	}
	for i := range rt.Headers {
		if !rt.Headers[i].matches(q.Head) {
			return false
		}
	}
	for i := range rt.Query {
		if !rt.Query[i].matches(q.Query) {
			return false
		}
	}
	return true
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func (m *HeaderMatch) matches(f Fields) bool {
	if f == nil {
		return m.Kind == Absent
	}
	for i := 0; ; i++ {
		v, ok := f.Value(m.Name, i)
		if !ok {
			return m.Kind == Absent
		}
		switch m.Kind {
		case Present:
			return true
		case Absent:
			return false
		case Exact:
			if string(v) == m.Value {
				return true
			}
		case Regex:
			if m.Regex.Match(v) {
				return true
			}
		}
	}
}

func (m *QueryMatch) matches(query string) bool {
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		name, value, _ := strings.Cut(pair, "=")
		if !unescapedEqual(name, m.Name) {
			continue
		}
		if m.Kind == Present || unescapedEqual(value, m.Value) {
			return true
		}
	}
	return false
}

// unescapedEqual reports whether the query component s, percent-decoded
// with '+' as a space, is want, without decoding it into a copy.
func unescapedEqual(s, want string) bool {
	j := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '+':
			c = ' '
		case '%':
			if i+2 < len(s) {
				hi, ok1 := h1.Unhex(s[i+1])
				lo, ok2 := h1.Unhex(s[i+2])
				if ok1 && ok2 {
					c = hi<<4 | lo
					i += 2
				}
			}
		}
		if j >= len(want) || want[j] != c {
			return false
		}
		j++
	}
	return j == len(want)
}

// before reports whether a takes precedence over b within one host group:
// an exact path first; then the longer prefix (a regular expression as
// long as its literal prefix), a prefix before a regular expression of the
// same length; then methods; then more header matches; then more query
// matches. Equal ones keep config order (a stable sort).
func before(a, b *Route) bool {
	if (a.PathExact != "") != (b.PathExact != "") {
		return a.PathExact != ""
	}
	if la, lb := a.pathLen(), b.pathLen(); la != lb {
		return la > lb
	}
	if (a.PathRegex == nil) != (b.PathRegex == nil) {
		return a.PathRegex == nil
	}
	if (len(a.Methods) > 0) != (len(b.Methods) > 0) {
		return len(a.Methods) > 0
	}
	if len(a.Headers) != len(b.Headers) {
		return len(a.Headers) > len(b.Headers)
	}
	return len(a.Query) > len(b.Query)
}

// pathLen is the length the route's path ranks by: its prefix's, its
// regular expression's literal prefix's, or its exact path's.
func (rt *Route) pathLen() int {
	switch {
	case rt.PathExact != "":
		return len(rt.PathExact)
	case rt.PathRegex != nil:
		p, _ := rt.PathRegex.LiteralPrefix()
		return len(p)
	}
	return len(rt.PathPrefix)
}
