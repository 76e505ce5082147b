package proxies

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/load"
	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/testbin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parseConfig parses text as corput's config.
func parseConfig(t *testing.T, text string, err error) *config.Config {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(text), "bench.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, text[:min(len(text), 600)])
	}
	return cfg
}

// TestCorputConfigIsValid: the generated gateway configs pass corput's
// own validation, static and with a discovery file, in cleartext and with
// raw_tls's certificate (and otherwise the same settings).
func TestCorputConfigIsValid(t *testing.T) {
	members := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	tc, err := certs.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, cert := range []*certs.Files{nil, tc} {
		for _, joining := range []bool{false, true} {
			text, err := Corput{}.config("127.0.0.1:8080", members, joining, cert)
			cfg := parseConfig(t, text, err)
			o := cfg.Origins[0]
			if o.Balancer.Policy != "least_work" || o.Pool.MaxPending != 50 || o.SlowStart.Window != 60*time.Second {
				t.Errorf("joining=%v: policy %q, max_pending %d, slow start %v; want least_work (the default), 50, 60s", joining, o.Balancer.Policy, o.Pool.MaxPending, o.SlowStart.Window)
			}
			if joining != (o.Discovery.Type == config.DiscoveryFile) {
				t.Errorf("joining=%v: discovery %q", joining, o.Discovery.Type)
			}
			if !cfg.Downstream.FastPath {
				t.Errorf("tls=%v: fast_path off; want corput's default (on; it serves cleartext only)", cert != nil)
			}
			switch {
			case cert == nil && cfg.TLS != nil:
				t.Errorf("cleartext config has tls %+v", *cfg.TLS)
			case cert != nil && (cfg.TLS == nil || cfg.TLS.Cert != tc.Cert || cfg.TLS.Key != tc.Key || cfg.TLS.ClientCA != ""):
				t.Errorf("tls = %+v; want cert %s and key %s, no client_ca", cfg.TLS, tc.Cert, tc.Key)
			}
		}
	}
}

// TestPeerConfigsAreValid asks each installed peer to check its generated
// config, cleartext and raw_tls's (skipped for a peer that is not
// installed); the TLS configs name the certificate, TLS 1.3 and the
// suite.
func TestPeerConfigsAreValid(t *testing.T) {
	members := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	tc, err := certs.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wantTLS := map[string][]string{
		results.Nginx:   {"listen 127.0.0.1:18080 ssl;", "ssl_certificate " + tc.Cert + ";", "ssl_certificate_key " + tc.Key + ";", "ssl_protocols TLSv1.3;", "ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;"},
		results.HAProxy: {"bind 127.0.0.1:18080 ssl crt " + tc.Both + " ssl-min-ver TLSv1.3 ciphersuites TLS_AES_128_GCM_SHA256\n"},
		results.Caddy:   {"https://127.0.0.1:18080 {", "tls " + tc.Cert + " " + tc.Key + " {", "protocols tls1.3\n", "ciphers TLS_AES_128_GCM_SHA256", "protocols h1 h2\n"},
	}
	for _, p := range []Proxy{Nginx{}, HAProxy{}, Nginx{Fwd: true}, HAProxy{Fwd: true}, Caddy{}} {
		for _, cert := range []*certs.Files{nil, tc} {
			name := p.Name()
			if cert != nil {
				name += "/tls"
			}
			t.Run(name, func(t *testing.T) {
				testPeerConfig(t, p, members, cert, wantTLS[p.Name()])
			})
		}
	}
}

