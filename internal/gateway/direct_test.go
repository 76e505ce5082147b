package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/tracing/receiver"
)

// countingOrigin is a real origin that counts the requests it served and
// the connections it accepted.
type countingOrigin struct {
	addr        string
	reqs, conns atomic.Int64
}

func startCountingOrigin(t testing.TB) *countingOrigin {
	t.Helper()
	o := &countingOrigin{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.reqs.Add(1)
		io.WriteString(w, "origin\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	o.addr = srv.Listener.Addr().String()
	return o
}

// wireExchange sends raw on a new connection to addr and returns every
// byte the gateway sent until it closed the connection.
func wireExchange(t testing.TB, addr, raw string) string {
	t.Helper()
	b, err := readAllFrom(t, "127.0.0.1", addr, raw)
	if err != nil {
		t.Fatalf("%q: %v after %q", raw, err, b)
	}
	return b
}

// sortedHead is an answer with its field lines sorted (net/http's path
// writes them sorted, the fast path in its order: docs/decisions.md, "One
// exchange, one driver") and Date's value masked; the body as it is.
func sortedHead(raw string) string {
	head, body, ok := strings.Cut(raw, "\r\n\r\n")
	if !ok {
		return "no end of head: " + raw
	}
	lines := strings.Split(head, "\r\n")
	fields := lines[1:]
	for i, f := range fields {
		if strings.HasPrefix(f, "Date: ") {
			fields[i] = "Date: *"
		}
	}
	slices.Sort(fields)
	return lines[0] + "\n" + strings.Join(fields, "\n") + "\n\n" + body
}

const directRoutes = `
  - {name: moved, path_prefix: /old/, redirect: {prefix: /new/, status: 301}}
  - {name: secure, path_prefix: /login, redirect: {scheme: https, host: secure.example, strip_query: true, status: 308}}
  - {name: elsewhere, path_exact: /go, redirect: {host: other.example, port: 8443, path: /landing}}
  - {name: maint, path_prefix: /pay, answer: {status: 503, body: "down for maintenance\n", headers: [{name: retry-after, value: "120"}, {name: X-Maintenance, value: "on"}]}}
  - {name: ping, path_exact: /ping, answer: {status: 200, body: pong, content_type: application/json}}
  - {name: gone, path_exact: /gone, answer: {status: 410}}
  - {name: denied, path_prefix: /internal, redirect: {path: /elsewhere}, addresses: {deny: [127.0.0.0/8]}}
  - {name: limited, path_prefix: /limited, answer: {status: 200, body: ok}, rate_limit: {requests_per_second: 1, burst: 1}}`

// directConfig is a gateway file whose routes are directRoutes after a
// catch-all route to the h1 origin at originAddr; top is added to its top
// level as it is (each of its lines ending in a newline).
func directConfig(top, originAddr string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
%sroutes:
  - {name: app, path_prefix: /, origin: app}%s
origins:
  - name: app
    protocol: h1
    pool: {prewarm: 0}
    endpoints: [{address: %q}]
`, top, directRoutes, originAddr)
}

// TestRoutesOwnAnswersTouchNoOrigin: redirects and fixed answers are
// answered by the gateway with the exact bytes configured, on both
// serving paths, a HEAD without its body; address rules and rate limits
// still refuse first; the origin sees no request and no connection; each
// is counted by status and logged without an origin or an error.
func TestRoutesOwnAnswersTouchNoOrigin(t *testing.T) {
	cases := []struct{ name, req, want string }{
		{"prefix redirect keeps the rest and the query", "GET /old/a/b?x=1&y=2 HTTP/1.1\r\nHost: gw.test:8080\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 301 Moved Permanently\nConnection: close\nContent-Length: 0\nDate: *\nLocation: http://gw.test:8080/new/a/b?x=1&y=2\n\n"},
		{"redirect normalizes the path first", "GET /old/x/../y HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 301 Moved Permanently\nConnection: close\nContent-Length: 0\nDate: *\nLocation: http://gw.test/new/y\n\n"},
		{"scheme and host, the scheme's port, query stripped", "GET /login/form?next=%2F HTTP/1.1\r\nHost: gw.test:8080\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 308 Permanent Redirect\nConnection: close\nContent-Length: 0\nDate: *\nLocation: https://secure.example/login/form\n\n"},
		{"host, port and path, default status", "GET /go?q=1 HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 302 Found\nConnection: close\nContent-Length: 0\nDate: *\nLocation: http://other.example:8443/landing?q=1\n\n"},
		{"fixed answer with fields", "GET /pay/now HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 503 Service Unavailable\nConnection: close\nContent-Length: 21\nContent-Type: text/plain; charset=utf-8\nDate: *\nRetry-After: 120\nX-Maintenance: on\n\ndown for maintenance\n"},
		{"fixed answer to HEAD: no body", "HEAD /pay/now HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 503 Service Unavailable\nConnection: close\nContent-Length: 21\nContent-Type: text/plain; charset=utf-8\nDate: *\nRetry-After: 120\nX-Maintenance: on\n\n"},
		{"fixed answer with its content type", "GET /ping HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 200 OK\nConnection: close\nContent-Length: 4\nContent-Type: application/json\nDate: *\n\npong"},
		{"empty fixed answer", "GET /gone HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 410 Gone\nConnection: close\nContent-Length: 0\nDate: *\n\n"},
		{"redirect to HEAD", "HEAD /old/z HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 301 Moved Permanently\nConnection: close\nContent-Length: 0\nDate: *\nLocation: http://gw.test/new/z\n\n"},
		{"address rules first", "GET /internal/x HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 403 Forbidden\nCache-Control: no-store\nConnection: close\nContent-Length: 26\nContent-Type: text/plain; charset=utf-8\nDate: *\nX-Corput-Error: address_denied\n\nForbidden: address_denied\n"},
		{"within the rate limit", "GET /limited HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 200 OK\nConnection: close\nContent-Length: 2\nContent-Type: text/plain; charset=utf-8\nDate: *\n\nok"},
		{"a request with a body: answered, the body skipped", "POST /pay/now HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
			"HTTP/1.1 503 Service Unavailable\nConnection: close\nContent-Length: 21\nContent-Type: text/plain; charset=utf-8\nDate: *\nRetry-After: 120\nX-Maintenance: on\n\ndown for maintenance\n"},
		{"over the rate limit", "GET /limited HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 429 Too Many Requests\nCache-Control: no-store\nConnection: close\nContent-Length: 32\nContent-Type: text/plain; charset=utf-8\nDate: *\nRetry-After: 1\nX-Corput-Error: rate_limited\n\nToo Many Requests: rate_limited\n"},
	}
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			origin := startCountingOrigin(t)
			file := filepath.Join(t.TempDir(), "access.log")
			g := startGateway(t, directConfig(fmt.Sprintf("%s\naccess_log: {path: %s, format: json}\n", p.top, file), origin.addr), nil, Options{})
			for _, c := range cases {
				if got := sortedHead(wireExchange(t, g.Addr(), c.req)); got != c.want {
					t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
				}
			}
			if n, m := origin.reqs.Load(), origin.conns.Load(); n != 0 || m != 0 {
				t.Errorf("the origin served %d requests on %d connections, want 0 and 0", n, m)
			}
			if p.name == "fast_path" {
				if h := g.handoffs(); h != 1 {
					t.Errorf("the fast path handed %d connections to net/http, want 1 (the request with a body): it serves its routes' own answers", h)
				}
			}
			for class, want := range map[string]float64{"2xx": 2, "3xx": 5, "4xx": 3, "5xx": 3} {
				if n := testutil.ToFloat64(g.metrics.DownstreamRequests.WithLabelValues(class)); n != want {
					t.Errorf("corput_downstream_requests_total{code_class=%q} = %v, want %v", class, n, want)
				}
			}
			// The origin is there all along: a request to its route reaches it.
			if got := wireExchange(t, g.Addr(), "GET /app HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n"); !strings.HasSuffix(got, "origin\n") {
				t.Fatalf("the origin's route: %q", got)
			}
			if n := origin.reqs.Load(); n != 1 {
				t.Fatalf("the origin served %d requests, want 1", n)
			}
			drain(t, g)
			lines := readLog(t, file)
			if len(lines) != len(cases)+1 {
				t.Fatalf("%d access log lines for %d requests", len(lines), len(cases)+1)
			}
			for i, c := range cases {
				l, err := accesslog.Parse(lines[i])
				if err != nil {
					t.Fatal(err)
				}
				status := 0
				fmt.Sscanf(c.want, "HTTP/1.1 %d", &status)
				wantErr := ""
				switch status {
				case 403:
					wantErr = "address_denied"
				case 429:
					wantErr = "rate_limited"
				}
				if l.Status != status || l.Origin != "" || l.Error != wantErr || l.Loop != -1 || l.Attempts != 0 {
					t.Errorf("%s: logged %+v, want status %d, no origin, error %q, loop -1", c.name, l, status, wantErr)
				}
			}
		})
	}
}

// TestAdminConfigShowsEveryRouteKey: GET /admin/config shows every route
// with every key of routes[] (the redirect's and the answer's included,
// with their values) and downstream.forwarded, and a secret (tracing's
// export headers) stays redacted.
func TestAdminConfigShowsEveryRouteKey(t *testing.T) {
	origin := startCountingOrigin(t)
	g := startGateway(t, directConfig(`downstream: {forwarded: true}
tracing: {endpoint: "127.0.0.1:1", headers: {Authorization: Bearer s3cret-t0ken}}
`, origin.addr), nil, Options{})
	resp, err := adminHTTP.Get("http://" + g.AdminAddr() + "/admin/config")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(raw), "s3cret") {
		t.Fatalf("/admin/config shows a secret:\n%s", raw)
	}
	var v struct {
		Config struct {
			Downstream map[string]any   `json:"downstream"`
			Tracing    map[string]any   `json:"tracing"`
			Routes     []map[string]any `json:"routes"`
		} `json:"config"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if h := v.Config.Tracing["headers"]; h != "[redacted]" {
		t.Errorf("tracing.headers = %v, want [redacted]", h)
	}
	if f := v.Config.Downstream["forwarded"]; f != true {
		t.Errorf("downstream.forwarded = %v, want true", f)
	}
	var keys []string
	rt := reflect.TypeFor[config.Route]()
	for i := range rt.NumField() {
		if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("yaml"), ","); name != "" {
			keys = append(keys, name)
		}
	}
	if len(v.Config.Routes) != 9 {
		t.Fatalf("%d routes shown, want 9", len(v.Config.Routes))
	}
	for i, r := range v.Config.Routes {
		for _, k := range keys {
			if _, ok := r[k]; !ok {
				t.Errorf("routes[%d] (%v) lacks key %s", i, r["name"], k)
			}
		}
	}
	byName := map[string]map[string]any{}
	for _, r := range v.Config.Routes {
		byName[r["name"].(string)] = r
	}
	want := map[string]string{
		"moved":  `{"host":"","path":"","port":0,"prefix":"/new/","scheme":"","status":301,"strip_query":false}`,
		"secure": `{"host":"secure.example","path":"","port":0,"prefix":"","scheme":"https","status":308,"strip_query":true}`,
	}
	for name, w := range want {
		if b, _ := json.Marshal(byName[name]["redirect"]); string(b) != w {
			t.Errorf("%s's redirect shown as %s, want %s", name, b, w)
		}
	}
	if b, _ := json.Marshal(byName["maint"]["answer"]); string(b) != `{"body":"down for maintenance\n","content_type":"","headers":[{"name":"retry-after","value":"120"},{"name":"X-Maintenance","value":"on"}],"status":503}` {
		t.Errorf("maint's answer shown as %s", b)
	}
	if byName["app"]["redirect"] != nil || byName["app"]["answer"] != nil || byName["maint"]["origin"] != "" {
		t.Errorf("app: %v; maint: %v", byName["app"], byName["maint"])
	}
}

// TestReloadTurnsARouteIntoItsOwnAnswer: a reload puts a route into
// maintenance (a fixed answer) and back to its origin, in place, on a
// client connection kept open across both, on both serving paths.
func TestReloadTurnsARouteIntoItsOwnAnswer(t *testing.T) {
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			origin := startCountingOrigin(t)
			text := func(action string) string {
				return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
%s
routes:
  - {name: app, path_prefix: /, origin: app}
  - {name: pay, path_prefix: /pay, %s}
origins:
  - name: app
    protocol: h1
    endpoints: [{address: %q}]
`, p.top, action, origin.addr)
			}
			g := startGateway(t, text("origin: app"), nil, Options{})
			c, done := client()
			defer done()
			reload := func(action string) {
				reloadText(t, g, text(action)) // the same listen keys: the listeners stay
			}
			expect := func(status int, body string, reqs int64) {
				t.Helper()
				resp, got := get(t, c, "http://"+g.Addr()+"/pay/x")
				if resp.StatusCode != status || got != body || origin.reqs.Load() != reqs {
					t.Fatalf("%d %q with the origin at %d requests, want %d %q at %d", resp.StatusCode, got, origin.reqs.Load(), status, body, reqs)
				}
			}
			expect(200, "origin\n", 1)
			reload(`answer: {status: 503, body: "maintenance\n"}`)
			expect(503, "maintenance\n", 1)
			expect(503, "maintenance\n", 1)
			reload("origin: app")
			expect(200, "origin\n", 2)
		})
	}
}

// TestRoutesOwnAnswersAreTraced: a traced redirect and a traced fixed
// answer are one server span each, with their status, no attempt and no
// origin, and no client span (no origin was asked), on both serving
// paths.
func TestRoutesOwnAnswersAreTraced(t *testing.T) {
	rc, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for _, p := range requestPaths {
		t.Run(p.name, func(t *testing.T) {
			origin := startCountingOrigin(t)
			g := startGateway(t, directConfig(fmt.Sprintf("%stracing: {endpoint: %q, sample_ratio: 1.0}\n", p.top, rc.GRPCAddr()), origin.addr), nil, Options{})
			before := len(rc.Spans())
			wireExchange(t, g.Addr(), "GET /old/a HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n")
			wireExchange(t, g.Addr(), "GET /pay HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n")
			flush(t, g)
			spans := rc.Spans()[before:]
			var statuses []string
			for _, s := range spans {
				if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
					t.Errorf("a %v span %q: no origin was asked", s.Kind, s.Name)
					continue
				}
				if s.Attrs["corput.attempts"] != "0" || s.Attrs["corput.origin"] != "" || s.Attrs["corput.reason"] != "" {
					t.Errorf("server span %v", s.Attrs)
				}
				statuses = append(statuses, s.Attrs["http.response.status_code"])
			}
			slices.Sort(statuses)
			if strings.Join(statuses, " ") != "301 503" {
				t.Errorf("server spans' statuses %v, want 301 and 503", statuses)
			}
			if n := origin.reqs.Load() + origin.conns.Load(); n != 0 {
				t.Errorf("the origin was touched")
			}
		})
	}
}

// TestRoutesOwnAnswersOverHTTP2: an h2c client (net/http's path) gets the
// same redirect and fixed answer, HEAD without a body, the origin
// untouched.
func TestRoutesOwnAnswersOverHTTP2(t *testing.T) {
	origin := startCountingOrigin(t)
	g := startGateway(t, directConfig("", origin.addr), nil, Options{})
	c := downstream(t, dsH2C, nil)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, body := get(t, c, "http://"+g.Addr()+"/old/a?x=1")
	if resp.ProtoMajor != 2 || resp.StatusCode != 301 || resp.Header.Get("Location") != "http://"+g.Addr()+"/new/a?x=1" || body != "" {
		t.Errorf("redirect: %s %d Location %q body %q", resp.Proto, resp.StatusCode, resp.Header.Get("Location"), body)
	}
	req, _ := http.NewRequest(http.MethodHead, "http://"+g.Addr()+"/pay", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.ContentLength != 21 || len(b) != 0 || resp.Header.Get("Retry-After") != "120" {
		t.Errorf("HEAD: %d length %d body %q fields %v", resp.StatusCode, resp.ContentLength, b, resp.Header)
	}
	if n := origin.reqs.Load() + origin.conns.Load(); n != 0 {
		t.Errorf("the origin was touched")
	}
}
