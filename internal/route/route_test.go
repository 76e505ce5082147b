package route

import (
	"regexp"
	"strings"
	"testing"
)

func TestRouterLongestPrefixAndHostPrecedence(t *testing.T) {
	r := NewRouter([]Route{
		{Host: "", PathPrefix: "/", Origin: "default"},
		{Host: "", PathPrefix: "/api/", Origin: "api"},
		{Host: "", PathPrefix: "/api/pay", Origin: "payments"},
		{Host: "Shop.Example.com", PathPrefix: "/", Origin: "shop"},
		{Host: "*.example.com", PathPrefix: "/", Origin: "wild"},
		{Host: "*.eu.example.com", PathPrefix: "/", Origin: "eu"},
	})
	for _, c := range []struct{ host, path, want string }{
		{"x.test", "/", "default"},
		{"x.test", "/api/users", "api"},
		{"x.test", "/api/payments/1", "payments"},
		{"shop.example.com:8080", "/api/users", "shop"},
		{"SHOP.example.com", "/", "shop"},
		{"a.example.com", "/", "wild"},
		{"a.eu.example.com", "/", "eu"},
		{"example.com", "/", "default"},
	} {
		got, ok := r.Match(c.host, c.path)
		if !ok || got != c.want {
			t.Errorf("Match(%q, %q) = %q, %v; want %q", c.host, c.path, got, ok, c.want)
		}
	}
	if _, ok := NewRouter([]Route{{Host: "a", PathPrefix: "/x", Origin: "o"}}).Match("b", "/x"); ok {
		t.Error("unmatched host routed")
	}
}

// fields is a request's header fields for a test.
type fields map[string][]string

func (f fields) Value(name string, i int) ([]byte, bool) {
	if vv := f[name]; i < len(vv) {
		return []byte(vv[i]), true
	}
	return nil, false
}

// MatchRoutes are routes over every match kind, each naming itself as its
// origin; MatchCases are requests and the route each must reach. The
// gateway's tests run the same table on both serving paths.
var MatchRoutes = []Route{
	{PathPrefix: "/", Origin: "root"},
	{PathPrefix: "/api/", Origin: "api"},
	{PathRegex: regexp.MustCompile(`^(?:/api/pay.*)$`), Origin: "pay-regex-shadowed"}, // ranks after the prefix /api/pay
	{PathPrefix: "/api/pay", Origin: "pay"},
	{PathExact: "/api/pay/health", Origin: "pay-health-exact"},
	{PathRegex: regexp.MustCompile(`^(?:/api/v[0-9]+/users)$`), Origin: "users-regex"},
	{PathPrefix: "/m", Methods: []string{"POST", "PUT"}, Origin: "m-write"},
	{PathPrefix: "/m", Origin: "m-any"},
	{PathPrefix: "/h", Headers: []HeaderMatch{{Name: "x-canary", Kind: Exact, Value: "1"}}, Origin: "h-exact"},
	{PathPrefix: "/h", Headers: []HeaderMatch{{Name: "x-canary", Kind: Exact, Value: "1"}, {Name: "x-debug", Kind: Present}}, Origin: "h-two"},
	{PathPrefix: "/h", Headers: []HeaderMatch{{Name: "x-version", Kind: Regex, Regex: regexp.MustCompile(`^(?:v[23])$`)}}, Origin: "h-regex"},
	{PathPrefix: "/h", Headers: []HeaderMatch{{Name: "cookie", Kind: Absent}}, Origin: "h-nocookie"},
	{PathPrefix: "/h", Origin: "h-any"},
	{PathPrefix: "/q", Query: []QueryMatch{{Name: "v", Kind: Exact, Value: "a b"}}, Origin: "q-exact"},
	{PathPrefix: "/q", Query: []QueryMatch{{Name: "debug", Kind: Present}}, Origin: "q-present"},
	{PathPrefix: "/q", Headers: []HeaderMatch{{Name: "x-q", Kind: Present}}, Query: []QueryMatch{{Name: "debug", Kind: Present}}, Origin: "q-header"},
	{PathPrefix: "/q", Origin: "q-any"},
	{PathPrefix: "/o", Headers: []HeaderMatch{{Name: "x-a", Kind: Present}}, Origin: "o-first"},
	{PathPrefix: "/o", Headers: []HeaderMatch{{Name: "x-b", Kind: Present}}, Origin: "o-second"},
	{Host: "shop.example", PathPrefix: "/", Methods: []string{"GET"}, Origin: "shop-get"},
	{Host: "*.example", PathPrefix: "/", Origin: "wild"},
}

// MatchCase is one request of the matching table.
type MatchCase struct {
	Name, Method, Host, Target string
	Head                       map[string]string
	Want                       string
}

