package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/accesslog"
	"github.com/corput/corput/internal/config"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/tracing/receiver"
)

// editOrigin is an origin that records the raw head of every request it
// reads (requests have no body) and answers each with the same raw
// response.
type editOrigin struct {
	addr   string
	answer string
	mu     sync.Mutex
	heads  []string
}

func startEditOrigin(t *testing.T, answer string) *editOrigin {
	t.Helper()
	o := &editOrigin{answer: answer}
	o.addr = acceptEach(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			head, err := readHead(br)
			if err != nil {
				return
			}
			o.mu.Lock()
			o.heads = append(o.heads, head)
			o.mu.Unlock()
			if _, err := io.WriteString(c, o.answer); err != nil {
				return
			}
		}
	}).Addr().String()
	return o
}

// readHead reads one raw head from br, up to and with its empty line.
func readHead(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return head.String(), err
		}
		head.WriteString(line)
		if line == "\r\n" {
			return head.String(), nil
		}
	}
}

func (o *editOrigin) last() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.heads) == 0 {
		return ""
	}
	return o.heads[len(o.heads)-1]
}

// editExchange sends raw on a new connection from local and returns every
// byte the gateway answered until it closed the connection.
func editExchange(t *testing.T, local, addr, raw string) string {
	t.Helper()
	b, err := readAllFrom(t, local, addr, raw)
	if err != nil && len(b) == 0 {
		t.Fatalf("reading the answer to %q: %v", raw, err)
	}
	return b
}

// readAllFrom sends raw on a new connection from local to addr and
// returns every byte read until the connection ended, and the error that
// ended it if not the peer's close.
func readAllFrom(t testing.TB, local, addr, raw string) (string, error) {
	t.Helper()
	c := dialFrom(t, local, addr)
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// editHeadLines splits a raw head into its first line and its field lines,
// each as "Canonical-Name: value".
func editHeadLines(raw string) (first string, fields []string) {
	head, _, _ := strings.Cut(raw, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, ":")
		fields = append(fields, textproto.CanonicalMIMEHeaderKey(k)+": "+strings.TrimSpace(v))
	}
	return lines[0], fields
}

// values are the values of the field lines named name.
func editValues(fields []string, name string) []string {
	var out []string
	for _, f := range fields {
		if k, v, _ := strings.Cut(f, ": "); k == name {
			out = append(out, v)
		}
	}
	return out
}

const editRoutes = `
routes:
  - {name: strip, path_prefix: /strip/, origin: o, rewrite: {replace_prefix: /}}
  - {name: replace, path_prefix: /old, origin: o, rewrite: {replace_prefix: /new/v2}}
  - name: regex
    path_prefix: /re/
    origin: o
    rewrite: {regex: {pattern: "^/re/([a-z]+)/([0-9]+)$", substitution: "/items/$2/$1"}}
  - {name: host, path_prefix: /host, origin: o, rewrite: {host: "api.internal:8443"}}
  - name: hdrs
    path_prefix: /h
    origin: o
    request_headers:
      remove: [X-Secret]
      set: [{name: X-Env, value: prod}]
      add: [{name: X-Client, value: "%client_ip%"}, {name: X-Via, value: "%route%/%origin% 100%%"}]
    response_headers:
      remove: [Server]
      set: [{name: X-Set, value: new}]
      add: [{name: X-Served-By, value: "%route%"}]
`

// editAnswer is the origin's answer: fields the response edits remove,
// replace and keep.
const editAnswer = "HTTP/1.1 200 OK\r\nServer: origin/1\r\nX-Set: old\r\nX-Set: older\r\nX-Keep: 1\r\nContent-Length: 2\r\n\r\nok"

