package edit

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/rng"
)

func compile(t *testing.T, rt config.Route) *Route {
	t.Helper()
	if rt.PathPrefix == "" {
		rt.PathPrefix = "/"
	}
	e := Compile(&rt)
	if e == nil {
		t.Fatal("Compile returned nil for a route with edits")
	}
	return e
}

func TestRewritePath(t *testing.T) {
	cases := []struct {
		prefix, replace string
		regex, sub      string
		path, want      string
	}{
		{prefix: "/api", replace: "/", path: "/api/users", want: "/users"},
		{prefix: "/api/", replace: "/", path: "/api/users", want: "/users"},
		{prefix: "/api", replace: "/", path: "/api", want: "/"},
		{prefix: "/api/", replace: "/", path: "/api/", want: "/"},
		{prefix: "/api", replace: "/", path: "/apix", want: "/x"},
		{prefix: "/api", replace: "/v2", path: "/api/users", want: "/v2/users"},
		{prefix: "/api", replace: "/v2/", path: "/api/users", want: "/v2/users"},
		{prefix: "/api/", replace: "/v2", path: "/api/users", want: "/v2/users"},
		{prefix: "/", replace: "/v1", path: "/x", want: "/v1/x"},
		{prefix: "/", replace: "/v1", path: "/", want: "/v1/"},
		{regex: "^/re/([a-z]+)/([0-9]+)$", sub: "/items/$2/$1", path: "/re/books/42", want: "/items/42/books"},
		{regex: "^/re/", sub: "", path: "/re/x", want: "/x"},
		{regex: "o", sub: "0", path: "/foo/bo", want: "/f00/b0"},
	}
	for _, c := range cases {
		w := &config.Rewrite{ReplacePrefix: c.replace}
		if c.regex != "" {
			w.Regex = &config.RegexRewrite{Pattern: c.regex, Substitution: c.sub}
		}
		e := compile(t, config.Route{PathPrefix: c.prefix, Rewrite: w})
		got, ok := e.rewritePath(nil, c.path)
		if !ok || string(got) != c.want {
			t.Errorf("prefix %q replace %q regex %q %q: %s of %s is %q (%v), want %q", c.prefix, c.replace, c.regex, c.sub, "rewrite", c.path, got, ok, c.want)
		}
	}
}

// fields is a request's head by lower-case name.
type fields map[string]string

func (f fields) Value(name string, i int) ([]byte, bool) {
	v, ok := f[name]
	if !ok || i > 0 {
		return nil, false
	}
	return []byte(v), true
}

func TestRequestID(t *testing.T) {
	src := rng.New(7)
	rid := NewRequestID(&config.RequestID{Header: "X-Request-ID"}, src.Uint64)
	var s State
	s.Begin(rid, fields{"x-request-id": "client-1"}, false)
	a := s.ID
	if len(a) != 36 || a[14] != '4' || !strings.ContainsRune("89ab", rune(a[19])) || strings.Count(a, "-") != 4 {
		t.Fatalf("generated id %q is not a UUIDv4", a)
	}
	a = strings.Clone(a)
	s.Begin(rid, nil, true)
	if s.ID == a {
		t.Fatalf("two requests got one id %s", a)
	}
	s.Begin(rid, fields{"x-request-id": "proxy-7"}, true)
	if s.ID != "proxy-7" {
		t.Fatalf("a trusted proxy's id became %q, want proxy-7", s.ID)
	}
	s.Begin(rid, fields{"x-request-id": "has space"}, true)
	if len(s.ID) != 36 {
		t.Fatalf("a trusted proxy's id with a space was kept: %q", s.ID)
	}
	// The same seed draws the same ids.
	r1, r2 := NewRequestID(&config.RequestID{Header: "X-Request-ID"}, rng.New(1).Uint64), NewRequestID(&config.RequestID{Header: "X-Request-ID"}, rng.New(1).Uint64)
	var s1, s2 State
	s1.Begin(r1, nil, false)
	s2.Begin(r2, nil, false)
	if s1.ID != s2.ID {
		t.Fatalf("seeded ids differ: %s %s", s1.ID, s2.ID)
	}
	s.Begin(nil, fields{"x-request-id": "x"}, true)
	if s.ID != "" || s.On(nil) {
		t.Fatalf("without request_id: id %q, On %v", s.ID, s.On(nil))
	}
}

