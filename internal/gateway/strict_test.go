package gateway

import (
	"bufio"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Strict by default (docs/gateway.md): the shapes outside corpora
// (defparam/smuggler, neex/http2smugl, nodejs/llhttp's request cases,
// aws/http-desync-guardian) found passing, replayed on every listener —
// cleartext HTTP/1.1, HTTPS/1.1 and the h2→h1 downgrade where the shape
// can be written in HTTP/2 — and on both serving paths
// (downstream.fast_path true and false), against an origin that records
// the raw bytes it reads.

// strictCase is one shape: the bytes a client writes on one HTTP/1.1
// connection, the statuses answered until the connection ends, and the
// requests the origin must read (by their request lines), nothing else.
type strictCase struct {
	name  string
	raw   string
	want  []int
	reach []string // the request lines the origin reads, in order
	// h2 is the shape as an HTTP/2 request's extra fields (lower-case
	// names), when it can be written in HTTP/2; want[0] is its answer.
	h2 map[string]string
	// body, when set, is written once the gateway answers raw (a head
	// with Expect: 100-continue) with 100 Continue: the head has been
	// admitted before a byte of the body arrives.
	body string
	// forbid are further bytes the origin must not read.
	forbid []string
}

const strictHost = "Host: gw.test\r\n"

var strictCases = []strictCase{
	// Near-miss names: a protected name once '_' is '-' (and separator
	// runs are one), refused whatever downstream.underscore_headers says.
	{name: "Transfer_Encoding", raw: "POST /te HTTP/1.1\r\n" + strictHost + "Transfer_Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello",
		want: []int{400}, h2: map[string]string{"transfer_encoding": "chunked"}},
	{name: "Content_Length", raw: "GET /cl HTTP/1.1\r\n" + strictHost + "Content_Length: 1000\r\n\r\n",
		want: []int{400}, h2: map[string]string{"content_length": "1000"}},
	{name: "Transfer---Encoding", raw: "POST /te3 HTTP/1.1\r\n" + strictHost + "Transfer---Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello",
		want: []int{400}, h2: map[string]string{"transfer---encoding": "chunked"}},
	{name: "X_Forwarded_For", raw: "GET /xff HTTP/1.1\r\n" + strictHost + "X_Forwarded_For: 6.6.6.6\r\n\r\n",
		want: []int{400}, h2: map[string]string{"x_forwarded_for": "6.6.6.6"}},
	{name: "X-Forwarded_Client-Cert", raw: "GET /xfcc HTTP/1.1\r\n" + strictHost + "X-Forwarded_Client-Cert: By=spoofed\r\n\r\n",
		want: []int{400}, h2: map[string]string{"x-forwarded_client-cert": "By=spoofed"}},
	// Any other name with '_' is dropped (the default).
	{name: "X_Api_Key dropped", raw: "GET /key HTTP/1.1\r\n" + strictHost + "X_Api_Key: k\r\nConnection: close\r\n\r\n",
		want: []int{200}, reach: []string{"GET /key HTTP/1.1"}, h2: map[string]string{"x_api_key": "k"}},
	// A bare LF ends a line for net/http: two requests there, the
	// second GET /admin. One request, refused, here (llhttp 093, 096, 104).
	{name: "bare LF smuggles /admin",
		raw:  "GET / HTTP/1.1\r\nHost: localhost\r\nDummy: x\nContent-Length: 23\r\n\r\nGET / HTTP/1.1\r\nDummy: GET /admin HTTP/1.1\r\nHost: localhost\r\n\r\n",
		want: []int{400}},
	{name: "bare LF smuggles /admin behind a served request",
		raw: "GET /first HTTP/1.1\r\n" + strictHost + "\r\n" +
			"GET / HTTP/1.1\r\nHost: localhost\r\nDummy: x\nContent-Length: 23\r\n\r\nGET / HTTP/1.1\r\nDummy: GET /admin HTTP/1.1\r\nHost: localhost\r\n\r\n",
		want: []int{200, 400}, reach: []string{"GET /first HTTP/1.1"}},
	{name: "bare CR in a field", raw: "GET /cr HTTP/1.1\r\n" + strictHost + "X-A: a\rb\r\n\r\n", want: []int{400}},
	// Loose chunk lines (llhttp 072, 074, 087).
	{name: "chunk extension without a name", raw: "POST /c1 HTTP/1.1\r\n" + strictHost + "Transfer-Encoding: chunked\r\n\r\n2;\r\naa\r\n0\r\n\r\n", want: []int{400}},
	{name: "chunk size then a space", raw: "POST /c2 HTTP/1.1\r\n" + strictHost + "Transfer-Encoding: chunked\r\n\r\na \r\n0123456789\r\n0\r\n\r\n", want: []int{400}},
	{name: "unclosed quoted chunk extension", raw: "POST /c3 HTTP/1.1\r\n" + strictHost + "Transfer-Encoding: chunked\r\n\r\n2;a=\"b\r\naa\r\n0\r\n\r\n", want: []int{400}},
	// The same after the head was admitted: the body comes after 100
	// Continue, and the guard's verdict on it still stops the request.
	{name: "loose chunk line after 100 Continue", raw: "POST /late HTTP/1.1\r\n" + strictHost + "Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
		body: "2;\r\naa\r\n0\r\n\r\n", want: []int{100, 400}},
	// Trailers go through the name rules: a disguised name is refused
	// (the body is then cut short upstream), one with '_' dropped.
	{name: "trailer Content_Length", raw: "POST /tr HTTP/1.1\r\n" + strictHost + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nContent_Length: 5\r\n\r\n",
		want: []int{400}},
	{name: "trailer X_Sum dropped", raw: "POST /tr2 HTTP/1.1\r\n" + strictHost + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\nX_Sum: 5\r\nX-Ok: 1\r\n\r\n",
		want: []int{200}, reach: []string{"POST /tr2 HTTP/1.1"}},
	// A chunked body's first byte is not a chunk of its own upstream.
	{name: "chunked body", raw: "POST /cb HTTP/1.1\r\n" + strictHost + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
		want: []int{200}, reach: []string{"POST /cb HTTP/1.1"}, forbid: []string{"\r\n1\r\nh\r\n"}},
	// Absolute form with an empty path: "/".
	{name: "absolute form, empty path", raw: "GET http://gw.test HTTP/1.1\r\n" + strictHost + "Connection: close\r\n\r\n",
		want: []int{200}, reach: []string{"GET / HTTP/1.1"}},
	// One empty line before a request line is ignored; two are refused.
	{name: "one leading empty line", raw: "\r\nGET /one HTTP/1.1\r\n" + strictHost + "Connection: close\r\n\r\n",
		want: []int{200}, reach: []string{"GET /one HTTP/1.1"}},
	{name: "two leading empty lines", raw: "\r\n\r\nGET /two HTTP/1.1\r\n" + strictHost + "\r\n", want: []int{400}},
	{name: "one empty line between pipelined requests",
		raw:  "GET /p1 HTTP/1.1\r\n" + strictHost + "\r\n\r\nGET /p2 HTTP/1.1\r\n" + strictHost + "Connection: close\r\n\r\n",
		want: []int{200, 200}, reach: []string{"GET /p1 HTTP/1.1", "GET /p2 HTTP/1.1"}},
}

// underscoreName matches a field name with '_' at the start of a line.
var underscoreName = regexp.MustCompile(`(?m)^[!#$%&'*+.^` + "`" + `|~0-9A-Za-z-]*_[!#$%&'*+.^_` + "`" + `|~0-9A-Za-z-]*:`)

// checkOriginBytes checks what the origin read during a case: the request
// lines it expects and no other, and nothing ambiguous — no /admin, no
// field name with '_' or a run of '-', no forged address, one framing per
// request.
func checkOriginBytes(t *testing.T, wire string, reach []string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(wire, "\r\n") {
		if strings.HasSuffix(l, " HTTP/1.1") && strings.Contains(l, " /") {
			lines = append(lines, l)
		}
	}
	if !slices.Equal(lines, reach) {
		t.Errorf("the origin read the requests %q, want %q\n%q", lines, reach, wire)
	}
	for _, bad := range []string{"/admin", "--", "6.6.6.6", "spoofed", "\n\n", "\r\r"} {
		if strings.Contains(wire, bad) {
			t.Errorf("the origin read %q:\n%q", bad, wire)
		}
	}
	if m := underscoreName.FindString(wire); m != "" {
		t.Errorf("the origin read the field name %q:\n%q", m, wire)
	}
	for _, req := range strings.SplitAfter(wire, "\r\n\r\n") {
		l := strings.ToLower(req)
		if strings.Count(l, "\ncontent-length:")+strings.Count(l, "\ntransfer-encoding:") > 1 {
			t.Errorf("a request with two framings reached the origin:\n%q", req)
		}
	}
}

// strictListener is one way a request arrives.
type strictListener struct {
	name string
	tls  bool
	h2   bool
}

var strictListeners = []strictListener{{"cleartext", false, false}, {"https1.1", true, false}, {"h2", true, true}}

func TestStrictByDefaultOnEveryListenerAndPath(t *testing.T) {
	rec := startBytesRecorder(t)
	ca, dir := newTestCA(t), t.TempDir()
	ca.issue(t, dir, "gw", "gw.test")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Leaf)
	for _, fast := range []bool{true, false} {
		for _, ln := range strictListeners {
			t.Run(fmt.Sprintf("%s/fast_path=%v", ln.name, fast), func(t *testing.T) {
				top := ""
				if ln.tls {
					top = "tls: {" + pairKeys(dir, "gw") + "}\n"
				}
				g := startGateway(t, top+strictYAML(rec.addr, fast, ""), nil, Options{})
				defer g.Close()
				for _, tc := range strictCases {
					if ln.h2 && tc.h2 == nil {
						continue // not a shape HTTP/2 can carry
					}
					_, from := rec.wireSince(0)
					var got []int
					if ln.h2 {
						got = []int{h2Status(t, g.Addr(), roots, tc.h2)}
					} else {
						got = rawStatuses(t, g.Addr(), ln.tls, roots, tc.raw, tc.body)
					}
					want := tc.want
					if ln.h2 {
						want = want[:1]
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s: answered %v, want %v", tc.name, got, want)
					}
					wire, _ := rec.wireSince(from)
					reach := tc.reach
					if ln.h2 && len(reach) > 0 {
						reach = []string{"GET /h2 HTTP/1.1"}
					}
					t.Run(tc.name, func(t *testing.T) {
						checkOriginBytes(t, wire, reach)
						for _, bad := range tc.forbid {
							if strings.Contains(wire, bad) {
								t.Errorf("the origin read %q:\n%q", bad, wire)
							}
						}
					})
				}
			})
		}
	}
}