// checkPeerConfig has an installed peer check the config of argv, written
// in dir (skipped when the peer is not installed), and returns the
// config's text.
func checkPeerConfig(t *testing.T, p Proxy, dir string, argv []string) string {
	t.Helper()
	var check []string
	path := configPath(p, dir)
	switch p.Name() {
	case results.Nginx:
		check = append(argv, "-t")
	case results.HAProxy:
		check = []string{"haproxy", "-c", "-f", path}
	case results.Caddy:
		check = []string{"caddy", "validate", "--config", path, "--adapter", "caddyfile"}
	}
	if _, err := exec.LookPath(check[0]); err != nil {
		t.Skipf("%s not installed", check[0])
	}
	cmd := exec.Command(check[0], check[1:]...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(check, " "), err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// configPath is the config file p writes in dir, a variant's being its
// proxy's.
func configPath(p Proxy, dir string) string {
	switch v := p.(type) {
	case H2Upstream:
		p = v.Proxy
	case TLSUpstream:
		p = v.Proxy
	}
	path, _ := p.(launcher).launch(dir)
	return path
}

func testPeerConfig(t *testing.T, p Proxy, members []string, tc *certs.Files, wantTLS []string) {
	if _, err := exec.LookPath(p.Bin()); err != nil {
		t.Skipf("%s not installed", p.Bin())
	}
	dir := t.TempDir()
	argv, err := p.Files(dir, "127.0.0.1:18080", members, "127.0.0.1:9005", tc)
	if err != nil {
		t.Fatal(err)
	}
	b := checkPeerConfig(t, p, dir, argv)
	for _, m := range append(members, "127.0.0.1:9005") {
		if !strings.Contains(b, m) {
			t.Errorf("config lacks member %s", m)
		}
	}
	for _, w := range wantTLS {
		if has := strings.Contains(b, w); has != (tc != nil) {
			t.Errorf("tls=%v: config has %q: %v\n%s", tc != nil, w, has, b)
		}
	}
}

// startInTest starts p in front of members (skipped when p's executable
// is not installed), stopped when the test ends, and returns its
// listening address.
func startInTest(t *testing.T, ctx context.Context, p Proxy, members []string, tc *certs.Files) string {
	t.Helper()
	if p.Bin() != "" {
		if _, err := exec.LookPath(p.Bin()); err != nil {
			t.Skipf("%s not installed", p.Bin())
		}
	}
	dir := t.TempDir()
	ps := proc.New(dir)
	t.Cleanup(ps.StopAll)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, listen, err := Start(ctx, ps, p, filepath.Join(dir, p.Name()), members, "", tc)
	if err != nil {
		t.Fatal(err)
	}
	return listen
}

// TestPeersForwardLikeCorput runs each installed peer with
// --forwarded-headers (the default) in front of a recording origin: the
// origin gets the X-Forwarded-For, -Proto and -Host that corput sends for
// a direct client (internal/gateway's Forwarding), so every proxy hands
// the origins the same work. Without it nginx and HAProxy send none.
func TestPeersForwardLikeCorput(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/probe" {
			mu.Lock()
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host"} {
				got[k] = strings.Join(r.Header.Values(k), ",")
			}
			mu.Unlock()
		}
	}))
	defer origin.Close()
	members := []string{origin.Listener.Addr().String()}
	for _, fwd := range []bool{true, false} {
		for _, name := range results.Peers {
			p, err := ByName(name, Corput{}, fwd)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("%s/fwd=%v", name, fwd), func(t *testing.T) {
				listen := startInTest(t, context.Background(), p, members, nil)
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
				resp, err := c.Get("http://" + listen + "/probe")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				mu.Lock()
				defer mu.Unlock()
				want := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": listen}
				if !fwd && name != results.Caddy { // Caddy forwards by default
					want = map[string]string{"X-Forwarded-For": "", "X-Forwarded-Proto": "", "X-Forwarded-Host": ""}
				}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s: origin got %s %q, want %q", name, k, got[k], v)
					}
				}
			})
		}
	}
	if _, err := ByName("envoy", Corput{}, true); err == nil || !strings.Contains(err.Error(), "--proxies") {
		t.Errorf("unknown proxy: err = %v", err)
	}
}