func TestRequestAndHeadEdits(t *testing.T) {
	e := compile(t, config.Route{Name: "r1", PathPrefix: "/api", Rewrite: &config.Rewrite{ReplacePrefix: "/", Host: "in.example"},
		RequestHeaders: &config.HeaderEdits{
			Remove: []string{"X-Secret"},
			Set:    []config.HeaderValue{{Name: "X-Env", Value: "prod"}},
			Add:    []config.HeaderValue{{Name: "X-Who", Value: "%client_ip%|%route%|%origin%|%request_id%|%%"}},
		},
		ResponseHeaders: &config.HeaderEdits{
			Remove: []string{"server"},
			Set:    []config.HeaderValue{{Name: "X-Set", Value: "new"}},
			Add:    []config.HeaderValue{{Name: "X-Route", Value: "%route%"}},
		}})
	rid := NewRequestID(&config.RequestID{Header: "X-Request-ID", ReturnToClient: true}, rng.New(3).Uint64)
	var s State
	s.Begin(rid, nil, false)
	r := &exchange.Request{Method: "GET", Target: "/api/a?q=%2F", Host: "gw", Fields: []hpack.HeaderField{
		{Name: "x-secret", Value: "s"}, {Name: "X-Env", Value: "dev"}, {Name: "Accept", Value: "*/*"}, {Name: "X-Request-Id", Value: "forged"},
	}}
	s.Request(r, e, "/api/a", netip.MustParseAddr("192.0.2.1"), "api")
	if r.Target != "/a?q=%2F" || r.Host != "in.example" {
		t.Fatalf("target %q host %q", r.Target, r.Host)
	}
	got := map[string][]string{}
	for _, f := range r.Fields {
		got[f.Name] = append(got[f.Name], f.Value)
	}
	want := map[string][]string{"X-Env": {"prod"}, "Accept": {"*/*"}, "X-Request-ID": {s.ID}, "X-Who": {"192.0.2.1|r1|api|" + s.ID + "|%"}}
	if len(got) != len(want) {
		t.Fatalf("fields %v, want %v", got, want)
	}
	for k, v := range want {
		if strings.Join(got[k], ",") != strings.Join(v, ",") {
			t.Fatalf("fields %v, want %v", got, want)
		}
	}
	if r.Edit != &s {
		t.Fatal("the response's edits are not set")
	}
	h := &exchange.Head{Status: 200, Lower: true, Fields: []hpack.HeaderField{{Name: "server", Value: "o"}, {Name: "x-set", Value: "old"}, {Name: "x-request-id", Value: "o"}, {Name: "x-keep", Value: "1"}}}
	s.EditHead(h)
	var lines []string
	for _, f := range h.Fields {
		lines = append(lines, f.Name+": "+f.Value)
	}
	if strings.Join(lines, "\n") != "x-keep: 1\nX-Set: new\nX-Route: r1\nX-Request-ID: "+s.ID {
		t.Fatalf("response fields:\n%s", strings.Join(lines, "\n"))
	}
}

// TestNoAllocations: a prefix rewrite, a Host rewrite, header edits with
// variables both ways and a generated request id allocate nothing once
// the State's buffers have grown.
func TestNoAllocations(t *testing.T) {
	e := compile(t, config.Route{Name: "r1", PathPrefix: "/api", Rewrite: &config.Rewrite{ReplacePrefix: "/", Host: "in.example"},
		RequestHeaders:  &config.HeaderEdits{Remove: []string{"X-Secret"}, Set: []config.HeaderValue{{Name: "X-Route", Value: "%route% %client_ip%"}}},
		ResponseHeaders: &config.HeaderEdits{Add: []config.HeaderValue{{Name: "X-Origin", Value: "%origin%"}}}})
	rid := NewRequestID(&config.RequestID{Header: "X-Request-ID", ReturnToClient: true}, nil)
	var s State
	r := &exchange.Request{Fields: make([]hpack.HeaderField, 0, 16)}
	h := &exchange.Head{}
	resp := []hpack.HeaderField{{Name: "Server", Value: "o"}}
	client := netip.MustParseAddr("192.0.2.1")
	run := func() {
		s.Begin(rid, nil, false)
		r.Target, r.Host = "/api/a?q", "gw"
		r.Fields = append(r.Fields[:0], hpack.HeaderField{Name: "X-Secret", Value: "s"}, hpack.HeaderField{Name: "Accept", Value: "*/*"})
		s.Request(r, e, "/api/a", client, "api")
		h.Fields = resp
		s.EditHead(h)
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per request, want 0", n)
	}
}
