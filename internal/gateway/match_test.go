package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/corput/corput/internal/config"
)

// routeOrigins are origins that each answer with their own name (the
// X-Origin field) and record the request targets they received.
type routeOrigins struct {
	addr map[string]string // by name
	mu   sync.Mutex
	seen map[string][]string // targets by origin name
}

func startRouteOrigins(t testing.TB, names ...string) *routeOrigins {
	t.Helper()
	o := &routeOrigins{addr: map[string]string{}, seen: map[string][]string{}}
	for _, name := range names {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o.mu.Lock()
			o.seen[name] = append(o.seen[name], r.RequestURI)
			o.mu.Unlock()
			w.Header().Set("X-Origin", name)
			io.WriteString(w, name)
		}))
		t.Cleanup(srv.Close)
		o.addr[name] = srv.Listener.Addr().String()
	}
	return o
}

// targets is what origin name has received so far.
func (o *routeOrigins) targets(name string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen[name]...)
}

// yaml is the origins block for o.
func (o *routeOrigins) yaml() string {
	var b strings.Builder
	b.WriteString("origins:\n")
	for name, addr := range o.addr {
		fmt.Fprintf(&b, "  - {name: %s, protocol: h1, endpoints: [{address: %q}]}\n", name, addr)
	}
	return b.String()
}

// matchRoutes are routes over every match kind, written in an order that
// is not their precedence (a shorter prefix first, a regex before a prefix
// as long as its literal prefix, a prefix before an exact path, fewer
// headers before more), each to an origin of its own.
const matchRoutes = `
routes:
  - {name: root, path_prefix: /, origin: root}
  - {name: api, path_prefix: /api/, origin: api}
  - {name: users-shadowed, path_regex: "/api/pay.*", origin: api}
  - {name: pay, path_prefix: /api/pay, origin: pay}
  - {name: pay-health, path_exact: /api/pay/health, origin: exact}
  - {name: users, path_regex: "/api/v[0-9]+/users", origin: regex}
  - {name: m-any, path_prefix: /m, origin: many}
  - {name: m-write, path_prefix: /m, methods: [POST, PUT], origin: method}
  - {name: h-exact, path_prefix: /h, headers: [{name: X-Canary, value: "1"}], origin: hexact}
  - {name: h-two, path_prefix: /h, headers: [{name: x-canary, value: "1"}, {name: x-debug, type: present}], origin: htwo}
  - {name: h-regex, path_prefix: /h, headers: [{name: x-version, type: regex, value: "v[23]"}], origin: hregex}
  - {name: h-nocookie, path_prefix: /h, headers: [{name: cookie, type: absent}], origin: habsent}
  - {name: q-exact, path_prefix: /q, query: [{name: v, value: "a b"}], origin: qexact}
  - {name: q-present, path_prefix: /q, query: [{name: debug, type: present}], origin: qpresent}
  - {name: shop, host: shop.example, methods: [GET], origin: shop}
  - {name: wild, host: "*.example", origin: wild}
  - {name: admin, path_prefix: /admin, origin: admin, addresses: {deny: [127.0.0.2/32]}}
`

var matchOrigins = []string{"root", "api", "pay", "exact", "regex", "many", "method", "hexact", "htwo", "hregex", "habsent", "qexact", "qpresent", "shop", "wild", "admin"}

// matchCase is one request of the matching table and the origin that must
// answer it ("" with a status the gateway answers itself).
type matchCase struct {
	name, method, host, target, fields string
	want                               string
	status                             int
}

var matchCases = []matchCase{
	{"catch-all prefix", "GET", "x.test", "/", "", "root", 200},
	{"longest prefix, not config order", "GET", "x.test", "/api/payments", "", "pay", 200},
	{"exact before a longer-listed prefix", "GET", "x.test", "/api/pay/health", "", "exact", 200},
	{"exact is the whole path", "GET", "x.test", "/api/pay/health/x", "", "pay", 200},
	{"regex ranks by its literal prefix", "GET", "x.test", "/api/v2/users", "", "regex", 200},
	{"regex is anchored", "GET", "x.test", "/api/v2/users/7", "", "api", 200},
	{"method matches", "POST", "x.test", "/m/1", "", "method", 200},
	{"method misses", "GET", "x.test", "/m/1", "", "many", 200},
	{"header exact, name case-insensitive", "GET", "x.test", "/h", "x-canary: 1\r\nCookie: c\r\n", "hexact", 200},
	{"more headers first", "GET", "x.test", "/h", "X-Canary: 1\r\nX-Debug: 1\r\nCookie: c\r\n", "htwo", 200},
	{"header exact misses", "GET", "x.test", "/h", "X-Canary: 2\r\nCookie: c\r\n", "root", 200},
	{"header regex", "GET", "x.test", "/h", "X-Version: v3\r\nCookie: c\r\n", "hregex", 200},
	{"header regex is anchored", "GET", "x.test", "/h", "X-Version: v33\r\nCookie: c\r\n", "root", 200},
	{"header absent", "GET", "x.test", "/h", "", "habsent", 200},
	{"query exact, + decoded", "GET", "x.test", "/q?x=1&v=a+b", "", "qexact", 200},
	{"query exact, %20 decoded", "GET", "x.test", "/q?v=a%20b", "", "qexact", 200},
	{"query present", "GET", "x.test", "/q?debug", "", "qpresent", 200},
	{"query misses", "GET", "x.test", "/q?v=ab", "", "root", 200},
	{"exact host", "GET", "shop.example", "/api/pay", "", "shop", 200},
	{"exact host falls through to the wildcard", "POST", "shop.example", "/", "", "wild", 200},
	{"normalized: dot segments", "GET", "x.test", "/x/../api/pay/./health", "", "exact", 200},
	{"normalized: repeated slashes", "GET", "x.test", "//api//pay", "", "pay", 200},
	{"normalized: %2F and %2E", "GET", "x.test", "/api%2fpay%2F%2e%2E/v1/users", "", "regex", 200},
	{"above the root", "GET", "x.test", "/x/../../api/", "", "", 400},
}

