package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/testcert"
	"github.com/corput/corput/internal/version"
	"github.com/corput/corput/internal/waitfor"
	"github.com/corput/corput/internal/workload"
)

// The reload tests run a real gateway from a real file on loopback, with
// HTTPS downstream and real origins counting their connections; a reload
// is what an operator sends: the file rewritten, then POST /admin/reload.

// reloadRig is a gateway serving three origins from a config file the test
// rewrites: a (8 servers, subsets of 4 over 4 loops: the endpoint changes),
// b (the cap changes) and c (untouched; added routes point at it).
type reloadRig struct {
	t          *testing.T
	dir, file  string
	a, b, c    []*testorigin.Server
	aCount     int      // a's endpoints in the file: the first aCount of a
	bMax       int      // b's pool.max_connections
	routes     []string // extra path prefixes routed to c
	cert, key  string   // the downstream certificate's files
	trustAll   *x509.CertPool
	g          *Gateway
	mixClasses []workload.Class
}

// poolWarm is a's and c's pool size: pre-warmed to their cap, so that load
// alone never opens a connection there and every new one is a reload's
// doing. b's pools pre-warm bWarm, more than its share of the load ever has
// in flight at one pool, so that a raised cap leaves the load nothing to
// grow into either.
// never opens a connection and every new one is a reload's doing.
const (
	poolWarm = 8
	bWarm    = 16
)

func newReloadRig(t *testing.T, certs []*testcert.Cert) *reloadRig {
	t.Helper()
	mix := workload.Default().Classes
	// No header timeout: most of a pool's eight pre-warmed connections
	// wait for their first request longer than net/http's 10 s, and an
	// origin closing them would be counted against the reloads.
	opt := testorigin.Options{Classes: mix, HeaderTimeout: -1}
	r := &reloadRig{t: t, dir: t.TempDir(), a: startOrigins(t, 8, opt), b: startOrigins(t, 3, opt), c: startOrigins(t, 3, opt),
		aCount: 7, bMax: bWarm, trustAll: x509.NewCertPool(), mixClasses: mix}
	r.file = filepath.Join(r.dir, "corput.yaml")
	for _, c := range certs {
		r.trustAll.AddCert(c.Leaf)
	}
	var err error
	if r.cert, r.key, err = certs[0].WriteFiles(r.dir, "gw"); err != nil {
		t.Fatal(err)
	}
	r.write()
	r.g = startFromFile(t, r.file)
	return r
}

func (r *reloadRig) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 4\ntls: {cert: %q, key: %q}\nroutes:\n", r.cert, r.key)
	for _, o := range []string{"a", "b", "c"} {
		fmt.Fprintf(&b, "  - {path_prefix: /%s/, origin: %s}\n", o, o)
	}
	for _, p := range r.routes {
		fmt.Fprintf(&b, "  - {path_prefix: %s, origin: c}\n", p)
	}
	b.WriteString("origins:\n")
	pool := func(max, warm int) string {
		return fmt.Sprintf("    pool: {max_connections: %d, prewarm: %d, acquire_timeout: 5s}\n", max, warm)
	}
	fmt.Fprintf(&b, "  - name: a\n    endpoints: %s\n    subset: {size: 4}\n%s", endpointList(serverAddrs(r.a[:r.aCount])...), pool(poolWarm, poolWarm))
	fmt.Fprintf(&b, "  - name: b\n    endpoints: %s\n%s", endpointList(serverAddrs(r.b)...), pool(r.bMax, bWarm))
	fmt.Fprintf(&b, "  - name: c\n    endpoints: %s\n%s", endpointList(serverAddrs(r.c)...), pool(poolWarm, poolWarm))
	return b.String()
}

// write puts the file in place as an editor would: a new file renamed
// over the old one.
func (r *reloadRig) write() { writeFileAtomic(r.t, r.file, r.text()) }