// strictYAML is a gateway on the recording origin, its fast path on or
// off, with extra downstream keys.
func strictYAML(addr string, fast bool, downstream string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
downstream: {fast_path: %v%s}
routes: [{origin: app}]
origins:
  - name: app
    protocol: h1
    pool: {prewarm: 0}
    endpoints: [{address: %q}]
`, fast, downstream, addr)
}

// rawStatuses writes raw on a new connection (over TLS, HTTP/1.1 by ALPN,
// when tls is set), then body after a 100 Continue, and returns the status of every response until the
// gateway closes it (heldOpen last if it did not within 5 s).
func rawStatuses(t *testing.T, addr string, useTLS bool, roots *x509.CertPool, raw, body string) []int {
	t.Helper()
	var conn net.Conn
	var err error
	if useTLS {
		conn, err = tls.Dial("tcp", addr, &tls.Config{ServerName: "gw.test", RootCAs: roots, NextProtos: []string{"http/1.1"}})
	} else {
		conn, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	var codes []int
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if isTimeout(err) {
				codes = append(codes, heldOpen)
			}
			return codes
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusContinue && body != "" {
			io.WriteString(conn, body)
		}
	}
}

// heldOpen is rawStatuses' mark for a connection left open after the
// answers before it: every case ends its connection.
const heldOpen = -1

// h2Status sends GET /h2 over HTTP/2 (TLS, h2 by ALPN) with the extra
// fields and returns the status.
func h2Status(t *testing.T, addr string, roots *x509.CertPool, fields map[string]string) int {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "gw.test", RootCAs: roots}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest("GET", "https://"+addr+"/h2", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "gw.test"
	for k, v := range fields {
		req.Header[k] = []string{v}
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.ProtoMajor != 2 {
		t.Fatalf("served over %s, want HTTP/2", resp.Proto)
	}
	return resp.StatusCode
}

// TestUnderscoreHeadersSettings checks downstream.underscore_headers on
// both serving paths: drop forwards the request without the field, reject
// answers 400 and forwards nothing, allow forwards it as it is; a
// disguised protected name is refused under each; and a reload changes
// the setting in place.
func TestUnderscoreHeadersSettings(t *testing.T) {
	rec := startBytesRecorder(t)
	const req = "GET /u HTTP/1.1\r\n" + strictHost + "X_Api_Key: k\r\nConnection: close\r\n\r\n"
	const disguised = "GET /d HTTP/1.1\r\n" + strictHost + "Content_Length: 1000\r\nConnection: close\r\n\r\n"
	for _, fast := range []bool{true, false} {
		file := filepath.Join(t.TempDir(), "corput.yaml")
		writeFileAtomic(t, file, strictYAML(rec.addr, fast, ""))
		g := startFromFile(t, file)
		for _, tc := range []struct {
			setting string
			want    int
			reach   []string
			kept    bool
		}{
			{"", 200, []string{"GET /u HTTP/1.1"}, false}, // the default: drop
			{"reject", 400, nil, false},
			{"allow", 200, []string{"GET /u HTTP/1.1"}, true},
			{"drop", 200, []string{"GET /u HTTP/1.1"}, false},
		} {
			extra := ""
			if tc.setting != "" {
				extra = ", underscore_headers: " + tc.setting
			}
			writeFileAtomic(t, file, strictYAML(rec.addr, fast, extra))
			if err := g.ReloadFromSource(); err != nil {
				t.Fatalf("reload to %q: %v", tc.setting, err)
			}
			name := fmt.Sprintf("fast_path=%v/%s", fast, cmp.Or(tc.setting, "default"))
			_, from := rec.wireSince(0)
			if got := rawStatuses(t, g.Addr(), false, nil, req, ""); !slices.Equal(got, []int{tc.want}) {
				t.Errorf("%s: answered %v, want %d", name, got, tc.want)
			}
			wire, from := rec.wireSince(from)
			if kept := strings.Contains(strings.ToLower(wire), "\r\nx_api_key: k\r\n"); kept != tc.kept {
				t.Errorf("%s: the origin read X_Api_Key: %v, want %v\n%q", name, kept, tc.kept, wire)
			}
			if tc.kept {
				continue // allow forwards it: the origin's bytes hold the name, on purpose
			}
			checkOriginBytes(t, wire, tc.reach)
			if got := rawStatuses(t, g.Addr(), false, nil, disguised, ""); !slices.Equal(got, []int{400}) {
				t.Errorf("%s: Content_Length answered %v, want 400", name, got)
			}
			if wire, _ := rec.wireSince(from); wire != "" {
				t.Errorf("%s: Content_Length reached the origin:\n%q", name, wire)
			}
		}
	}
}

// TestRefusedTrailerAbortsTheRequestUpstream sends a chunked request whose
// trailer, a disguised Content-Length, arrives only after the request
// went upstream (the origin has read its head): the client is answered
// 400 and the connection closed, and the origin never reads the trailer
// nor the body's end.
func TestRefusedTrailerAbortsTheRequestUpstream(t *testing.T) {
	rec := startBytesRecorder(t)
	for _, fast := range []bool{true, false} {
		g := startGateway(t, strictYAML(rec.addr, fast, ""), nil, Options{})
		_, from := rec.wireSince(0)
		conn := sendRaw(t, g.Addr(), "POST /late-trailer HTTP/1.1\r\n"+strictHost+"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		for {
			if wire, _ := rec.wireSince(from); strings.Contains(wire, "hello") {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		io.WriteString(conn, "0\r\nContent_Length: 5\r\n\r\n")
		codes := readResponses(t, bufio.NewReader(conn))
		conn.Close()
		if !slices.Equal(codes, []int{400}) {
			t.Errorf("fast_path=%v: answered %v, want 400 and the connection closed", fast, codes)
		}
		wire, _ := rec.wireSince(from)
		if strings.Contains(wire, "Content_Length") || strings.Contains(wire, "0\r\n\r\n") {
			t.Errorf("fast_path=%v: the origin read the trailer or the body's end:\n%q", fast, wire)
		}
		g.Close()
	}
}