// matchGateway starts a gateway with matchRoutes before origins o.
func matchGateway(t *testing.T, o *routeOrigins, fast bool) *Gateway {
	t.Helper()
	g := newGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 1\ndownstream: {fast_path: %v}\n%s%s", fast, matchRoutes, o.yaml()), Options{})
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g)
	return g
}

// sendTarget sends one request with exactly the target given from the local
// address local, and returns the answer's status and X-Origin.
func sendTarget(t *testing.T, local, addr, method, host, target, fields string) (int, string) {
	t.Helper()
	c := dialFrom(t, local, addr)
	defer c.Close()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: 0\r\nConnection: close\r\n\r\n", method, target, host, fields)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Origin")
}

// TestRouteMatchingBothPaths runs the matching table on both serving
// paths against real origins: each request must be answered by the origin
// of the route the Gateway API's precedence picks; a reload changes a
// route's matches.
func TestRouteMatchingBothPaths(t *testing.T) {
	o := startRouteOrigins(t, matchOrigins...)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			g := matchGateway(t, o, fast)
			for _, c := range matchCases {
				status, got := sendTarget(t, "127.0.0.1", g.Addr(), c.method, c.host, c.target, c.fields)
				if status != c.status || got != c.want {
					t.Errorf("%s: %s %s%s answered %d by %q; want %d by %q", c.name, c.method, c.host, c.target, status, got, c.status, c.want)
				}
			}
			// A reload changes a route's matches in place: h-exact now wants
			// X-Canary: 2.
			cfg := *g.Running()
			cfg.Routes = append([]config.Route(nil), cfg.Routes...)
			for i := range cfg.Routes {
				if cfg.Routes[i].Name == "h-exact" {
					cfg.Routes[i].Headers = []config.HeaderMatch{{Name: "X-Canary", Value: "2"}}
				}
			}
			if err := g.Reload(&cfg); err != nil {
				t.Fatal(err)
			}
			for fields, want := range map[string]string{"X-Canary: 2\r\nCookie: c\r\n": "hexact", "X-Canary: 1\r\nCookie: c\r\n": "root"} {
				if status, got := sendTarget(t, "127.0.0.1", g.Addr(), "GET", "x.test", "/h", fields); status != 200 || got != want {
					t.Errorf("after the reload, /h with %q: %d by %q; want %s", fields, status, got, want)
				}
			}
		})
	}
}

// TestNormalizedPathMeetsTheRulesOfAdmin: every spelling of /admin reaches
// /admin's route (and its origin receives the target as sent), and from a
// denied client gets /admin's 403 with nothing upstream; a path above the
// root is 400, on both serving paths.
func TestNormalizedPathMeetsTheRulesOfAdmin(t *testing.T) {
	o := startRouteOrigins(t, matchOrigins...)
	spellings := []string{"/admin", "/a/../admin", "//admin", "/%2Fadmin", "/%2fadmin", "/x/%2e%2e/admin", "/x/%2E%2E%2Fadmin", "/./admin", "/%61dmin"}
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			g := matchGateway(t, o, fast)
			before := len(o.targets("admin"))
			rootBefore := len(o.targets("root"))
			for _, p := range spellings {
				if status, got := sendTarget(t, "127.0.0.1", g.Addr(), "GET", "x.test", p, ""); status != 200 || got != "admin" {
					t.Errorf("%s from an allowed client: %d by %q; want 200 by admin", p, status, got)
				}
				if status, got := sendTarget(t, "127.0.0.2", g.Addr(), "GET", "x.test", p, ""); status != 403 || got != "" {
					t.Errorf("%s from /admin's denied client: %d by %q; want 403 address_denied", p, status, got)
				}
			}
			for _, p := range []string{"/../admin", "/%2e%2e/admin", "/a/../../admin", "/%2E%2E%2fadmin"} {
				if status, got := sendTarget(t, "127.0.0.2", g.Addr(), "GET", "x.test", p, ""); status != 400 || got != "" {
					t.Errorf("%s: %d by %q; want 400 bad_request", p, status, got)
				}
			}
			if got := o.targets("admin")[before:]; strings.Join(got, " ") != strings.Join(spellings, " ") {
				t.Errorf("admin's origin received %q; want the allowed requests' targets as sent, %q", got, spellings)
			}
			if n := len(o.targets("root")) - rootBefore; n != 0 {
				t.Errorf("the catch-all route's origin received %d requests; a spelling of /admin escaped its route", n)
			}
		})
	}
}
