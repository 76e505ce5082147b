package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/progress"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/testbin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wrkOutput = `Running 10s test @ http://127.0.0.1:8080/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.10ms    2.01ms  45.20ms   90.12%
    Req/Sec    10.52k     1.01k   12.80k    70.00%
  Latency Distribution
     50%    2.71ms
     75%    3.50ms
     90%    4.90ms
     99%    1.02s
  209420 requests in 10.00s, 25.36MB read
  Socket errors: connect 0, read 3, write 0, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:  20941.37
Transfer/sec:      2.54MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{RPS: 20941.37, P50MS: 2.71, P99MS: 1020, Errors: 12, Requests: 209420}
	if r != want {
		t.Fatalf("parseWrk = %+v, want %+v", r, want)
	}
	if _, err := parseWrk("Requests/sec: 5\n"); err == nil {
		t.Fatal("output without --latency percentiles was accepted")
	}
}

func TestParseWrkDuration(t *testing.T) {
	for in, want := range map[string]float64{"812.00us": 0.812, "1.53ms": 1.53, "2.01s": 2010, "1.00m": 60000} {
		got, err := parseWrkDuration(in)
		if err != nil || math.Abs(got-want) > 1e-9*want {
			t.Errorf("parseWrkDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseWrkDuration("3h"); err == nil {
		t.Error("unknown unit accepted")
	}
}

// TestCorputConfigIsValid: the generated gateway configs pass corput's
// own validation, static and with a discovery file, in cleartext and with
// raw_tls's certificate (and otherwise the same settings).
func TestCorputConfigIsValid(t *testing.T) {
	members := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	tc, err := writeTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, cert := range []*tlsFiles{nil, tc} {
		for _, joining := range []bool{false, true} {
			text := corputConfig("127.0.0.1:8080", "127.0.0.1:9901", "", "", 0, members, joining, cert)
			cfg, err := config.Parse([]byte(text), "bench.yaml")
			if err != nil {
				t.Fatalf("joining=%v tls=%v: %v\n%s", joining, cert != nil, err, text)
			}
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
			case cert != nil && (cfg.TLS == nil || cfg.TLS.Cert != tc.cert || cfg.TLS.Key != tc.key || cfg.TLS.ClientCA != ""):
				t.Errorf("tls = %+v; want cert %s and key %s, no client_ca", cfg.TLS, tc.cert, tc.key)
			}
		}
	}
}

// TestTLSFiles: the run's certificate is a P-256 ECDSA one for 127.0.0.1,
// and HAProxy's file holds the same certificate with its key.
func TestTLSFiles(t *testing.T) {
	tc, err := writeTLSFiles(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(tc.cert, tc.key)
	if err != nil {
		t.Fatal(err)
	}
	both, err := tls.LoadX509KeyPair(tc.both, tc.both)
	if err != nil {
		t.Fatalf("%s (certificate and key in one file): %v", tc.both, err)
	}
	if !bytes.Equal(pair.Certificate[0], both.Certificate[0]) {
		t.Error("HAProxy's file holds another certificate")
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Fatalf("key %T; want ECDSA P-256", pair.PrivateKey)
	}
	if err := pair.Leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
}

func TestParseSClient(t *testing.T) {
	const out = `depth=0 CN = corput bench
verify error:num=18:self-signed certificate
CONNECTION ESTABLISHED
Protocol version: TLSv1.3
Ciphersuite: TLS_AES_128_GCM_SHA256
Peer certificate: CN = corput bench
Hash used: SHA256
Signature type: ECDSA
Verification error: self-signed certificate
Server Temp Key: X25519, 253 bits
DONE
`
	got, err := parseSClient(out)
	if err != nil {
		t.Fatal(err)
	}
	want := TLSInfo{Protocol: "TLSv1.3", Cipher: "TLS_AES_128_GCM_SHA256", Group: "X25519, 253 bits"}
	if got != want || !got.expected() || got.String() != "TLSv1.3 TLS_AES_128_GCM_SHA256 (X25519)" {
		t.Fatalf("parseSClient = %+v (%s, expected %v); want %+v", got, got, got.expected(), want)
	}
	if aes256 := (TLSInfo{Protocol: "TLSv1.3", Cipher: "TLS_AES_256_GCM_SHA384"}); aes256.expected() {
		t.Error("TLS_AES_256_GCM_SHA384 taken for the scenario's suite")
	}
	for in, want := range map[string]string{
		"OpenSSL 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.18 1 Oct 2025)\n": "OpenSSL 3.0.18 1 Oct 2025",
		"OpenSSL 3.0.19 27 Jan 2026\n":                                      "OpenSSL 3.0.19 27 Jan 2026",
	} {
		if got := opensslLibrary(in); got != want {
			t.Errorf("opensslLibrary(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := parseSClient("40378B3AAE7F0000:error:0A000438:SSL routines:ssl3_read_bytes:tlsv1 alert internal error\n"); err == nil {
		t.Error("a failed handshake was read as a negotiation")
	}
}

// TestPeerConfigsAreValid asks each installed peer to check its generated
// config, cleartext and raw_tls's (skipped for a peer that is not
// installed); the TLS configs name the certificate, TLS 1.3 and the
// suite.
func TestPeerConfigsAreValid(t *testing.T) {
	members := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	tc, err := writeTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wantTLS := map[string][]string{
		nameNginx:   {"listen 127.0.0.1:18080 ssl;", "ssl_certificate " + tc.cert + ";", "ssl_certificate_key " + tc.key + ";", "ssl_protocols TLSv1.3;", "ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;"},
		nameHAProxy: {"bind 127.0.0.1:18080 ssl crt " + tc.both + " ssl-min-ver TLSv1.3 ciphersuites TLS_AES_128_GCM_SHA256\n"},
		nameCaddy:   {"https://127.0.0.1:18080 {", "tls " + tc.cert + " " + tc.key + " {", "protocols tls1.3\n", "ciphers TLS_AES_128_GCM_SHA256", "protocols h1 h2\n"},
	}
	for _, p := range []proxy{nginxProxy{}, haproxyProxy{}, nginxProxy{fwd: true}, haproxyProxy{fwd: true}, caddyProxy{}} {
		for _, cert := range []*tlsFiles{nil, tc} {
			name := p.name()
			if cert != nil {
				name += "/tls"
			}
			t.Run(name, func(t *testing.T) {
				testPeerConfig(t, p, members, cert, wantTLS[p.name()])
			})
		}
	}
}

func testPeerConfig(t *testing.T, p proxy, members []string, tc *tlsFiles, wantTLS []string) {
	if _, err := exec.LookPath(p.bin()); err != nil {
		t.Skipf("%s not installed", p.bin())
	}
	dir := t.TempDir()
	argv, err := p.files(dir, "127.0.0.1:18080", members, "127.0.0.1:9005", tc)
	if err != nil {
		t.Fatal(err)
	}
	var check []string
	switch p.name() {
	case nameNginx:
		check = append(argv, "-t")
	case nameHAProxy:
		check = []string{"haproxy", "-c", "-f", argv[len(argv)-1]}
	case nameCaddy:
		check = []string{"caddy", "validate", "--config", argv[3], "--adapter", "caddyfile"}
	}
	cmd := exec.Command(check[0], check[1:]...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(check, " "), err, out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, map[string]string{nameNginx: "nginx.conf", nameHAProxy: "haproxy.cfg", nameCaddy: "Caddyfile"}[p.name()]))
	for _, m := range append(members, "127.0.0.1:9005") {
		if !strings.Contains(string(b), m) {
			t.Errorf("config lacks member %s", m)
		}
	}
	for _, w := range wantTLS {
		if has := strings.Contains(string(b), w); has != (tc != nil) {
			t.Errorf("tls=%v: config has %q: %v\n%s", tc != nil, w, has, b)
		}
	}
}

// TestStopEndsTheWholeGroup: a child's own children die with it.
func TestStopEndsTheWholeGroup(t *testing.T) {
	ps := newProcs(t.TempDir())
	c, err := ps.start("sh", nil, "sh", "-c", "sleep 60 & echo started; sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	pgid := c.cmd.Process.Pid
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.waitLog(ctx, originListening); err == nil {
		t.Fatal("waitLog matched a line that is not there")
	}
	if m, err := c.waitLog(context.Background(), regexp.MustCompile(`^(started)$`)); err != nil || m[1] != "started" {
		t.Fatalf("waitLog = %v, %v", m, err)
	}
	if n := liveInGroup(t, pgid); n != 3 {
		t.Fatalf("%d live processes in the group before stop, want 3 (sh and two sleeps)", n)
	}
	ps.stopAll()
	if n := liveInGroup(t, pgid); n != 0 {
		t.Fatalf("%d processes of group %d still running after stopAll", n, pgid)
	}
	if len(ps.live) != 0 {
		t.Fatalf("%d children still tracked", len(ps.live))
	}
}

// liveInGroup counts the processes of group pgid that are not zombies
// (an orphan's zombie waits for a reaper this test does not control).
func liveInGroup(t *testing.T, pgid int) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		t.Skip("no /proc")
	}
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so read
		// after its closing parenthesis.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

func TestJoinResultCountsClassRequestsOnly(t *testing.T) {
	st := origin.Stats{
		Requests: map[string]origin.Counts{"light": {OK: 70}, "heavy": {OK: 25, Canceled: 5}, origin.RawClass: {OK: 30}},
		Queued:   origin.Level{Max: 9}, // over its whole life: not the early peak
		Seconds: []origin.Second{
			{T: 0, Requests: 4, MaxConcurrency: 2, MaxInFlight: 2}, {T: 1, Requests: 9, MaxConcurrency: 6, MaxQueued: 3, MaxInFlight: 9},
			{T: 30, MaxConcurrency: 8, MaxQueued: 9, MaxInFlight: 17},
			{T: 60, Requests: 20}, {T: 74, Requests: 10}, {T: 75, Requests: 50},
		},
	}
	j := joinResult(st, joinSpans{window: 75, early: 30, late: 60, others: 900, othersEarly: 117, othersLate: 120})
	want := JoinResult{WindowS: 75, Requests: 100, Share: 0.1,
		EarlyS: 30, EarlyRequests: 13, EarlyShare: 0.1, MaxConcurrency: 6, MaxQueued: 3, MaxInFlight: 9, FirstSecond: 4,
		LateFromS: 60, LateShare: 0.2, LateVsFair: 1}
	if *j != want {
		t.Fatalf("joinResult = %+v, want %+v", *j, want)
	}
	if j := joinResult(st, joinSpans{window: 30, early: 30, late: 60, others: 100}); j.LateShare != 0 || j.LateVsFair != 0 {
		t.Fatalf("a 30 s window has no late span: %+v", *j)
	}
}

func TestMedianAndGoals(t *testing.T) {
	rounds := []Result{{Proxy: nameCorput, RPS: 30}, {Proxy: nameCorput, RPS: 10}, {Proxy: nameCorput, RPS: 20}}
	m := median(rounds, func(r Result) float64 { return -r.RPS })
	if m.RPS != 20 || len(m.Rounds) != 3 {
		t.Fatalf("median = %v with %d rounds; want 20 with 3", m.RPS, len(m.Rounds))
	}
	// Two rounds: the worse one, whichever way "worse" points.
	if m := median(rounds[:2], func(r Result) float64 { return -r.RPS }); m.RPS != 10 {
		t.Errorf("median of two by throughput = %v, want the lower, 10", m.RPS)
	}
	two := []Result{{P99MS: 5}, {P99MS: 9}}
	if m := median(two, func(r Result) float64 { return r.P99MS }); m.P99MS != 9 {
		t.Errorf("median of two by p99 = %v, want the higher, 9", m.P99MS)
	}
	r := &Results{}
	r.scenario(scRaw, "").Results = []Result{{Proxy: nameCorput, RPS: 21000}, {Proxy: nameNginx, RPS: 20000}}
	r.scenario(scSkewed, "").Results = []Result{{Proxy: nameCorput, P99MS: 200}, {Proxy: nameNginx, P99MS: 701}, {Proxy: nameCaddy, P99MS: 650}}
	r.scenario(scOverhead, "").Results = []Result{{Proxy: nameCorput, AddedP99MS: 1.7, P99MS: 2, RateRPS: 10000}}
	gs := r.goals()
	if len(gs) != 6 {
		t.Fatalf("%d goals, want 6: %+v", len(gs), gs)
	}
	if !gs[0].Met || gs[0].Value != 1.05 {
		t.Errorf("raw goal = %+v; want met at 1.05", gs[0])
	}
	if gs[1].Met || gs[1].Value != round3(200.0/650) {
		t.Errorf("skewed goal = %+v; want not met against the best peer (650 ms)", gs[1])
	}
	if gs[2].Met || gs[3].Met || gs[4].Met {
		t.Errorf("issue 19's skewed goals = %+v; want none met at p99 200 ms, no heavy figure, success 0", gs[2:5])
	}
	if gs[5].Met {
		t.Errorf("overhead goal = %+v; want not met at 1.7 ms", gs[5])
	}

	r.scenario(scSkewed, "").Results = []Result{{Proxy: nameCorput, P99MS: 149, HeavyP99MS: 170, SuccessRatio: 1}}
	r.scenario(scCold, "").Results = []Result{{Proxy: nameCorput, P99MS: 170,
		Join: &JoinResult{WindowS: 75, LateFromS: 60, MaxInFlight: 10, LateShare: 0.17, LateVsFair: 0.85}}}
	met := 0
	for _, g := range r.goals() {
		if strings.Contains(g.Name, "issue 19") {
			if !g.Met {
				t.Errorf("goal %+v not met", g)
			}
			met++
		}
	}
	if met != 6 {
		t.Errorf("%d of issue 19's goals, want 6", met)
	}
}

// TestJSONShape: peers.json keeps the shape.
func TestJSONShape(t *testing.T) {
	r := &Results{}
	r.scenario(scRaw, "raw").Results = []Result{{Proxy: nameCorput, RPS: 1, P99MS: 2, ProxyCPUUS: 12.5}, {Proxy: nameDirect, RPS: 3, P99MS: 1}}
	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "peers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Scenarios []struct {
			Name    string           `json:"name"`
			Results []map[string]any `json:"results"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	res := v.Scenarios[0].Results[0]
	if v.Scenarios[0].Name != "raw" || res["proxy"] != "corput" || res["rps"] != 1.0 || res["p99_ms"] != 2.0 || res["proxy_cpu_us_per_request"] != 12.5 {
		t.Fatalf("peers.json = %s", b)
	}
	if _, ok := v.Scenarios[0].Results[1]["proxy_cpu_us_per_request"]; ok {
		t.Errorf("the direct baseline has a proxy CPU figure: %s", b)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "peers.md"))
	if !strings.Contains(string(md), "| corput | 1 |") {
		t.Fatalf("peers.md lacks the corput row:\n%s", md)
	}
	if !strings.Contains(string(md), "| 12.5 |") || !strings.Contains(string(md), "proxy CPU µs/request") {
		t.Errorf("peers.md's raw table lacks the proxy's CPU per request:\n%s", md)
	}
}

// TestRawTLSShape: raw_tls has raw's fields under its own name, what each
// proxy negotiated, its note, and a table with raw's columns and the
// negotiated TLS (flagged when it is not the scenario's).
func TestRawTLSShape(t *testing.T) {
	r := &Results{}
	want := TLSInfo{Protocol: tlsVersion, Cipher: tlsSuite, Group: "X25519, 253 bits"}
	other := TLSInfo{Protocol: tlsVersion, Cipher: "TLS_AES_256_GCM_SHA384"}
	r.scenario(scRaw, "raw").Results = []Result{{Proxy: nameCorput, RPS: 30000, P99MS: 5}}
	s := r.scenario(scRawTLS, "raw over HTTPS")
	s.Note = rawTLSNote
	s.Results = []Result{
		{Proxy: nameCorput, RPS: 9000, P50MS: 3, P99MS: 12, TLS: &want,
			Rounds: []Result{{Proxy: nameCorput, RPS: 9000, P99MS: 12, TLS: &want}, {Proxy: nameCorput, RPS: 8000, P99MS: 13, TLS: &want}}},
		{Proxy: nameNginx, RPS: 18000, P50MS: 1.5, P99MS: 6, TLS: &other},
	}
	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "peers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Scenarios []struct {
			Name    string           `json:"name"`
			Note    string           `json:"note"`
			Results []map[string]any `json:"results"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Scenarios) != 2 || v.Scenarios[1].Name != "raw_tls" || !strings.Contains(v.Scenarios[1].Note, "crypto/tls") {
		t.Fatalf("peers.json = %s", b)
	}
	c := v.Scenarios[1].Results[0]
	tlsField, _ := c["tls"].(map[string]any)
	rounds, _ := c["rounds"].([]any)
	if c["proxy"] != "corput" || c["rps"] != 9000.0 || c["p50_ms"] != 3.0 || c["p99_ms"] != 12.0 || len(rounds) != 2 ||
		tlsField["protocol"] != "TLSv1.3" || tlsField["cipher"] != "TLS_AES_128_GCM_SHA256" {
		t.Fatalf("raw_tls corput result = %v", c)
	}
	mdHas(t, dir,
		"raw_tls: raw over HTTPS",
		"| proxy | req/s | p50 ms | p99 ms | errors | corput/peer req/s | corput/peer p99 | TLS negotiated |",
		"| corput | 9000 | 3.00 | 12.0 | 0 | — | — | TLSv1.3 TLS_AES_128_GCM_SHA256 (X25519) |",
		"| nginx | 18000 | 1.50 | 6.00 | 0 | 0.50× | 2.00× | TLSv1.3 TLS_AES_256_GCM_SHA384 (not TLSv1.3 TLS_AES_128_GCM_SHA256) |",
		"Go's crypto/tls",
	)
}

func TestOptions(t *testing.T) {
	if _, err := parseOptions([]string{"--scenarios", "raw,bogus"}, os.Stderr); err == nil || !strings.Contains(err.Error(), "--scenarios") {
		t.Errorf("unknown scenario: err = %v", err)
	}
	if o, err := parseOptions([]string{"--scenarios", "raw,raw_tls"}, os.Stderr); err != nil || !slices.Equal(o.scenarios, []string{scRaw, scRawTLS}) {
		t.Errorf("--scenarios raw,raw_tls: %v, %v", o.scenarios, err)
	}
	if _, err := proxyByName("envoy", corputProxy{}, true); err == nil || !strings.Contains(err.Error(), "--proxies") {
		t.Errorf("unknown proxy: err = %v", err)
	}
	if _, err := parseOptions([]string{"--origin-procs", "-1"}, os.Stderr); err == nil || !strings.Contains(err.Error(), "--origin-procs") {
		t.Errorf("negative origin processors: err = %v", err)
	}
	o, err := parseOptions(nil, os.Stderr)
	if err != nil || o.rawConns != 64 || o.rawDuration != 10*time.Second || o.skewDuration != 20*time.Second || o.rate != 300 || o.originProcs != 1 {
		t.Errorf("defaults = %+v, %v; want the issue's wrk -c64 -d10s and 300 req/s for 20 s, one processor per origin", o, err)
	}
	if want := []string{scRaw, scRawTLS, scSkewed, scCold, scOverhead}; !slices.Equal(o.scenarios, want) {
		t.Errorf("default scenarios %v, want %v (spread only when named)", o.scenarios, want)
	}
	if o.spreadOrigins*o.spreadListeners != 800 || o.spreadLoops != 16 || o.spreadConns != 256 || o.spreadFewConns != 4 ||
		o.spreadStreams != 100 || o.spreadH2Requests != 40000 || o.spreadDuration != 10*time.Second {
		t.Errorf("spread defaults = %+v; want 800 endpoints, 16 loops, wrk -c256 and -c4 for 10 s, h2load -c1 -m100 -n40000", o)
	}
	if o, err := parseOptions([]string{"--scenarios", "spread", "--corput-balancer", "{policy: p2c}"}, os.Stderr); err != nil || !slices.Equal(o.scenarios, []string{scSpread}) || o.balancer != "{policy: p2c}" {
		t.Errorf("--scenarios spread --corput-balancer: %v %q, %v", o.scenarios, o.balancer, err)
	}
	if usesStandardOrigins([]string{scSpread}) || !usesStandardOrigins([]string{scSpread, scRaw}) {
		t.Error("the four standard origins: started for spread alone, or not for raw")
	}
	for _, bad := range [][]string{{"--spread-listeners", "0"}, {"--spread-loops", "0"}, {"--spread-duration", "500ms"}, {"--spread-h2-requests", "-1"}} {
		if _, err := parseOptions(bad, os.Stderr); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: err = %v", bad, err)
		}
	}
	if v := firstVersion("nginx version: nginx/1.22.1\n"); v != "1.22.1" {
		t.Errorf("nginx version %q", v)
	}
	if v := firstVersion("HAProxy version 2.6.12-1+deb12u4 2026/10/17 - https://haproxy.org/\n"); v != "2.6.12-1+deb12u4" {
		t.Errorf("haproxy version %q", v)
	}
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
		for _, name := range []string{nameNginx, nameHAProxy, nameCaddy} {
			p, err := proxyByName(name, corputProxy{}, fwd)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("%s/fwd=%v", name, fwd), func(t *testing.T) {
				if _, err := exec.LookPath(p.bin()); err != nil {
					t.Skipf("%s not installed", p.bin())
				}
				dir := t.TempDir()
				ps := newProcs(dir)
				defer ps.stopAll()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, listen, err := startProxy(ctx, ps, p, filepath.Join(dir, name), members, "", nil)
				if err != nil {
					t.Fatal(err)
				}
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
				resp, err := c.Get("http://" + listen + "/probe")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				mu.Lock()
				defer mu.Unlock()
				want := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http", "X-Forwarded-Host": listen}
				if !fwd && name != nameCaddy { // Caddy forwards by default
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
}

// TestProxiesServeTLS runs corput and each installed peer with raw_tls's
// settings in front of a recording origin: each answers HTTPS/1.1 and
// forwards in cleartext with X-Forwarded-Proto https; the peers refuse a
// TLS 1.2 client (corput's tls block cannot: Go's default minimum, TLS
// 1.2, stays); and a handshake as wrk makes it (probeTLS, when openssl is
// installed) gets TLS 1.3 everywhere and TLS_AES_128_GCM_SHA256 from
// nginx and HAProxy, which are configured to it. The suite Go picks for
// corput and Caddy depends on the CPU (AES-GCM instructions), so it is
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
	tc, err := writeTLSFiles(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{nameCorput, nameNginx, nameHAProxy, nameCaddy} {
		t.Run(name, func(t *testing.T) {
			var p proxy
			if name == nameCorput {
				p = corputProxy{bin_: testbin.Corput(t)}
			} else {
				var err error
				if p, err = proxyByName(name, corputProxy{}, true); err != nil {
					t.Fatal(err)
				}
				if _, err := exec.LookPath(p.bin()); err != nil {
					t.Skipf("%s not installed", p.bin())
				}
			}
			dir := t.TempDir()
			ps := newProcs(dir)
			defer ps.stopAll()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, listen, err := startProxy(ctx, ps, p, filepath.Join(dir, name), members, "", tc)
			if err != nil {
				t.Fatal(err)
			}
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
			if _, err := get(tls.VersionTLS12); name != nameCorput && err == nil {
				t.Error("a TLS 1.2 client was served; want TLS 1.3 only")
			} else if name == nameCorput {
				t.Logf("corput and a TLS 1.2 client: %v (Go's default minimum; corput's tls block has no version setting)", err)
			}
			if _, err := exec.LookPath("openssl"); err != nil {
				t.Skip("openssl not installed: what a client like wrk negotiates is not checked")
			}
			info, err := probeTLS(ctx, listen)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s (%s)", name, info, info.Library)
			if info.Protocol != tlsVersion {
				t.Errorf("negotiated %s; want %s", info, tlsVersion)
			}
			if (name == nameNginx || name == nameHAProxy) && !info.expected() {
				t.Errorf("negotiated %s; want %s %s, as configured", info, tlsVersion, tlsSuite)
			}
			if name == nameNginx || name == nameHAProxy {
				// A client that offers only another TLS 1.3 suite is refused.
				cmd := exec.CommandContext(ctx, "openssl", "s_client", "-connect", listen, "-servername", "127.0.0.1", "-brief", "-ciphersuites", "TLS_AES_256_GCM_SHA384")
				cmd.Stdin = strings.NewReader("")
				out, _ := cmd.CombinedOutput()
				if got, err := parseSClient(string(out)); err == nil {
					t.Errorf("a client offering only TLS_AES_256_GCM_SHA384 negotiated %s; want a refusal", got)
				}
			}
		})
	}
}

// TestOpenLoopRawFollowsItsSchedule runs the overhead scenario's generator
// against a real server: it sends exactly the Poisson schedule's arrivals
// that fall inside the run, however the machine keeps up, and every one
// is answered and measured.
func TestOpenLoopRawFollowsItsSchedule(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	const rate, d, seed = 2000.0, 500 * time.Millisecond, 5
	pacer := loadgen.NewPoisson(rate, rng.New(seed))
	var want int64
	for {
		at, _ := pacer.Pace(0, uint64(want))
		if at >= d {
			break
		}
		want++
	}
	res, err := openLoopRaw(context.Background(), srv.URL+"/", rate, d, seed)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != want || res.Errors != 0 || served.Load() != want {
		t.Errorf("sent %d with %d errors, server saw %d; want %d sent and seen", res.Requests, res.Errors, served.Load(), want)
	}
	if !(res.P50MS > 0 && res.P99MS >= res.P50MS && res.MaxMS >= res.P99MS) || res.SuccessRatio != 1 {
		t.Errorf("latencies p50 %v p99 %v max %v ms, success %v", res.P50MS, res.P99MS, res.MaxMS, res.SuccessRatio)
	}
}

// TestOpenLoopRawCountsFailures has the server fail its first requests: each
// failure is counted once, its connection leaves the rotation, and the
// remaining connections answer the rest.
func TestOpenLoopRawCountsFailures(t *testing.T) {
	const failFirst = 5
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= failFirst {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	res, err := openLoopRaw(context.Background(), srv.URL+"/", 1000, 300*time.Millisecond, 9)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != failFirst || res.Requests != seen.Load() {
		t.Errorf("sent %d with %d errors, server saw %d; want %d errors and every request seen", res.Requests, res.Errors, seen.Load(), failFirst)
	}
}

// TestOriginProcessors starts an origin with one processor and checks the
// process's environment says so; with 0 the variable is left alone.
func TestOriginProcessors(t *testing.T) {
	dir := t.TempDir()
	// A stand-in for `corput origin`: it prints the listening line and
	// waits; what is checked is the environment it was started with.
	bin := filepath.Join(dir, "origin.sh")
	script := "#!/bin/sh\necho \"listening on http://127.0.0.1:1 GOMAXPROCS=[$GOMAXPROCS]\"\nexec sleep 60\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMAXPROCS", "")
	for _, tc := range []struct {
		procs int
		want  string
	}{{1, "GOMAXPROCS=[1]"}, {0, "GOMAXPROCS=[]"}} {
		ps := newProcs(dir)
		o, err := startOrigin(context.Background(), ps, bin, fmt.Sprint("p", tc.procs), "127.0.0.1:0", 1, tc.procs)
		if err != nil {
			ps.stopAll()
			t.Fatal(err)
		}
		text, _ := os.ReadFile(o.c.log)
		ps.stopAll()
		if !strings.Contains(string(text), tc.want) {
			t.Errorf("--origin-procs %d: the origin printed %q, want %s", tc.procs, text, tc.want)
		}
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
	cp := spreadVariant(corputProxy{balancer: "{policy: round_robin}"}, 16, true).(corputProxy)
	text := corputConfig("127.0.0.1:8080", "127.0.0.1:9901", cp.balancer, "", cp.loops, members, false, nil)
	cfg, err := config.Parse([]byte(text), "spread.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, text[:400])
	}
	if cfg.LoopCount() != 16 || len(cfg.Origins[0].Endpoints) != 800 || cfg.Origins[0].Balancer.Policy != "round_robin" || cfg.Origins[0].Subset.Size != 0 {
		t.Errorf("loops %d, %d endpoints, policy %q, subset size %d; want 16, 800, round_robin, 0 (automatic)",
			cfg.LoopCount(), len(cfg.Origins[0].Endpoints), cfg.Origins[0].Balancer.Policy, cfg.Origins[0].Subset.Size)
	}
	if !cp.h2c() {
		t.Error("corput's h2c variant is not probed over h2c")
	}
	wantH2C := map[string]string{nameNginx: "listen 127.0.0.1:18080 http2;", nameHAProxy: "bind 127.0.0.1:18080 proto h2\n", nameCaddy: "protocols h1 h2c\n"}
	for _, p := range []proxy{nginxProxy{fwd: true}, haproxyProxy{fwd: true}, caddyProxy{}} {
		for _, h2c := range []bool{false, true} {
			v := spreadVariant(p, 16, h2c)
			t.Run(fmt.Sprintf("%s/h2c=%v", p.name(), h2c), func(t *testing.T) {
				if v.h2c() != h2c {
					t.Fatalf("h2c() = %v", v.h2c())
				}
				testPeerConfig(t, v, members, nil, nil)
				dir := t.TempDir()
				if _, err := v.files(dir, "127.0.0.1:18080", members, "", nil); err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(filepath.Join(dir, map[string]string{nameNginx: "nginx.conf", nameHAProxy: "haproxy.cfg", nameCaddy: "Caddyfile"}[p.name()]))
				if has := strings.Contains(string(b), wantH2C[p.name()]); has != h2c {
					t.Errorf("config has %q: %v", wantH2C[p.name()], has)
				}
				if p.name() == nameNginx && !strings.Contains(string(b), "keepalive 800;") {
					t.Error("nginx keeps fewer idle upstream connections than it has servers")
				}
			})
		}
	}
}

const h2loadOutput = `starting benchmark...
spawning thread #0: 1 total client(s). 40000 total requests
Application protocol: h2c
progress: 10% done

finished in 7.05s, 5673.21 req/s, 1.23MB/s
requests: 40000 total, 40000 started, 40000 done, 39990 succeeded, 10 failed, 0 errored, 0 timeout
status codes: 39990 2xx, 0 3xx, 0 4xx, 10 5xx
traffic: 5.01KB (5128) total, 867B (867) headers (space savings 95.44%), 600B (600) data
                     min         max         mean         sd        +/- sd
time for request:    15.33ms     16.67ms     17.50ms       169us    70.00%
time for connect:      368us       368us       368us         0us   100.00%
`

func TestParseH2load(t *testing.T) {
	r, err := parseH2load(h2loadOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := h2loadResult{RPS: 5673.21, MeanMS: 17.5, Requests: 40000, Errors: 10, Protocol: "h2c"}
	if r != want {
		t.Fatalf("parseH2load = %+v, want %+v", r, want)
	}
	if _, err := parseH2load("Application protocol: h2c\n"); err == nil {
		t.Fatal("output without a summary was accepted")
	}
}

// TestSpreadOf: the per-endpoint figures come from the difference of two
// tallies over every member (one that got nothing counts), and the
// per-loop ones from two readings of corput's loops.
func TestSpreadOf(t *testing.T) {
	members := []string{"a", "b", "c", "d"}
	before := map[string]int64{"a": 5, "b": 5, "c": 0}
	after := map[string]int64{"a": 15, "b": 35, "c": 20, "d": 0}
	s := spreadOf(members, before, after)
	want := Spread{Endpoints: 4, EndpointsReached: 3, OriginRequests: 60, PerEndpointMean: 15, PerEndpointMax: 30, PerEndpointMin: 0,
		PerEndpointMaxOverMean: 2, PerEndpointMinOverMean: 0, PerEndpointCV: round3(math.Sqrt((25+225+25+225)/4.0) / 15)}
	if !reflectEqual(s, want) {
		t.Fatalf("spreadOf = %+v\nwant       %+v", s, want)
	}
	s.setLoops([]uint64{1, 1, 1, 1}, []uint64{11, 21, 31, 41})
	if !slices.Equal(s.LoopRequests, []uint64{10, 20, 30, 40}) || *s.PerLoopMaxOverMean != 1.6 || *s.PerLoopMinOverMean != 0.4 {
		t.Fatalf("loops %v max/mean %v min/mean %v; want 10..40, 1.6, 0.4", s.LoopRequests, *s.PerLoopMaxOverMean, *s.PerLoopMinOverMean)
	}
	var none Spread
	none.setLoops(nil, []uint64{0, 0})
	if none.PerLoopMaxOverMean != nil {
		t.Error("loops without requests got ratios")
	}
}

func reflectEqual(a, b Spread) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestSpreadShape: a spread result's figures sit in its own object in
// peers.json (endpoints_reached, per_endpoint_max_over_mean, …; per_loop_*
// for corput only), and peers.md has a row per load and proxy.
func TestSpreadShape(t *testing.T) {
	mx, mn := 1.02, 0.98
	r := &Results{}
	s := r.scenario(scSpread, "800 endpoints")
	s.Note = spreadNote
	s.Results = []Result{
		{Proxy: nameCorput, RPS: 9000, P99MS: 40, Spread: &Spread{Load: loadManyConns, Balancer: defaultBalancer, Endpoints: 800, EndpointsReached: 800,
			OriginRequests: 90000, PerEndpointMean: 112.5, PerEndpointMaxOverMean: 1.9, PerEndpointMinOverMean: 0.3, PerEndpointCV: 0.25,
			LoopRequests: []uint64{45000, 45000}, PerLoopMaxOverMean: &mx, PerLoopMinOverMean: &mn}},
		{Proxy: nameNginx, RPS: 5600, MeanMS: 17.1, Spread: &Spread{Load: loadH2, Endpoints: 800, EndpointsReached: 799, PerEndpointMaxOverMean: 1.1}},
	}
	dir := t.TempDir()
	if err := r.write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "peers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Scenarios []struct {
			Name    string           `json:"name"`
			Results []map[string]any `json:"results"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	c, n := v.Scenarios[0].Results[0], v.Scenarios[0].Results[1]
	if v.Scenarios[0].Name != "spread" || c["proxy"] != "corput" || c["load"] != loadManyConns || c["endpoints_reached"] != 800.0 ||
		c["per_endpoint_max_over_mean"] != 1.9 || c["per_endpoint_min_over_mean"] != 0.3 || c["per_loop_max_over_mean"] != 1.02 ||
		c["per_loop_min_over_mean"] != 0.98 || c["balancer"] != defaultBalancer || c["rps"] != 9000.0 {
		t.Fatalf("corput spread result = %v", c)
	}
	if _, ok := n["per_loop_max_over_mean"]; ok || n["per_endpoint_min_over_mean"] != 0.0 || n["mean_ms"] != 17.1 || n["endpoints_reached"] != 799.0 {
		t.Fatalf("nginx spread result = %v (want no per-loop figures, min/mean 0 written out)", n)
	}
	mdHas(t, dir,
		"| load | proxy | req/s | p99 ms | mean ms | errors | endpoints reached | per endpoint max/mean | min/mean | cv | per loop max/mean | per loop min/mean |",
		"| h1_many_conns | corput | 9000 | 40.0 | — | 0 | 800 of 800 | 1.90 | 0.30 | 0.25 | 1.02 | 0.98 | 0 | {policy: least_work, choices: 2} |",
		"| h2_one_conn | nginx | 5600 | — | 17.1 | 0 | 799 of 800 | 1.10 | 0.00 | 0.00 | — | — | 0 | — |",
	)
}

// TestCorputAdminAndLoops: the spread scenario finds corput's admin
// address in the config it wrote and reads the bench origin's requests per
// loop from /admin/origins.
func TestCorputAdminAndLoops(t *testing.T) {
	dir := t.TempDir()
	argv, err := corputProxy{bin_: "corput"}.files(dir, "127.0.0.1:18080", []string{"127.0.0.1:9001"}, "", nil)
	if err != nil || argv[0] != "corput" {
		t.Fatal(argv, err)
	}
	admin, err := corputAdmin(dir)
	if err != nil || !strings.HasPrefix(admin, "127.0.0.1:") {
		t.Fatalf("corputAdmin = %q, %v", admin, err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/admin/origins" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`[{"name":"other","loops":[{"loop":0,"requests":9}]},
			{"name":"bench","loops":[{"loop":1,"requests":7,"share":0.7},{"loop":0,"requests":3,"share":0.3}]}]`))
	}))
	defer srv.Close()
	got, err := corputLoopRequests(srv.Listener.Addr().String())
	if err != nil || !slices.Equal(got, []uint64{3, 7}) {
		t.Fatalf("corputLoopRequests = %v, %v; want [3 7]", got, err)
	}
}

// TestSpreadSmoke runs a tiny spread scenario through corput (a real
// child; skipped under -short or without wrk and h2load): 2 origins × 3
// listeners, 2 loops, a second of each wrk load and 300 h2 requests. Each
// load reaches every endpoint through both loops, the h2 load speaks h2c,
// and nothing failed. No speed is asserted.
func TestSpreadSmoke(t *testing.T) {
	bin := testbin.Corput(t)
	for _, tool := range spreadNeeds {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	o, err := parseOptions([]string{"--scenarios", "spread", "--proxies", "corput", "--spread-origins", "2", "--spread-listeners", "3",
		"--spread-loops", "2", "--spread-duration", "1s", "--spread-conns", "8", "--spread-few-conns", "2", "--spread-streams", "10", "--spread-h2-requests", "300"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	b := runTestBench(t, o, bin, corputProxy{bin_: bin, balancer: o.balancer})
	if b.totalRuns() != 3 || len(b.res.Scenarios) != 1 || len(b.res.Scenarios[0].Results) != 3 {
		t.Fatalf("%d runs, results %+v; want 3 runs, one scenario with a result per load", b.totalRuns(), b.res.Scenarios)
	}
	for i, r := range b.res.Scenarios[0].Results {
		sp := r.Spread
		if sp == nil || sp.Load != []string{loadManyConns, loadH2, loadFewConns}[i] {
			t.Fatalf("result %d: %+v", i, r)
		}
		if sp.Endpoints != 6 || sp.EndpointsReached != 6 || r.Errors != 0 || len(sp.LoopRequests) != 2 || sp.LoopRequests[0] == 0 || sp.LoopRequests[1] == 0 ||
			sp.Balancer != defaultBalancer || sp.PerLoopMinOverMean == nil {
			t.Errorf("%s: %+v errors %d; want 6 of 6 endpoints reached through both loops, no errors", sp.Load, *sp, r.Errors)
		}
		if sp.Load == loadH2 && (sp.OriginRequests < 300 || r.Requests != 300) {
			t.Errorf("h2: %d requests sent, %d at the origins; want 300", r.Requests, sp.OriginRequests)
		}
	}
}

// mdHas checks that dir's peers.md holds every line of want.
func mdHas(t *testing.T, dir string, want ...string) {
	t.Helper()
	md, _ := os.ReadFile(filepath.Join(dir, "peers.md"))
	for _, w := range want {
		if !strings.Contains(string(md), w) {
			t.Errorf("peers.md lacks %q:\n%s", w, md)
		}
	}
}

// runTestBench runs options o against proxies through a bench of its own
// (a temporary directory, no output), within 2 minutes, and returns it
// for its results; the processes it started are stopped when the test ends.
func runTestBench(t *testing.T, o options, bin string, proxies ...proxy) *bench {
	t.Helper()
	dir := t.TempDir()
	ps := newProcs(dir)
	t.Cleanup(ps.stopAll)
	b := &bench{o: o, ps: ps, bin: bin, dir: dir, log: io.Discard, res: &Results{}, proxies: proxies}
	b.bar = progress.New(io.Discard, "peers", b.totalRuns())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.runAll(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}
