package gateway

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corput/corput/internal/config"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/testlog"
)

// writeToken writes token (with a newline, as editors and echo leave it)
// to a file in a fresh directory and returns its path.
func writeToken(t *testing.T, token string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// adminStatus requests path ("POST /path" for a POST) on g's admin
// listener with the Authorization header auth ("" for none).
func adminStatus(t *testing.T, g *Gateway, path, auth string) (int, http.Header) {
	t.Helper()
	method := "GET"
	if p, ok := strings.CutPrefix(path, "POST "); ok {
		method, path = "POST", p
	}
	req, err := http.NewRequest(method, "http://"+g.AdminAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := adminHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestAdminTokenOverHTTP: a gateway whose admin block has a token file
// serves /metrics and the probes to anyone, and /admin/*, /debug/pprof/
// and the dashboard only with the token — on loopback too, where the test
// can bind (the rule off loopback is telemetry's TestProtectAdminWithoutToken
// and TestLoopbackAddr).
func TestAdminTokenOverHTTP(t *testing.T) {
	const token = "0123456789abcdef-admin"
	file := writeToken(t, token)
	logger, logs := testlog.New(slog.LevelDebug)
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "dashboard") })
	yaml := strings.Replace(cfgText(1, ""), "admin: 127.0.0.1:0", "admin: {listen: 127.0.0.1:0, token_file: "+file+"}", 1)
	g := startGateway(t, yaml, startOrigins(t, 1, testorigin.Options{}), Options{
		Dashboard: dash,
		Logger:    logger,
	})

	for _, path := range []string{"/metrics", "/readyz", "/healthz"} {
		if code, _ := adminStatus(t, g, path, ""); code != 200 {
			t.Errorf("GET %s without a token = %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/admin/origins", "/admin/subsets?origin=app", "/debug/pprof/", "/", "/dashboard/history", "/admin/config", "POST /admin/reload"} {
		for _, auth := range []string{"", "Bearer not-the-token"} {
			code, h := adminStatus(t, g, path, auth)
			if code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("GET %s with Authorization %q = %d (WWW-Authenticate %q), want 401 with a Bearer challenge",
					path, auth, code, h.Get("WWW-Authenticate"))
			}
		}
	}
	for _, path := range []string{"/admin/origins", "/admin/subsets?origin=app", "/debug/pprof/", "/", "/dashboard/history", "/admin/config"} {
		if code, _ := adminStatus(t, g, path, "Bearer "+token); code != 200 {
			t.Errorf("GET %s with the token = %d, want 200", path, code)
		}
	}
	// With the token the reload reaches the gateway, which has no file to
	// read again.
	if code, _ := adminStatus(t, g, "POST /admin/reload", "Bearer "+token); code != http.StatusConflict {
		t.Errorf("POST /admin/reload with the token = %d, want 409 (no configuration file)", code)
	}
	if !strings.Contains(logs.String(), "admin_access=token") {
		t.Errorf("the start line does not say the admin API needs the token:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the log shows the token:\n%s", logs.String())
	}
}

// TestAdminTokenFileGoneBeforeNew: New reads the token itself; a file that
// went away after the config was parsed is an error naming the key, not a
// gateway without a token.
func TestAdminTokenFileGoneBeforeNew(t *testing.T) {
	file := writeToken(t, "a-token")
	text := strings.Replace(withEndpoints(cfgText(1, ""), "127.0.0.1:1"), "admin: 127.0.0.1:0", "admin: {listen: 127.0.0.1:0, token_file: "+file+"}", 1)
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil {
		g.Close()
		t.Fatal("New accepted a config whose token file is gone")
	}
	if !strings.Contains(err.Error(), "admin.token_file") {
		t.Errorf("error %q does not name admin.token_file", err)
	}
}

// nonLoopbackIP returns an address of this machine that is not loopback
// and can be listened on, or skips the test.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() || ipn.IP.To4() == nil {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ipn.IP.String(), "0"))
		if err != nil {
			continue
		}
		ln.Close()
		return ipn.IP.String()
	}
	t.Skip("this machine has no non-loopback IPv4 address to listen on")
	return ""
}

// TestAdminOffLoopbackWithoutToken: on a machine with a non-loopback
// address, an admin listener there without a token file serves the open
// paths and refuses the protected ones with 403; with a token file it
// serves them to the token. (Where no such address exists the rule is
// covered by telemetry's tests of the handler and of LoopbackAddr.)
func TestAdminOffLoopbackWithoutToken(t *testing.T) {
	ip := nonLoopbackIP(t)
	origins := startOrigins(t, 1, testorigin.Options{})
	open := strings.Replace(cfgText(1, ""), "admin: 127.0.0.1:0", "admin: "+ip+":0", 1)
	g := startGateway(t, open, origins, Options{})
	for _, path := range []string{"/metrics", "/readyz", "/healthz"} {
		if code, _ := adminStatus(t, g, path, ""); code != 200 {
			t.Errorf("GET %s on %s = %d, want 200", path, ip, code)
		}
	}
	for _, path := range []string{"/admin/origins", "/debug/pprof/", "/debug/pprof/profile?seconds=1", "/", "/admin/config", "POST /admin/reload"} {
		if code, h := adminStatus(t, g, path, "Bearer x"); code != 403 || h.Get("X-Corput-Error") != "admin_token_not_configured" {
			t.Errorf("GET %s on %s without a token file = %d %q, want 403 admin_token_not_configured", path, ip, code, h.Get("X-Corput-Error"))
		}
	}

	file := writeToken(t, "off-loopback-token")
	withToken := strings.Replace(cfgText(1, ""), "admin: 127.0.0.1:0", "admin: {listen: "+ip+":0, token_file: "+file+"}", 1)
	g = startGateway(t, withToken, origins, Options{})
	if code, _ := adminStatus(t, g, "/admin/origins", ""); code != 401 {
		t.Errorf("GET /admin/origins on %s with a token file, without the token = %d, want 401", ip, code)
	}
	if code, _ := adminStatus(t, g, "/admin/origins", "Bearer off-loopback-token"); code != 200 {
		t.Errorf("GET /admin/origins on %s with the token = %d, want 200", ip, code)
	}
}