// writeFileAtomic replaces a file as an editor's save, `mv` or a ConfigMap
// update does: a new file renamed over the old one.
func writeFileAtomic(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// postReload is POST /admin/reload: its status and answer.
func postReload(t testing.TB, g *Gateway) (int, ReloadResult) {
	t.Helper()
	resp, err := adminHTTP.Post("http://"+g.AdminAddr()+"/admin/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res ReloadResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatalf("POST /admin/reload: %d, body does not decode: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, res
}

// reload writes the file and has the gateway apply it.
func (r *reloadRig) reload() {
	r.t.Helper()
	r.write()
	if code, res := postReload(r.t, r.g); code != http.StatusOK {
		r.t.Fatalf("reload refused (%d): %v", code, res.Errors)
	}
}

func accepted(srvs []*testorigin.Server) int64 {
	var n int64
	for _, s := range srvs {
		n += s.Stats().Connections.Accepted
	}
	return n
}

// createdIn is corput_upstream_connections_created_total of origin per
// loop.
func createdIn(t testing.TB, g *Gateway, origin string) []float64 {
	t.Helper()
	fams := scrapeFamilies(t, g)
	out := make([]float64, g.Loops())
	for l := range out {
		out[l] = fams.sum("corput_upstream_connections_created_total", "origin", origin, "loop", strconv.Itoa(l))
	}
	return out
}

// startMixLoad is 40 keep-alive HTTPS clients sending the 70/30 mix to
// the origins a, b and c in turn, as fast as they are answered.
func startMixLoad(t *testing.T, r *reloadRig, workers int) *keepAliveLoad {
	mix := workload.Mix{Classes: r.mixClasses}
	srcs := make([]*rng.Source, workers)
	for w := range srcs {
		srcs[w] = rng.New(uint64(w) + 1)
	}
	return startKeepAliveLoad(t, workers, 0, &tls.Config{RootCAs: r.trustAll}, func(w, i int) string {
		return fmt.Sprintf("https://%s/%s/%s", r.g.Addr(), []string{"a", "b", "c"}[(w+i)%3], mix.Pick(srcs[w].Float64()).Name)
	})
}

// phase is what the origins and the load saw over one phase.
type phase struct {
	a, b, c    int64 // new connections at each origin
	ok, failed int64
	seconds    float64
}

func (p phase) rate() float64 { return float64(p.ok+p.failed) / p.seconds }

func measure(r *reloadRig, l *keepAliveLoad, during func()) phase {
	a0, b0, c0, ok0, f0, t0 := accepted(r.a), accepted(r.b), accepted(r.c), l.ok.Load(), l.failed.Load(), time.Now()
	during()
	return phase{a: accepted(r.a) - a0, b: accepted(r.b) - b0, c: accepted(r.c) - c0,
		ok: l.ok.Load() - ok0, failed: l.failed.Load() - f0, seconds: time.Since(t0).Seconds()}
}

// TestReloadsUnderLoadKeepConnections is docs/gateway.md's reload promise
// measured at the origins: 20 reloads under a keep-alive HTTPS load of the
// 70/30 mix take turns at adding a route, changing an origin's endpoints,
// raising then lowering a cap and rotating the downstream certificate, and
//   - no request fails;
//   - the origin no reload touched opens no more connections than in a
//     control phase of the same load without reloads;
//   - an endpoint change opens connections only in the loops the subset
//     diff names, poolWarm for each endpoint a loop gained;
//   - a cap change opens none.
func TestReloadsUnderLoadKeepConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20-reload run under load")
	}
	var certs []*testcert.Cert
	for i := range 5 {
		c, err := testcert.SelfSigned(fmt.Sprintf("corput gateway, rotation %d", i))
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	r := newReloadRig(t, certs)
	load := startMixLoad(t, r, 40)
	waitfor.Until(t, "the load to start", func() bool { return load.ok.Load() > 200 })

	control := measure(r, load, func() { time.Sleep(4 * time.Second) })
	nextCert := 1
	var bChanges []int64
	reloads := measure(r, load, func() {
		for turn := range 20 {
			switch turn % 5 {
			case 0: // add a route
				prefix := fmt.Sprintf("/r%d/", turn)
				r.routes = append(r.routes, prefix)
				c0 := accepted(r.c)
				r.reload()
				resp, _ := get(t, rotationClient(t, r.trustAll), "https://"+r.g.Addr()+prefix+"light")
				if resp.StatusCode != 200 || resp.Header.Get(testorigin.IDHeader) == "" {
					t.Fatalf("reload %d: the added route %s answers %d", turn, prefix, resp.StatusCode)
				}
				if d := accepted(r.c) - c0; d != 0 {
					t.Errorf("reload %d (a route): origin c accepted %d new connections", turn, d)
				}
			case 1: // change a's endpoints: add the 8th, or take it away again
				old := r.g.st().origins["a"].Snapshot()
				before := createdIn(t, r.g, "a")
				if r.aCount == 7 {
					r.aCount = 8
				} else {
					r.aCount = 7
				}
				r.reload()
				cur := r.g.st().origins["a"].Snapshot()
				if cur.Len() != r.aCount {
					t.Fatalf("reload %d: a has %d endpoints, want %d", turn, cur.Len(), r.aCount)
				}
				want := make([]float64, len(before))
				changes := subset.Diff(old, cur, 0)
				for _, c := range changes {
					want[c.Loop] = float64(poolWarm * len(c.Added))
				}
				var got []float64
				ok := eventually(10*time.Second, func() bool {
					got = diffs(before, createdIn(t, r.g, "a"))
					return slices.Equal(got, want)
				})
				if !ok {
					t.Errorf("reload %d (%d endpoints): connections created per loop %v, want %v (subset.Diff %+v)", turn, r.aCount, got, want, changes)
				}
			case 2, 3: // raise b's cap, then lower it back
				if r.bMax == bWarm {
					r.bMax = 2 * bWarm
				} else {
					r.bMax = bWarm
				}
				b0 := accepted(r.b)
				r.reload()
				bChanges = append(bChanges, accepted(r.b)-b0)
			case 4: // rotate the downstream certificate under the same paths
				if _, _, err := certs[nextCert].WriteFiles(r.dir, "gw"); err != nil {
					t.Fatal(err)
				}
				r.reload()
				only := x509.NewCertPool()
				only.AddCert(certs[nextCert].Leaf)
				resp, _ := get(t, rotationClient(t, only), "https://"+r.g.Addr()+"/c/light")
				if resp.StatusCode != 200 {
					t.Fatalf("reload %d: a client trusting only the new certificate: %d", turn, resp.StatusCode)
				}
				nextCert++
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(time.Second) // the last requests of the last turn's load
	})
	load.halt()
	t.Logf("control (no reloads, %.1fs): %.0f req/s, %d failed; new connections at the origins: a %d, b %d, c %d",
		control.seconds, control.rate(), control.failed, control.a, control.b, control.c)
	t.Logf("20 reloads (%.1fs): %.0f req/s, %d failed; new connections at the origins: a %d, b %d, c %d; b during each cap change %v",
		reloads.seconds, reloads.rate(), reloads.failed, reloads.a, reloads.b, reloads.c, bChanges)
	load.check(t, "under 20 reloads")
	fams := scrapeFamilies(t, r.g)
	for _, o := range []string{"a", "b", "c"} {
		var closed []string
		for _, reason := range []string{"idle", "lifetime", "error", "keepalive", "remote", "eviction", "shutdown"} {
			if n := fams.sum("corput_upstream_connections_closed_total", "origin", o, "reason", reason); n > 0 {
				closed = append(closed, fmt.Sprintf("%s %v", reason, n))
			}
		}
		t.Logf("origin %s: connections closed by the gateway: %v", o, closed)
		if o != "a" && len(closed) > 0 {
			t.Errorf("origin %s, whose endpoints no reload changed, lost connections: %v", o, closed)
		}
	}
	if reloads.c > control.c {
		t.Errorf("origin c, which no reload touched, accepted %d new connections during the reloads, %d in the control phase", reloads.c, control.c)
	}
	if reloads.b != 0 {
		t.Errorf("origin b accepted %d new connections over 8 cap changes, want 0", reloads.b)
	}
	if got := scrapeFamilies(t, r.g).sum("corput_config_reloads_total", "result", "ok"); got != 20 {
		t.Errorf("corput_config_reloads_total{result=ok} = %v, want 20", got)
	}
}

// eventually polls cond every 20 ms for up to d and reports whether it
// held.
func eventually(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// rotationClient is a new HTTPS client (a new connection, a new handshake)
// that trusts roots only.
func rotationClient(t testing.TB, roots *x509.CertPool) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// getConfig is GET /admin/config.
func getConfig(t testing.TB, g *Gateway) ConfigView {
	t.Helper()
	return configOf(t, g.AdminAddr())
}

// configOf is GET /admin/config of the admin address.
func configOf(t testing.TB, admin string) ConfigView {
	t.Helper()
	resp, err := adminHTTP.Get("http://" + admin + "/admin/config")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v ConfigView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestABadReloadKeepsTheRunningConfig: a key typo, a value out of range
// and a change that needs a restart are each refused whole — 400 with the
// diagnostics (file:line: key), the error in GET /admin/config and in
// corput_config_reloads_total{result="rejected"} — while the running
// configuration keeps serving, its hash unchanged. A good file then
// applies.
func TestABadReloadKeepsTheRunningConfig(t *testing.T) {
	cert, err := testcert.SelfSigned("corput gateway")
	if err != nil {
		t.Fatal(err)
	}
	r := newReloadRig(t, []*testcert.Cert{cert})
	c := rotationClient(t, r.trustAll)
	before := getConfig(t, r.g)
	if before.Hash == "" || before.File != r.file || before.LastRejected != nil {
		t.Fatalf("GET /admin/config before any reload: %+v", before)
	}
	if before.Version != version.Get() || before.Version.GoVersion == "" {
		t.Fatalf("GET /admin/config's version = %+v, want the build's %+v", before.Version, version.Get())
	}
	good := r.text()
	for _, bad := range []struct{ name, text, want string }{
		{"a key typo", strings.Replace(good, "max_connections", "max_conections", 1), `origins[0].pool.max_conections`},
		{"a value out of range", strings.Replace(good, "acquire_timeout: 5s", "acquire_timeout: -1s", 1), "acquire_timeout"},
		{"loops changed", strings.Replace(good, "loops: 4", "loops: 2", 1), "restart"},
		{"a route to nowhere", strings.Replace(good, "origin: c}", "origin: nope}", 1), "nope"},
	} {
		writeFileAtomic(t, r.file, bad.text)
		code, res := postReload(t, r.g)
		if code != http.StatusBadRequest || res.Result != "rejected" || len(res.Errors) == 0 || !strings.Contains(strings.Join(res.Errors, "\n"), bad.want) {
			t.Errorf("%s: POST /admin/reload = %d %+v, want 400 naming %q", bad.name, code, res, bad.want)
		}
		if resp, _ := get(t, c, "https://"+r.g.Addr()+"/b/light"); resp.StatusCode != 200 {
			t.Errorf("%s: the running configuration stopped serving: %d", bad.name, resp.StatusCode)
		}
		v := getConfig(t, r.g)
		if v.Hash != before.Hash || v.LastRejected == nil || !strings.Contains(strings.Join(v.LastRejected.Errors, "\n"), bad.want) {
			t.Errorf("%s: GET /admin/config = hash %s (was %s), last rejected %+v", bad.name, v.Hash, before.Hash, v.LastRejected)
		}
	}
	if strings.Contains(strings.Join(getConfig(t, r.g).LastRejected.Errors, "\n"), "corput.yaml:") == false {
		t.Errorf("the diagnostics name no file:line")
	}
	fams := scrapeFamilies(t, r.g)
	if got := fams.sum("corput_config_reloads_total", "result", "rejected"); got != 4 {
		t.Errorf("rejected reloads counted %v, want 4", got)
	}
	r.routes = append(r.routes, "/fixed/")
	r.reload()
	if v := getConfig(t, r.g); v.Hash == before.Hash {
		t.Errorf("an applied reload left the hash as it was")
	}
	if resp, _ := get(t, c, "https://"+r.g.Addr()+"/fixed/light"); resp.StatusCode != 200 {
		t.Errorf("the good reload's route: %d", resp.StatusCode)
	}
}

// TestCertificateRotation: the downstream certificate rotated under the
// same paths. After the reload a client that trusts only the new
// certificate connects, one that trusts only the old cannot, and a
// connection opened before carries on; a half-rotated pair (the new
// certificate with the old key) is refused and the pair in force keeps
// serving.
func TestCertificateRotation(t *testing.T) {
	var certs []*testcert.Cert
	for i := range 3 {
		c, err := testcert.SelfSigned(fmt.Sprintf("corput gateway %d", i))
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	r := newReloadRig(t, certs[:1])
	pool := func(c *testcert.Cert) *x509.CertPool {
		p := x509.NewCertPool()
		p.AddCert(c.Leaf)
		return p
	}
	url := "https://" + r.g.Addr() + "/c/light"
	old := rotationClient(t, pool(certs[0]))
	var reused []bool
	trace := func() *http.Request {
		req, _ := http.NewRequest("GET", url, nil)
		return req.WithContext(withConnTrace(req.Context(), func(r bool) { reused = append(reused, r) }))
	}
	do := func(c *http.Client, req *http.Request) (int, error) {
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := do(old, trace()); err != nil || code != 200 {
		t.Fatalf("before the rotation: %d %v", code, err)
	}

	if _, _, err := certs[1].WriteFiles(r.dir, "gw"); err != nil {
		t.Fatal(err)
	}
	if code, res := postReload(t, r.g); code != 200 {
		t.Fatalf("the rotation's reload: %d %v", code, res.Errors)
	}
	if code, err := do(rotationClient(t, pool(certs[1])), trace()); err != nil || code != 200 {
		t.Errorf("a client trusting only the new certificate: %d %v", code, err)
	}
	if _, err := do(rotationClient(t, pool(certs[0])), trace()); err == nil {
		t.Errorf("a new connection trusting only the old certificate was served: the old certificate is still presented")
	}
	if code, err := do(old, trace()); err != nil || code != 200 || !reused[len(reused)-1] {
		t.Errorf("the connection opened before the rotation: %d %v, reused %v", code, err, reused)
	}

	// Half rotated: the next certificate is written, its key is not yet.
	writeFileAtomic(t, r.cert, string(certs[2].CertPEM))
	code, res := postReload(t, r.g)
	if code != http.StatusBadRequest || !strings.Contains(strings.Join(res.Errors, "\n"), "tls.cert: ") {
		t.Errorf("a half-rotated pair: %d %+v, want 400 naming tls.cert", code, res)
	}
	if code, err := do(rotationClient(t, pool(certs[1])), trace()); err != nil || code != 200 {
		t.Errorf("after the refused pair, the pair in force: %d %v", code, err)
	}
}

// TestOriginCAIsReadAgain: an origin's tls.ca rotated under the same path
// (a bundle with the new CA) and an endpoint presenting a certificate of
// the new CA added in the same reload: its connections verify, which they
// could only do with the file read again.
func TestOriginCAIsReadAgain(t *testing.T) {
	dir := t.TempDir()
	var cas []*testcert.Cert
	var origins []*testorigin.Server
	for i := range 2 {
		ca, err := testcert.NewCA(fmt.Sprintf("origin CA %d", i))
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := ca.Issue("127.0.0.1", x509.ExtKeyUsageServerAuth)
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile, err := leaf.WriteFiles(dir, fmt.Sprintf("origin%d", i))
		if err != nil {
			t.Fatal(err)
		}
		cas = append(cas, ca)
		origins = append(origins, startOrigins(t, 1, testorigin.Options{Proto: testorigin.TLS, CertFile: certFile, KeyFile: keyFile, Classes: fastClass})...)
	}
	caFile := filepath.Join(dir, "ca.pem")
	file := filepath.Join(dir, "corput.yaml")
	text := func(n int) string {
		return fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 1\nroutes: [{path_prefix: /, origin: app}]\norigins:\n  - name: app\n    protocol: h1\n    tls: {ca: %q}\n    balancer: {policy: round_robin}\n    endpoints: %s\n",
			caFile, endpointList(serverAddrs(origins[:n])...))
	}
	writeFileAtomic(t, caFile, string(cas[0].CertPEM))
	writeFileAtomic(t, file, text(1))
	g := startFromFile(t, file)
	writeFileAtomic(t, caFile, string(cas[0].CertPEM)+string(cas[1].CertPEM))
	writeFileAtomic(t, file, text(2))
	if code, res := postReload(t, g); code != 200 {
		t.Fatalf("reload: %d %v", code, res.Errors)
	}
	c, done := client()
	defer done()
	for range 300 { // the newcomer is slow-starting: a tenth of its share at first
		getOK(t, c, g, 1)
	}
	if n := origins[1].Stats().Total().OK; n == 0 {
		t.Errorf("the endpoint of the new CA served nothing: its certificate did not verify against the reloaded tls.ca")
	}
}

// withConnTrace has got hear, for each request, whether its connection
// was reused.
func withConnTrace(ctx context.Context, got func(reused bool)) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { got(i.Reused) }})
}

// fileGateway starts a gateway from the config file text (ENDPOINTS
// replaced by origins' addresses), reloadable through Options.Load.
func fileGateway(t *testing.T, text string, origins []*testorigin.Server) (*Gateway, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "corput.yaml")
	writeFileAtomic(t, file, withEndpoints(text, serverAddrs(origins)...))
	return startFromFile(t, file), file
}

// startFromFile starts a ready gateway from a config file, which a reload
// reads again (Options.Load), as corput serve does; it is closed when the
// test ends.
func startFromFile(t *testing.T, file string) *Gateway {
	t.Helper()
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Load: func() (*config.Config, error) { return config.Load(file) }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g)
	return g
}

// TestReloadMovesTheListener: a new listen address serves as soon as the
// reload answers, the old one refuses new connections, and a keep-alive
// connection opened on the old one carries on.
func TestReloadMovesTheListener(t *testing.T) {
	origins := startOrigins(t, 1, testorigin.Options{Classes: fastClass})
	text := "listen: LISTEN\nadmin: 127.0.0.1:0\nloops: 1\nroutes: [{path_prefix: /, origin: app}]\norigins:\n  - name: app\n    endpoints: ENDPOINTS\n"
	g, file := fileGateway(t, strings.Replace(text, "LISTEN", "127.0.0.1:0", 1), origins)
	oldAddr := g.Addr()
	kept, done := client()
	defer done()
	if resp, _ := get(t, kept, "http://"+oldAddr+"/x"); resp.StatusCode != 200 {
		t.Fatalf("before: %d", resp.StatusCode)
	}
	writeFileAtomic(t, file, withEndpoints(strings.Replace(text, "LISTEN", "127.0.0.2:0", 1), serverAddrs(origins)...))
	if code, res := postReload(t, g); code != 200 {
		t.Fatalf("reload: %d %v", code, res.Errors)
	}
	newAddr := g.Addr()
	if !strings.HasPrefix(newAddr, "127.0.0.2:") {
		t.Fatalf("Addr after the move = %s", newAddr)
	}
	fresh, done2 := client()
	defer done2()
	if resp, _ := get(t, fresh, "http://"+newAddr+"/x"); resp.StatusCode != 200 {
		t.Errorf("the new address: %d", resp.StatusCode)
	}
	if resp, _ := get(t, kept, "http://"+oldAddr+"/x"); resp.StatusCode != 200 {
		t.Errorf("the connection opened on the old address: %d", resp.StatusCode)
	}
	other, done3 := client()
	defer done3()
	if resp, err := other.Get("http://" + oldAddr + "/x"); err == nil {
		resp.Body.Close()
		t.Errorf("a new connection to the old address was served")
	}
}

// TestARemovedOriginDrains: a reload that removes an origin and its route
// lets the request in flight there finish (200), answers the next with
// no_route, and the origin's connections close.
func TestARemovedOriginDrains(t *testing.T) {
	slow := []workload.Class{{Name: "slow", Percent: 100, Latency: 500 * time.Millisecond}}
	keep, gone := startOrigins(t, 1, testorigin.Options{Classes: fastClass}), startOrigins(t, 1, testorigin.Options{Classes: slow})
	text := func(withGone bool) string {
		s := "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 1\nroutes:\n  - {path_prefix: /keep/, origin: keep}\n"
		if withGone {
			s += "  - {path_prefix: /gone/, origin: gone}\n"
		}
		s += "origins:\n  - name: keep\n    endpoints: " + endpointList(serverAddrs(keep)...) + "\n"
		if withGone {
			s += "  - name: gone\n    endpoints: " + endpointList(serverAddrs(gone)...) + "\n"
		}
		return s
	}
	g, file := fileGateway(t, text(true), nil)
	inflight := make(chan int, 1)
	c, done := client()
	defer done()
	go func() {
		resp, err := c.Get("http://" + g.Addr() + "/gone/slow")
		if err != nil {
			inflight <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		inflight <- resp.StatusCode
	}()
	waitfor.Until(t, "the slow request to reach the origin", func() bool { return gone[0].Stats().Concurrency.Current > 0 })
	writeFileAtomic(t, file, text(false))
	if code, res := postReload(t, g); code != 200 {
		t.Fatalf("reload: %d %v", code, res.Errors)
	}
	c2, done2 := client()
	defer done2()
	if resp, _ := get(t, c2, "http://"+g.Addr()+"/gone/slow"); resp.StatusCode != 404 {
		t.Errorf("after the reload, the removed route answers %d, want 404", resp.StatusCode)
	}
	if code := <-inflight; code != 200 {
		t.Errorf("the request in flight when its origin was removed: %d, want 200", code)
	}
	waitfor.Until(t, "the removed origin's connections to close", func() bool { return gone[0].Stats().Connections.Open == 0 })
	if resp, _ := get(t, c2, "http://"+g.Addr()+"/keep/x"); resp.StatusCode != 200 {
		t.Errorf("the origin kept: %d", resp.StatusCode)
	}
}

// TestReloadFromH2ToH1KeepsServing: an origin reloaded from h2c to h1
// while the fast path serves it. The fast path relays HTTP/1.1 and HTTP/2
// connections alike, so the open h2 connections carry on (until
// max_lifetime, as after any dialer change) and serve every request after
// the reload: none is dropped and none of them is closed.
func TestReloadFromH2ToH1KeepsServing(t *testing.T) {
	origins := startOrigins(t, 1, testorigin.Options{Proto: testorigin.H2C, Classes: fastClass})
	text := func(proto string) string {
		return "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 2\nroutes: [{path_prefix: /, origin: app}]\norigins:\n  - name: app\n    protocol: " + proto +
			"\n    pool: {prewarm: 1}\n    endpoints: ENDPOINTS\n"
	}
	g, file := fileGateway(t, text("h2c"), origins)
	c, done := client()
	defer done()
	getOK(t, c, g, 20)
	h2 := origins[0].Stats().Connections.Accepted
	writeFileAtomic(t, file, withEndpoints(text("h1"), serverAddrs(origins)...))
	if code, res := postReload(t, g); code != 200 {
		t.Fatalf("reload: %d %v", code, res.Errors)
	}
	// A new client connection: its requests start on the fast path (one
	// that began on net/http stays with it).
	c2, done2 := client()
	defer done2()
	getOK(t, c2, g, 50)
	if s := origins[0].Stats().Connections; s.Open != s.Accepted || s.Accepted < h2 {
		t.Fatalf("after the reload the origin accepted %d connections and %d are open, want the %d h2 ones still open among them", s.Accepted, s.Open, h2)
	}
}

// TestReloadMovesTheFleetPosition: a new fleet.size, a new
// fleet.instance, then a resize the subset count does not feel, in the
// file re-subset the origin in place. After each
// reload every loop holds the subset a gateway started at that position
// holds; a pool of an endpoint a loop keeps is the same pool (its
// connections stay); the origins see exactly the pre-warmed connections of
// the (loop, endpoint) pairs gained, and the pools of the pairs lost close
// theirs. A position outside the fleet is refused, the running one kept.
func TestReloadMovesTheFleetPosition(t *testing.T) {
	origins := startOrigins(t, 16, testorigin.Options{Classes: fastClass, HeaderTimeout: -1})
	const prewarm = 2
	text := func(instance, size int) string {
		return withEndpoints(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 4\nfleet: {instance: %d, size: %d}\n"+
			"routes: [{path_prefix: /, origin: app}]\norigins:\n  - name: app\n    endpoints: ENDPOINTS\n"+
			"    subset: {size: 2}\n    pool: {max_connections: 4, prewarm: %d}\n", instance, size, prewarm), serverAddrs(origins)...)
	}
	file := filepath.Join(t.TempDir(), "corput.yaml")
	writeFileAtomic(t, file, text(0, 1))
	g := startFromFile(t, file)
	c, done := client()
	defer done()
	open := func() (n int64) {
		for _, s := range origins {
			n += s.Stats().Connections.Open
		}
		return n
	}
	// One gateway of 4 loops: 4 subsets of 4 endpoints.
	if n := poolCount(loopPools(g)); n != 16 {
		t.Fatalf("one gateway: its loops hold %d pools, want 16 (4 subsets of 4)", n)
	}
	if fams := scrapeFamilies(t, g); fams.sum("corput_fleet_size") != 1 {
		t.Errorf("at start /metrics says corput_fleet_size %v, want 1", fams.sum("corput_fleet_size"))
	}
	for _, step := range []struct {
		name           string
		instance, size int
		pairs          int
		gained, lost   int // (loop, endpoint) pools opened, and drained
	}{
		// Two gateways of 4 loops: 8 subsets of 2, each within one of the
		// 4 before: pools are only lost.
		{"size 1 → 2", 1, 2, 8, 0, 8},
		// The other gateway's subsets: every pair is new.
		{"instance 1 → 0", 0, 2, 8, 8, 8},
		// 4 loops × 4 gateways: 16 frontends for the same 8 subsets, which
		// 8 already covered: the common resize moves nothing.
		{"size 2 → 4", 0, 4, 8, 0, 0},
	} {
		// Every pre-warmed connection counted by the origins (their
		// accept loops may lag the gateway's dials) before the count.
		before := loopPools(g)
		waitfor.Until(t, "the origins to count the pre-warmed connections", func() bool { return open() == int64(poolCount(before)*prewarm) })
		accepted0 := accepted(origins)
		writeFileAtomic(t, file, text(step.instance, step.size))
		if code, res := postReload(t, g); code != http.StatusOK {
			t.Fatalf("%s: reload refused: %d %v", step.name, code, res.Errors)
		}
		want := config.Fleet{Instance: step.instance, Size: step.size}
		if fl := g.st().fleet(); fl != want {
			t.Fatalf("%s: the fleet position is %+v, want %+v", step.name, fl, want)
		}
		if v := g.st().origins["app"].Subsets(); v.Gateway != want.Instance || v.Fleet.Gateways != want.Size {
			t.Errorf("%s: /admin/subsets says gateway %d of %d", step.name, v.Gateway, v.Fleet.Gateways)
		}
		if fams := scrapeFamilies(t, g); fams.sum("corput_fleet_instance") != float64(want.Instance) || fams.sum("corput_fleet_size") != float64(want.Size) {
			t.Errorf("%s: /metrics says corput_fleet_instance %v, corput_fleet_size %v", step.name, fams.sum("corput_fleet_instance"), fams.sum("corput_fleet_size"))
		}
		waitReady(t, g)
		after := loopPools(g)
		gained, lost := 0, 0
		for l := range after {
			for addr, p := range after[l] {
				if q, ok := before[l][addr]; !ok {
					gained++
				} else if q != p {
					t.Errorf("%s: loop %d kept %s but its pool was replaced", step.name, l, addr)
				}
			}
			for addr := range before[l] {
				if _, ok := after[l][addr]; !ok {
					lost++
				}
			}
		}
		if poolCount(after) != step.pairs || gained != step.gained || lost != step.lost {
			t.Fatalf("%s: the loops hold %d pools, %d gained and %d lost; want %d, %d and %d",
				step.name, poolCount(after), gained, lost, step.pairs, step.gained, step.lost)
		}
		waitfor.Until(t, "the lost pools' connections to close and the gained ones' to be counted", func() bool { return open() == int64(poolCount(after)*prewarm) })
		if got, want := accepted(origins)-accepted0, int64(gained*prewarm); got != want {
			t.Errorf("%s: the reload opened %d connections, want %d (%d pairs gained × %d pre-warmed)", step.name, got, want, gained, prewarm)
		}
		// A gateway started at this position holds the same subsets.
		fresh := startFromFile(t, file)
		for l, ps := range loopPools(fresh) {
			if got, want := slices.Sorted(maps.Keys(after[l])), slices.Sorted(maps.Keys(ps)); !slices.Equal(got, want) {
				t.Errorf("%s: loop %d holds %v, a gateway started there %v", step.name, l, got, want)
			}
		}
		fresh.Close()
		waitfor.Until(t, "the fresh gateway's connections to close", func() bool { return open() == int64(poolCount(after)*prewarm) })
		getOK(t, c, g, 10)
	}

	writeFileAtomic(t, file, text(4, 4))
	if code, res := postReload(t, g); code != http.StatusBadRequest || !strings.Contains(strings.Join(res.Errors, "\n"), "fleet.instance") {
		t.Errorf("reload to instance 4 of 4: %d %v, want 400 naming fleet.instance", code, res.Errors)
	}
	if fl := g.st().fleet(); fl != (config.Fleet{Instance: 0, Size: 4}) {
		t.Errorf("after a refused reload the fleet position is %+v, want instance 0 of 4 kept", fl)
	}
	if fams := scrapeFamilies(t, g); fams.sum("corput_fleet_instance") != 0 || fams.sum("corput_fleet_size") != 4 {
		t.Errorf("after a refused reload /metrics says corput_fleet_instance %v, corput_fleet_size %v; want 0 and 4", fams.sum("corput_fleet_instance"), fams.sum("corput_fleet_size"))
	}
	getOK(t, c, g, 5)
}

// loopPools is each loop's pools of origin app.
func loopPools(g *Gateway) []map[string]*pool.Pool {
	o := g.st().origins["app"]
	out := make([]map[string]*pool.Pool, g.Loops())
	for l := range out {
		out[l] = o.Loop(l).Pools()
	}
	return out
}

// poolCount is how many (loop, endpoint) pools ps holds.
func poolCount(ps []map[string]*pool.Pool) (n int) {
	for _, m := range ps {
		n += len(m)
	}
	return n
}