var MatchCases = []MatchCase{
	{"catch-all prefix", "GET", "x.test", "/", nil, "root"},
	{"longest prefix", "GET", "x.test", "/api/payments", nil, "pay"},
	{"exact before longer prefix", "GET", "x.test", "/api/pay/health", nil, "pay-health-exact"},
	{"exact is whole path", "GET", "x.test", "/api/pay/health/x", nil, "pay"},
	{"regex", "GET", "x.test", "/api/v2/users", nil, "users-regex"},
	{"regex is anchored", "GET", "x.test", "/api/v2/users/7", nil, "api"},
	{"regex literal prefix ranks as a prefix", "GET", "x.test", "/api/vx/users", nil, "api"},
	{"method matches", "POST", "x.test", "/m/1", nil, "m-write"},
	{"method misses", "GET", "x.test", "/m/1", nil, "m-any"},
	{"header exact", "GET", "x.test", "/h", map[string]string{"x-canary": "1", "cookie": "c"}, "h-exact"},
	{"more headers first", "GET", "x.test", "/h", map[string]string{"x-canary": "1", "x-debug": ""}, "h-two"},
	{"header exact misses", "GET", "x.test", "/h", map[string]string{"x-canary": "2", "cookie": "c"}, "h-any"},
	{"header regex", "GET", "x.test", "/h", map[string]string{"x-version": "v3", "cookie": "c"}, "h-regex"},
	{"header regex is anchored", "GET", "x.test", "/h", map[string]string{"x-version": "v33", "cookie": "c"}, "h-any"},
	{"header absent", "GET", "x.test", "/h", nil, "h-nocookie"},
	{"query exact decoded", "GET", "x.test", "/q?x=1&v=a+b", nil, "q-exact"},
	{"query exact percent", "GET", "x.test", "/q?v=a%20b", nil, "q-exact"},
	{"query present", "GET", "x.test", "/q?debug", nil, "q-present"},
	{"header then query", "GET", "x.test", "/q?debug=1", map[string]string{"x-q": "1"}, "q-header"},
	{"query misses", "GET", "x.test", "/q?v=ab", nil, "q-any"},
	{"config order", "GET", "x.test", "/o", map[string]string{"x-a": "1", "x-b": "1"}, "o-first"},
	{"exact host", "GET", "shop.example", "/api/pay", nil, "shop-get"},
	{"exact host falls through to wildcard", "POST", "shop.example", "/", nil, "wild"},
	{"normalized: dot segments", "GET", "x.test", "/x/../api/pay/./health", nil, "pay-health-exact"},
	{"normalized: slashes", "GET", "x.test", "//api//pay", nil, "pay"},
	{"normalized: %2F and %2E", "GET", "x.test", "/api%2fpay%2F%2e%2E/v1/users", nil, "users-regex"},
}

func TestRouterMatchTable(t *testing.T) {
	r := NewRouter(MatchRoutes)
	for _, c := range MatchCases {
		path, query, _ := strings.Cut(c.Target, "?")
		path, ok := Normalize(path)
		if !ok {
			t.Fatalf("%s: %q not normalized", c.Name, c.Target)
		}
		f := fields{}
		for k, v := range c.Head {
			f[k] = []string{v}
		}
		rt := r.Lookup(&Request{Method: c.Method, Host: c.Host, Path: path, Query: query, Head: f})
		if rt == nil || rt.Origin != c.Want {
			t.Errorf("%s: %s %s%s routed to %+v; want %s", c.Name, c.Method, c.Host, c.Target, rt, c.Want)
		}
	}
}

func TestNormalize(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"/", "/", true},
		{"/admin", "/admin", true},
		{"/a/../admin", "/admin", true},
		{"//admin", "/admin", true},
		{"/%2Fadmin", "/admin", true},
		{"/%2fadmin", "/admin", true},
		{"/x/%2e%2e/admin", "/admin", true},
		{"/x/%2E%2E%2Fadmin", "/admin", true},
		{"/%61dmin", "/admin", true},
		{"/a/./b/", "/a/b/", true},
		{"/a/b/..", "/a/", true},
		{"/a/.", "/a/", true},
		{"/a%20b/%3F", "/a%20b/%3F", true},
		{"/%252e%252e/admin", "/%252e%252e/admin", true},
		{"/a/%zz", "/a/%zz", true},
		{"/..", "", false},
		{"/a/../../admin", "", false},
		{"/%2e%2e/admin", "", false},
		{"*", "*", true},
	} {
		got, ok := Normalize(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("Normalize(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	r := NewRouter([]Route{{PathPrefix: "/", Origin: "a"}, {Host: "*.example", PathPrefix: "/api", Origin: "b"}, {Host: "x.example", PathPrefix: "/v1", Origin: "c"}})
	q := &Request{Method: "GET", Host: "y.example", Path: "/api/v1/users", Query: "a=1", Head: fields{}}
	if n := testing.AllocsPerRun(100, func() {
		p, _ := Normalize(q.Path)
		q.Path = p
		if r.Lookup(q) == nil {
			t.Fatal("no route")
		}
	}); n != 0 {
		t.Errorf("Normalize and Lookup of a host+prefix config: %v allocs; want 0", n)
	}
}