// TestProxiesServeTLS runs corput and each installed peer with raw_tls's
// settings in front of a recording origin: each answers HTTPS/1.1 and
// forwards in cleartext with X-Forwarded-Proto https; the peers refuse a
// TLS 1.2 client (corput's tls block cannot: Go's default minimum, TLS
// 1.2, stays); and a handshake as wrk makes it (load.ProbeTLS, when
// openssl is installed) gets TLS 1.3 everywhere and TLS_AES_128_GCM_SHA256
// from nginx and HAProxy, which are configured to it. The suite Go picks
// for corput and Caddy depends on the CPU (AES-GCM instructions), so it is
// logged. corput runs as a real child (internal/testbin; skipped under
// -short).
func TestProxiesServeTLS(t *testing.T) {
	var mu sync.Mutex
	var proto []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			http.Error(w, "TLS at the origin", http.StatusInternalServerError)
			return
		}
		if r.URL.Path == "/probe" {
			mu.Lock()
			proto = r.Header.Values("X-Forwarded-Proto")
			mu.Unlock()
		}
	}))
	defer origin.Close()
	members := []string{origin.Listener.Addr().String()}
	tc, err := certs.Write(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{results.Corput, results.Nginx, results.HAProxy, results.Caddy} {
		t.Run(name, func(t *testing.T) {
			var p Proxy
			if name == results.Corput {
				p = Corput{Binary: testbin.Corput(t)}
			} else {
				var err error
				if p, err = ByName(name, Corput{}, true); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			listen := startInTest(t, ctx, p, members, tc)
			get := func(max uint16) (*http.Response, error) {
				tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: max}, DisableKeepAlives: true}
				defer tr.CloseIdleConnections()
				c := &http.Client{Timeout: 10 * time.Second, Transport: tr}
				resp, err := c.Get("https://" + listen + "/probe")
				if err == nil {
					resp.Body.Close()
				}
				return resp, err
			}
			resp, err := get(0)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 || resp.ProtoMajor != 1 {
				t.Errorf("answer %s over %s, TLS %v; want 200 over HTTP/1.1 and TLS 1.3", resp.Status, resp.Proto, resp.TLS != nil)
			}
			mu.Lock()
			if len(proto) != 1 || proto[0] != "https" {
				t.Errorf("origin got X-Forwarded-Proto %q, want https", proto)
			}
			mu.Unlock()
			if _, err := get(tls.VersionTLS12); name != results.Corput && err == nil {
				t.Error("a TLS 1.2 client was served; want TLS 1.3 only")
			} else if name == results.Corput {
				t.Logf("corput and a TLS 1.2 client: %v (Go's default minimum; corput's tls block has no version setting)", err)
			}
			if _, err := exec.LookPath("openssl"); err != nil {
				t.Skip("openssl not installed: what a client like wrk negotiates is not checked")
			}
			info, err := load.ProbeTLS(ctx, listen)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s (%s)", name, info, info.Library)
			if info.Protocol != certs.Version {
				t.Errorf("negotiated %s; want %s", info, certs.Version)
			}
			if (name == results.Nginx || name == results.HAProxy) && !info.Expected() {
				t.Errorf("negotiated %s; want %s %s, as configured", info, certs.Version, certs.Suite)
			}
			if name == results.Nginx || name == results.HAProxy {
				// A client that offers only another TLS 1.3 suite is refused.
				cmd := exec.CommandContext(ctx, "openssl", "s_client", "-connect", listen, "-servername", "127.0.0.1", "-brief", "-ciphersuites", "TLS_AES_256_GCM_SHA384")
				cmd.Stdin = strings.NewReader("")
				out, _ := cmd.CombinedOutput()
				if got, err := load.ParseSClient(string(out)); err == nil {
					t.Errorf("a client offering only TLS_AES_256_GCM_SHA384 negotiated %s; want a refusal", got)
				}
			}
		})
	}
}

// spreadMembers is n loopback addresses from port 20001 on.
func spreadMembers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", 20001+i)
	}
	return out
}

