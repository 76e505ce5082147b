package telemetry

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corput/corput/internal/mdtable"
)

// adminGet requests base+path with the given method and Authorization
// header ("" for none) and returns the response with its body read.
func adminGet(t *testing.T, method, base, path, auth string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// protectedAdmin serves the admin API of a ready fakeSource behind access,
// with a dashboard that reports whether it saw an Authorization header.
func protectedAdmin(t *testing.T, access AdminAccess) *httptest.Server {
	t.Helper()
	src := &fakeSource{}
	src.ready.Store(true)
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "dashboard, authorization header: "+r.Header.Get("Authorization"))
	})
	srv := httptest.NewServer(ProtectAdmin(AdminHandler(New(), src, dash), access))
	t.Cleanup(srv.Close)
	return srv
}

// The paths of the admin API and what each answers once let through.
var (
	openPaths      = map[string]int{"/metrics": 200, "/healthz": 200, "/readyz": 200}
	protectedPaths = map[string]int{
		"/admin/origins":                 200,
		"/admin/subsets?origin=payments": 200,
		"/debug/pprof/":                  200,
		"/debug/pprof/goroutine?debug=1": 200,
		"/":                              200,
		"/dashboard/history":             200,
		"/admin/config":                  200,
		"/nope":                          404,
		"/readyz/":                       404, // only the exact open paths are open
		"/metrics/../admin/origins":      307, // the mux redirects to the clean path, but only a holder of the token
	}
)

func TestProtectAdminWithToken(t *testing.T) {
	const token = "s3cret-T0ken"
	srv := protectedAdmin(t, AdminAccess{Token: token, Loopback: true})
	for path, want := range openPaths {
		if resp, body := adminGet(t, "GET", srv.URL, path, ""); resp.StatusCode != want {
			t.Errorf("GET %s without a token = %d %q, want %d", path, resp.StatusCode, body, want)
		}
	}
	for path := range protectedPaths {
		for _, c := range []struct {
			auth, reason, challenge string
		}{
			{"", "admin_token_missing", `Bearer realm="corput admin"`},
			{"Basic " + token, "admin_token_missing", `Bearer realm="corput admin"`},
			{"Bearer", "admin_token_missing", `Bearer realm="corput admin"`},
			{"Bearer ", "admin_token_missing", `Bearer realm="corput admin"`},
			{token, "admin_token_missing", `Bearer realm="corput admin"`},
			{"Bearer wrong", "admin_token_invalid", `Bearer realm="corput admin", error="invalid_token"`},
			{"Bearer " + token + "x", "admin_token_invalid", `Bearer realm="corput admin", error="invalid_token"`},
			{"Bearer " + token[:len(token)-1], "admin_token_invalid", `Bearer realm="corput admin", error="invalid_token"`},
			{"Bearer " + strings.ToUpper(token), "admin_token_invalid", `Bearer realm="corput admin", error="invalid_token"`},
		} {
			for _, method := range []string{"GET", "HEAD", "POST"} {
				resp, body := adminGet(t, method, srv.URL, path, c.auth)
				h := resp.Header
				if resp.StatusCode != 401 || h.Get("WWW-Authenticate") != c.challenge || h.Get("X-Corput-Error") != c.reason ||
					h.Get("Cache-Control") != "no-store" {
					t.Errorf("%s %s with Authorization %q = %d, WWW-Authenticate %q, X-Corput-Error %q, Cache-Control %q; want 401, %q, %q, no-store",
						method, path, c.auth, resp.StatusCode, h.Get("WWW-Authenticate"), h.Get("X-Corput-Error"), h.Get("Cache-Control"), c.challenge, c.reason)
				}
				if method != "HEAD" && !strings.HasPrefix(body, "Unauthorized: "+c.reason+": ") {
					t.Errorf("%s %s: body %q, want Unauthorized: %s: …", method, path, body, c.reason)
				}
				if strings.Contains(body, token) {
					t.Errorf("%s %s: the refusal shows the token: %q", method, path, body)
				}
			}
		}
	}
	noRedirect := *http.DefaultClient
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for path, want := range protectedPaths {
		for _, auth := range []string{"Bearer " + token, "bearer " + token, "BEARER  " + token + " "} {
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			req.Header.Set("Authorization", auth)
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || resp.Header.Get("X-Corput-Error") != "" {
				t.Errorf("GET %s with the token (%q) = %d %q, want %d", path, auth, resp.StatusCode, body, want)
			}
			if path == "/" && !strings.HasSuffix(string(body), "authorization header: ") {
				t.Errorf("the handler behind the guard saw the Authorization header: %q", body)
			}
		}
	}
}