// TestRewritesAndHeaderEditsBothPaths: on both serving paths, the origin
// receives the rewritten request line (prefix stripped or replaced, the
// regex's substitution, the normalized path rewritten, the query kept),
// the rewritten Host, and the request fields removed, set and added with
// their variables; the client receives the response fields removed, set
// and added, the rest as the origin sent them.
func TestRewritesAndHeaderEditsBothPaths(t *testing.T) {
	o := startEditOrigin(t, editAnswer)
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			g := startGateway(t, fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 1\ndownstream: {fast_path: %v}\n%s"+
				"origins:\n  - {name: o, protocol: h1, endpoints: [{address: %q}]}\n", fast, editRoutes, o.addr), nil, Options{})
			send := func(target, fields string) (origin, client string) {
				t.Helper()
				client = editExchange(t, "127.0.0.1", g.Addr(), "GET "+target+" HTTP/1.1\r\nHost: gw.test\r\nx-lower: 1\r\n"+fields+"Connection: close\r\n\r\n")
				if !strings.HasPrefix(client, "HTTP/1.1 200 OK\r\n") {
					t.Fatalf("GET %s: %q", target, client)
				}
				origin = o.last()
				// The fast path keeps the client's spelling of a name;
				// net/http's canonicalizes it: the path served is the one
				// meant.
				// A path with dot segments or escapes is handed to net/http
				// by the fast path.
				p, _, _ := strings.Cut(target, "?")
				simple := !strings.Contains(p, "/.") && !strings.Contains(p, "%")
				if got := strings.Contains(origin, "\r\nx-lower: 1\r\n"); got != (fast && simple) {
					t.Fatalf("GET %s: served by the fast path %v, want %v:\n%s", target, got, fast && simple, origin)
				}
				return origin, client
			}
			for _, c := range []struct{ name, target, line string }{
				{"prefix strip", "/strip/a/b?q=1&r=%2F", "GET /a/b?q=1&r=%2F HTTP/1.1"},
				{"prefix strip, the whole prefix", "/strip/", "GET / HTTP/1.1"},
				{"prefix strip of the normalized path", "/strip//x/../a%2fb?q", "GET /a/b?q HTTP/1.1"},
				{"prefix replace", "/old/users/7?x=y", "GET /new/v2/users/7?x=y HTTP/1.1"},
				{"prefix replace, a longer segment", "/older", "GET /new/v2er HTTP/1.1"},
				{"regex rewrite", "/re/books/42?full", "GET /items/42/books?full HTTP/1.1"},
				{"regex without a match", "/re/books/x", "GET /re/books/x HTTP/1.1"},
				{"no rewrite: the target as sent", "/hx//y", "GET /hx//y HTTP/1.1"},
			} {
				origin, _ := send(c.target, "")
				if first, _ := editHeadLines(origin); first != c.line {
					t.Errorf("%s: GET %s reached the origin as %q, want %q", c.name, c.target, first, c.line)
				}
			}

			// Host rewrite: the Host line is the route's, X-Forwarded-Host
			// the client's.
			origin, _ := send("/host/a", "")
			_, fields := editHeadLines(origin)
			if h := editValues(fields, "Host"); !slices.Equal(h, []string{"api.internal:8443"}) {
				t.Errorf("Host rewrite: the origin got Host %q, want [api.internal:8443]\n%s", h, origin)
			}
			if h := editValues(fields, "X-Forwarded-Host"); !slices.Equal(h, []string{"gw.test"}) {
				t.Errorf("Host rewrite: X-Forwarded-Host %q, want the client's [gw.test]", h)
			}
			origin, _ = send("/strip/a", "")
			if _, fields := editHeadLines(origin); !slices.Equal(editValues(fields, "Host"), []string{"gw.test"}) {
				t.Errorf("a route without host: the origin got Host %q, want the client's", editValues(fields, "Host"))
			}

			// Header edits both ways.
			origin, client := send("/h/1", "X-Secret: s\r\nx-secret: s2\r\nX-Env: dev\r\nx-env: dev2\r\nX-Other: kept\r\n")
			_, fields = editHeadLines(origin)
			for name, want := range map[string][]string{
				"X-Secret": nil, "X-Env": {"prod"}, "X-Client": {"127.0.0.1"}, "X-Via": {"hdrs/o 100%"}, "X-Other": {"kept"},
			} {
				if got := editValues(fields, name); !slices.Equal(got, want) {
					t.Errorf("request edits: the origin got %s %q, want %q\n%s", name, got, want, origin)
				}
			}
			_, fields = editHeadLines(client)
			for name, want := range map[string][]string{
				"Server": nil, "X-Set": {"new"}, "X-Served-By": {"hdrs"}, "X-Keep": {"1"}, "Content-Length": {"2"},
			} {
				if got := editValues(fields, name); !slices.Equal(got, want) {
					t.Errorf("response edits: the client got %s %q, want %q\n%s", name, got, want, client)
				}
			}
			if !strings.HasSuffix(client, "\r\n\r\nok") {
				t.Errorf("response edits: the body changed: %q", client)
			}
			// A route without response edits relays the origin's fields.
			_, client = send("/strip/a", "")
			if _, fields := editHeadLines(client); !slices.Equal(editValues(fields, "X-Set"), []string{"old", "older"}) || len(editValues(fields, "Server")) != 1 {
				t.Errorf("a route without edits: the client got %q", client)
			}

			// A reload changes the edits in place, and turns the request id
			// on.
			cfg := *g.Running()
			cfg.Routes = append([]config.Route(nil), cfg.Routes...)
			for i := range cfg.Routes {
				if cfg.Routes[i].Name == "hdrs" {
					h := *cfg.Routes[i].RequestHeaders
					h.Set = []config.HeaderValue{{Name: "X-Env", Value: "staging"}}
					cfg.Routes[i].RequestHeaders = &h
				}
			}
			cfg.Downstream.RequestID = &config.RequestID{Header: "X-Request-ID"}
			if err := g.Reload(&cfg); err != nil {
				t.Fatal(err)
			}
			origin, _ = send("/h/2", "X-Env: dev\r\n")
			if _, fields := editHeadLines(origin); !slices.Equal(editValues(fields, "X-Env"), []string{"staging"}) ||
				len(editValues(fields, "X-Request-Id")) != 1 {
				t.Errorf("after the reload, the origin got\n%s", origin)
			}
		})
	}
}