// TestSpreadConfigsAreValid: the spread scenario's corput config (800
// endpoints, loops: 16, subset automatic) passes corput's validation and
// gives 16 loops; with the h2c variant each installed peer accepts its
// config for the same 800 servers (nginx -t, haproxy -c, caddy validate),
// and the listener is the h2c one.
func TestSpreadConfigsAreValid(t *testing.T) {
	members := spreadMembers(800)
	cp := Spread(Corput{Balancer: "{policy: round_robin}"}, 16, true).(Corput)
	text, err := cp.config("127.0.0.1:8080", members, false, nil)
	cfg := parseConfig(t, text, err)
	if cfg.LoopCount() != 16 || len(cfg.Origins[0].Endpoints) != 800 || cfg.Origins[0].Balancer.Policy != "round_robin" || cfg.Origins[0].Subset.Size != 0 {
		t.Errorf("loops %d, %d endpoints, policy %q, subset size %d; want 16, 800, round_robin, 0 (automatic)",
			cfg.LoopCount(), len(cfg.Origins[0].Endpoints), cfg.Origins[0].Balancer.Policy, cfg.Origins[0].Subset.Size)
	}
	if !cp.H2C() {
		t.Error("corput's h2c variant is not probed over h2c")
	}
	wantH2C := map[string]string{results.Nginx: "listen 127.0.0.1:18080 http2;", results.HAProxy: "bind 127.0.0.1:18080 proto h2\n", results.Caddy: "protocols h1 h2c\n"}
	for _, p := range []Proxy{Nginx{Fwd: true}, HAProxy{Fwd: true}, Caddy{}} {
		for _, h2c := range []bool{false, true} {
			v := Spread(p, 16, h2c)
			t.Run(fmt.Sprintf("%s/h2c=%v", p.Name(), h2c), func(t *testing.T) {
				if v.H2C() != h2c {
					t.Fatalf("H2C() = %v", v.H2C())
				}
				dir := t.TempDir()
				argv, err := v.Files(dir, "127.0.0.1:18080", members, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				b := checkPeerConfig(t, v, dir, argv)
				if has := strings.Contains(b, wantH2C[p.Name()]); has != h2c {
					t.Errorf("config has %q: %v", wantH2C[p.Name()], has)
				}
				if p.Name() == results.Nginx && !strings.Contains(b, "keepalive 800;") {
					t.Error("nginx keeps fewer idle upstream connections than it has servers")
				}
			})
		}
	}
}

// TestH2ConfigsAreValid: corput's config parses with h2 upstream over
// verified TLS, the peers' configs pass their own checks, and nginx has
// none.
func TestH2ConfigsAreValid(t *testing.T) {
	members := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	tc, err := certs.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	text, err := Corput{}.h2Config("127.0.0.1:8080", members, tc.Cert, "", 100*time.Second)
	o := parseConfig(t, text, err).Origins[0]
	if o.Protocol != "auto" || o.TLS == nil || o.TLS.CA != tc.Cert || o.TLS.InsecureSkipVerify || o.Timeouts.Request != 100*time.Second || o.Pool.MaxPending != 50 {
		t.Errorf("origin %+v; want protocol auto, tls verified with the bench CA, request timeout 100s, pool defaults", o)
	}
	text, err = Corput{}.h2Config("127.0.0.1:8080", members, tc.Cert, "{acquire_timeout: 1s}", 100*time.Second)
	if o := parseConfig(t, text, err).Origins[0]; o.Pool.AcquireTimeout != time.Second || o.Pool.MaxPending != 50 {
		t.Errorf("--h2-corput-pool '{acquire_timeout: 1s}': %+v; want the pool's acquire timeout 1s, the rest its defaults", o.Pool)
	}
	want := map[string]string{results.HAProxy: "ssl verify required ca-file " + tc.Cert + " alpn h2", results.Caddy: "tls_trusted_ca_certs " + tc.Cert}
	for _, p := range []Proxy{HAProxy{Fwd: true}, Caddy{}} {
		for _, prior := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/prior=%v", p.Name(), prior), func(t *testing.T) {
				dir := t.TempDir()
				v := H2Upstream{Proxy: p, CA: tc.Cert, Prior: prior, Timeout: time.Minute}
				argv, err := v.Files(dir, "127.0.0.1:18080", members, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				if b := checkPeerConfig(t, v, dir, argv); !strings.Contains(b, want[p.Name()]) {
					t.Errorf("config lacks %q:\n%s", want[p.Name()], b)
				}
			})
		}
	}
	if _, err := (H2Upstream{Proxy: Nginx{}}).Files(t.TempDir(), "127.0.0.1:18080", members, "", nil); err == nil {
		t.Error("nginx got an h2 upstream config")
	}
}