func TestProtectAdminWithoutToken(t *testing.T) {
	t.Run("not on loopback", func(t *testing.T) {
		srv := protectedAdmin(t, AdminAccess{Loopback: false})
		for path, want := range openPaths {
			if resp, body := adminGet(t, "GET", srv.URL, path, ""); resp.StatusCode != want {
				t.Errorf("GET %s = %d %q, want %d", path, resp.StatusCode, body, want)
			}
		}
		for path := range protectedPaths {
			for _, auth := range []string{"", "Bearer anything"} {
				resp, body := adminGet(t, "GET", srv.URL, path, auth)
				if resp.StatusCode != 403 || resp.Header.Get("X-Corput-Error") != "admin_token_not_configured" ||
					resp.Header.Get("WWW-Authenticate") != "" || !strings.HasPrefix(body, "Forbidden: admin_token_not_configured: ") {
					t.Errorf("GET %s (Authorization %q) = %d %v %q; want 403 admin_token_not_configured without a challenge",
						path, auth, resp.StatusCode, resp.Header, body)
				}
			}
		}
	})
	t.Run("on loopback", func(t *testing.T) {
		srv := protectedAdmin(t, AdminAccess{Loopback: true})
		for path, want := range openPaths {
			if resp, _ := adminGet(t, "GET", srv.URL, path, ""); resp.StatusCode != want {
				t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
			}
		}
		for _, path := range []string{"/admin/origins", "/debug/pprof/", "/"} {
			if resp, body := adminGet(t, "GET", srv.URL, path, ""); resp.StatusCode != 200 {
				t.Errorf("GET %s on loopback without a token configured = %d %q, want 200", path, resp.StatusCode, body)
			}
		}
	})
}

// TestProtectAdminCPUProfile: the CPU profile, the one admin path that
// works for seconds, is refused at once without the token and served with
// it.
func TestProtectAdminCPUProfile(t *testing.T) {
	srv := protectedAdmin(t, AdminAccess{Token: "tok", Loopback: true})
	if resp, _ := adminGet(t, "GET", srv.URL, "/debug/pprof/profile?seconds=1", "Bearer nope"); resp.StatusCode != 401 {
		t.Errorf("profile with a wrong token = %d, want 401", resp.StatusCode)
	}
	resp, body := adminGet(t, "GET", srv.URL, "/debug/pprof/profile?seconds=1", "Bearer tok")
	if resp.StatusCode != 200 || len(body) == 0 {
		t.Errorf("profile with the token = %d, %d bytes", resp.StatusCode, len(body))
	}
}

func TestLoopbackAddr(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 9901}, true},
		{&net.TCPAddr{IP: net.ParseIP("127.3.2.1"), Port: 9901}, true},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 9901}, true},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 9901}, true},
		{&net.TCPAddr{IP: net.ParseIP("0.0.0.0"), Port: 9901}, false},
		{&net.TCPAddr{IP: net.ParseIP("::"), Port: 9901}, false},
		{&net.TCPAddr{Port: 9901}, false},
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 9901}, false},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 9901}, false},
		{&net.UnixAddr{Name: "/run/corput.sock", Net: "unix"}, false},
		{nil, false},
	} {
		if got := LoopbackAddr(c.addr); got != c.want {
			t.Errorf("LoopbackAddr(%v) = %v, want %v", c.addr, got, c.want)
		}
	}
	for a, want := range map[AdminAccess]string{
		{Token: "x"}:                 "token",
		{Token: "x", Loopback: true}: "token",
		{Loopback: true}:             "loopback",
		{}:                           "open paths only",
	} {
		if got := a.Mode(); got != want {
			t.Errorf("%+v.Mode() = %q, want %q", a, got, want)
		}
	}
}

// TestAdminRefusalsAreInTheContract: every refusal ProtectAdmin makes has
// its row in docs/contract.md §4 with its status and challenge, as
// served.
func TestAdminRefusalsAreInTheContract(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	withToken := protectedAdmin(t, AdminAccess{Token: "tok", Loopback: true})
	noToken := protectedAdmin(t, AdminAccess{})
	for _, c := range []struct {
		srv  *httptest.Server
		auth string
	}{{withToken, ""}, {withToken, "Bearer nope"}, {noToken, ""}} {
		resp, _ := adminGet(t, "GET", c.srv.URL, "/admin/origins", c.auth)
		reason := resp.Header.Get("X-Corput-Error")
		cells, ok := mdtable.Find(string(doc), 1, "`"+reason+"`")
		if !ok {
			t.Errorf("docs/contract.md has no row for the admin refusal %q", reason)
			continue
		}
		challenge := "none"
		if h := resp.Header.Get("WWW-Authenticate"); h != "" {
			challenge = "`" + h + "`"
		}
		if cells[0] != strconv.Itoa(resp.StatusCode) || cells[2] != challenge {
			t.Errorf("the row of %s says %s, %s; served %d, %s", reason, cells[0], cells[2], resp.StatusCode, challenge)
		}
	}
}