var editUUIDv4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestRequestIDEndToEnd: with downstream.request_id on both serving paths,
// a request without an id gets a generated UUIDv4 that reaches the
// origin, comes back to the client, and is the access log line's
// request_id and the server span's corput.request_id (a real OTLP
// receiver); an untrusted client's id is replaced, a trusted proxy's is
// kept.
func TestRequestIDEndToEnd(t *testing.T) {
	rc, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	o := startEditOrigin(t, "HTTP/1.1 200 OK\r\nX-Request-Id: from-the-origin\r\nContent-Length: 2\r\n\r\nok")
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "access.log")
			g := startGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
downstream: {fast_path: %v, trusted_proxies: [127.0.0.2/32], request_id: {return_to_client: true}}
access_log: {path: %s, format: json}
tracing: {endpoint: %q, protocol: grpc, sample_ratio: 1.0}
routes: [{path_prefix: /, origin: o}, {path_prefix: /maint, answer: {status: 503, body: down}}]
origins:
  - {name: o, protocol: h1, endpoints: [{address: %q}]}
`, fast, logFile, rc.GRPCAddr(), o.addr), nil, Options{})
			type got struct{ origin, client []string }
			send := func(local, path, fields string) got {
				t.Helper()
				client := editExchange(t, local, g.Addr(), "GET "+path+" HTTP/1.1\r\nHost: gw.test\r\n"+fields+"Connection: close\r\n\r\n")
				_, cf := editHeadLines(client)
				_, of := editHeadLines(o.last())
				return got{origin: editValues(of, "X-Request-Id"), client: editValues(cf, "X-Request-Id")}
			}
			gen := send("127.0.0.1", "/generated", "")
			forged := send("127.0.0.1", "/forged", "X-Request-ID: forged-1\r\nx-request-id: forged-2\r\n")
			trusted := send("127.0.0.2", "/trusted", "X-Request-ID: trusted-abc.123\r\n")
			for name, g := range map[string]got{"generated": gen, "forged": forged} {
				if len(g.origin) != 1 || !editUUIDv4.MatchString(g.origin[0]) {
					t.Fatalf("%s: the origin got X-Request-ID %q, want one generated UUIDv4", name, g.origin)
				}
				if !slices.Equal(g.client, g.origin) {
					t.Errorf("%s: the client got X-Request-ID %q, want the origin's %q (return_to_client; the origin's own replaced)", name, g.client, g.origin)
				}
			}
			if gen.origin[0] == forged.origin[0] {
				t.Errorf("two requests got the same id %s", gen.origin[0])
			}
			if !slices.Equal(trusted.origin, []string{"trusted-abc.123"}) || !slices.Equal(trusted.client, trusted.origin) {
				t.Errorf("a trusted proxy's id: the origin got %q, the client %q; want [trusted-abc.123] both", trusted.origin, trusted.client)
			}
			// A gateway's own answer carries the id too.
			if a := editExchange(t, "127.0.0.1", g.Addr(), "GET /x/../../y HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(a, "HTTP/1.1 400 ") {
				t.Errorf("a path above the root: %q", a)
			} else if _, f := editHeadLines(a); len(editValues(f, "X-Request-Id")) != 1 || !editUUIDv4.MatchString(editValues(f, "X-Request-Id")[0]) {
				t.Errorf("the gateway's own answer carries X-Request-ID %q, want one UUIDv4", editValues(f, "X-Request-Id"))
			}
			// So does a route's own answer.
			if a := editExchange(t, "127.0.0.1", g.Addr(), "GET /maint HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(a, "HTTP/1.1 503 ") {
				t.Errorf("a fixed answer: %q", a)
			} else if _, f := editHeadLines(a); len(editValues(f, "X-Request-Id")) != 1 || !editUUIDv4.MatchString(editValues(f, "X-Request-Id")[0]) {
				t.Errorf("a route's fixed answer carries X-Request-ID %q, want one UUIDv4", editValues(f, "X-Request-Id"))
			}
			flush(t, g)

			want := map[string]string{"/generated": gen.origin[0], "/forged": forged.origin[0], "/trusted": trusted.origin[0]}
			data, err := os.ReadFile(logFile)
			if err != nil {
				t.Fatal(err)
			}
			logged := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				l, err := accesslog.Parse(line)
				if err != nil {
					t.Fatal(err)
				}
				logged[l.Path] = l.RequestID
			}
			traced := map[string]string{}
			for _, s := range rc.Spans() {
				if s.Attrs["corput.request_id"] != "" {
					traced[s.Attrs["url.path"]] = s.Attrs["corput.request_id"]
				}
			}
			for path, id := range want {
				if logged[path] != id {
					t.Errorf("%s: the access log's request_id %q, want %q", path, logged[path], id)
				}
				if traced[path] != id {
					t.Errorf("%s: the server span's corput.request_id %q, want %q (spans: %v)", path, traced[path], id, traced)
				}
			}
		})
	}
}

// TestEditedValuesOutliveTheRequest: on net/http's path, which writes a
// response head after its handler returned (its pooled stream may then
// serve another request), many clients at once each get their own id in
// a response field expanded from %request_id%, never another request's.
func TestEditedValuesOutliveTheRequest(t *testing.T) {
	o := startEditOrigin(t, "HTTP/1.1 204 No Content\r\n\r\n")
	g := startGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
downstream: {fast_path: false, request_id: {return_to_client: true}}
routes: [{path_prefix: /, origin: o, response_headers: {add: [{name: X-Echo, value: "id=%%request_id%%"}]}}]
origins:
  - {name: o, protocol: h1, endpoints: [{address: %q}]}
`, o.addr), nil, Options{})
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for range 16 {
		wg.Go(func() {
			c, err := net.Dial("tcp", g.Addr())
			if err != nil {
				errs <- err.Error()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(c)
			for range 100 {
				if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
					errs <- err.Error()
					return
				}
				head, err := readHead(br)
				if err != nil {
					errs <- err.Error()
					return
				}
				_, fields := editHeadLines(head)
				id, echo := editValues(fields, "X-Request-Id"), editValues(fields, "X-Echo")
				if len(id) != 1 || !slices.Equal(echo, []string{"id=" + id[0]}) {
					errs <- fmt.Sprintf("X-Request-ID %q, X-Echo %q", id, echo)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestEditsOverHTTP2: an h2c client and an h2c origin (the HTTP/2
// exchange, net/http's HTTP/2 server): the origin gets the rewritten path,
// :authority and fields; the client gets the edited response fields.
func TestEditsOverHTTP2(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	b := startBackend(t, testorigin.H2C, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r
		mu.Unlock()
		w.Header().Set("Server", "origin/2")
		w.Header().Add("X-Set", "old")
		w.Header().Set("X-Keep", "1")
	}))
	g := startGateway(t, fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
downstream: {request_id: {return_to_client: true}}
routes:
  - name: h2
    path_prefix: /api/
    origin: o
    rewrite: {replace_prefix: /v2, host: h2.internal}
    request_headers: {remove: [X-Secret], add: [{name: X-Route, value: "%%route%%"}]}
    response_headers: {remove: [Server], set: [{name: X-Set, value: new}], add: [{name: X-Id, value: "%%request_id%%"}]}
origins:
  - {name: o, protocol: h2c, endpoints: [{address: %q}]}
`, b.addr), nil, Options{})
	c := downstream(t, dsH2C, nil)
	req, _ := http.NewRequest("GET", "http://"+g.Addr()+"/api/users?x=1", nil)
	req.Header.Set("X-Secret", "s")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("%s %d", resp.Proto, resp.StatusCode)
	}
	mu.Lock()
	r := got
	mu.Unlock()
	if r == nil || r.ProtoMajor != 2 || r.RequestURI != "/v2/users?x=1" || r.Host != "h2.internal" || r.Header.Get("X-Secret") != "" ||
		r.Header.Get("X-Route") != "h2" || len(r.Header.Get("X-Request-Id")) != 36 {
		t.Fatalf("the origin got %+v", r)
	}
	h := resp.Header
	if h.Get("Server") != "" || !slices.Equal(h.Values("X-Set"), []string{"new"}) || h.Get("X-Keep") != "1" ||
		h.Get("X-Id") != r.Header.Get("X-Request-Id") || h.Get("X-Request-Id") != r.Header.Get("X-Request-Id") {
		t.Fatalf("the client got %v; the origin's id %s", h, r.Header.Get("X-Request-Id"))
	}
}