// Every proxy's TLS-upstream config presents the client certificate,
// trusts the run's CA and asks for what the scenario says (HTTP/2 where
// the proxy speaks it, TLS 1.3 and the one suite where it takes them);
// with CorputProtocol h1, corput speaks HTTP/1.1 over the same mTLS.
func TestTLSUpstreamConfigs(t *testing.T) {
	u, err := certs.WriteUpstream(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	members := []string{"127.0.0.1:10001", "127.0.0.1:10002"}
	for _, tc := range []struct {
		v    TLSUpstream
		want []string
	}{
		{TLSUpstream{Proxy: Corput{Binary: "corput"}, Up: u}, []string{"protocol: auto", "tls: {ca: " + `"` + u.CA, `cert: "` + u.ClientCert, `key: "` + u.ClientKey}},
		{TLSUpstream{Proxy: Corput{Binary: "corput"}, Up: u, CorputProtocol: "h1"}, []string{"protocol: h1\n    tls: {ca: "}},
		{TLSUpstream{Proxy: Nginx{}, Up: u}, []string{"proxy_pass https://origins;", "proxy_ssl_certificate " + u.ClientCert, "proxy_ssl_trusted_certificate " + u.CA,
			"proxy_ssl_verify on;", "proxy_ssl_protocols TLSv1.3;", "Ciphersuites TLS_AES_128_GCM_SHA256"}},
		{TLSUpstream{Proxy: HAProxy{}, Up: u}, []string{"default-server maxconn 50 slowstart 60s ssl verify required ca-file " + u.CA + " crt " + u.ClientBoth,
			"alpn h2,http/1.1", "ssl-min-ver TLSv1.3", "ciphersuites TLS_AES_128_GCM_SHA256"}},
		{TLSUpstream{Proxy: Caddy{}, Up: u}, []string{"transport http {\n\t\t\ttls\n", "tls_client_auth " + u.ClientCert + " " + u.ClientKey, "tls_trusted_ca_certs " + u.CA}},
	} {
		dir := t.TempDir()
		argv, err := tc.v.Files(dir, "127.0.0.1:8080", members, "", nil)
		if err != nil || len(argv) == 0 {
			t.Fatalf("%s: %v %v", tc.v.Name(), argv, err)
		}
		path := configPath(tc.v, dir)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: config lacks %q:\n%s", tc.v.Name(), w, b)
			}
		}
		if tc.v.Name() == results.Corput {
			cfg := parseConfig(t, string(b), nil)
			if o := cfg.Origins[0]; o.TLS == nil || o.TLS.CA != u.CA || o.TLS.Cert != u.ClientCert {
				t.Errorf("corput's origin tls %+v; want the run's CA and client certificate", o.TLS)
			}
		}
	}
}

// TestCorputAdminReadings: the runner finds corput's admin address in
// the config it wrote, reads the bench origin's requests per loop from
// /admin/origins, and the spans corput dropped from /metrics; a Traced
// corput's config ends with its tracing block.
func TestCorputAdminReadings(t *testing.T) {
	dir := t.TempDir()
	p := Traced{Corput: Corput{Binary: "corput"}, Variant: "1pct", Block: "tracing: {endpoint: \"127.0.0.1:4317\", sample_ratio: 0.01}\n"}
	argv, err := p.Files(dir, "127.0.0.1:18080", []string{"127.0.0.1:9001"}, "", nil)
	if err != nil || argv[0] != "corput" || p.Name() != "corput-tracing-1pct" {
		t.Fatal(argv, err, p.Name())
	}
	admin, err := CorputAdmin(dir)
	if err != nil || !strings.HasPrefix(admin, "127.0.0.1:") {
		t.Fatalf("CorputAdmin = %q, %v", admin, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "corput.yaml"))
	if cfg := parseConfig(t, string(b), nil); cfg.Tracing == nil || cfg.Tracing.SampleRatio != 0.01 {
		t.Errorf("traced config's tracing: %+v", cfg.Tracing)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/admin/origins":
			w.Write([]byte(`[{"name":"other","loops":[{"loop":0,"requests":9}]},
			{"name":"bench","loops":[{"loop":1,"requests":7,"share":0.7},{"loop":0,"requests":3,"share":0.3}]}]`))
		case "/metrics":
			w.Write([]byte("# TYPE corput_tracing_spans_dropped_total counter\ncorput_tracing_spans_dropped_total 42\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer adminClient.CloseIdleConnections()
	got, err := CorputLoopRequests(srv.Listener.Addr().String())
	if err != nil || !slices.Equal(got, []uint64{3, 7}) {
		t.Fatalf("CorputLoopRequests = %v, %v; want [3 7]", got, err)
	}
	if n, err := CorputSpansDropped(context.Background(), srv.Listener.Addr().String()); err != nil || n != 42 {
		t.Fatalf("CorputSpansDropped = %v, %v; want 42", n, err)
	}
}
