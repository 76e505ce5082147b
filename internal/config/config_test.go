package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/workload"
)

// minimal is the smallest valid config: one route, one origin, one endpoint.
const minimal = `
routes: [{origin: api}]
origins:
  - name: api
    endpoints: [{address: 127.0.0.1:9001}]
`

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatalf("Parse: %v\n--- source ---\n%s", err, src)
	}
	return cfg
}

// parseDiags parses src and returns its diagnostics; it fails the test if
// src parses without error.
func parseDiags(t *testing.T, src string) Diagnostics {
	t.Helper()
	cfg, err := Parse([]byte(src), "test.yaml")
	if err == nil {
		t.Fatalf("Parse accepted an invalid config:\n%s", src)
	}
	if cfg != nil {
		t.Errorf("Parse returned a config together with an error")
	}
	var ds Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("Parse error is %T, want Diagnostics: %v", err, err)
	}
	return ds
}

func TestDefaultsAreTheSeedsValues(t *testing.T) {
	cfg := mustParse(t, minimal)
	if len(cfg.Warnings()) != 0 {
		t.Errorf("minimal config has warnings: %v", cfg.Warnings())
	}
	want := &Config{
		Listen: "127.0.0.1:8080",
		Admin:  Admin{Listen: "127.0.0.1:9901"},
		Fleet:  Fleet{Instance: 0, Size: 1},
		Downstream: Downstream{
			ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 65536, FastPath: true, BodyReadTimeout: 60 * time.Second,
			UnderscoreHeaders: UnderscoreDrop,
		},
		Shutdown: Shutdown{DrainTimeout: 20 * time.Second},
		Limits:   Limits{ReplayBuffersBytes: DefaultReplayBuffersBytes},
		Routes:   []Route{{PathPrefix: "/", Origin: "api"}},
	}
	o := DefaultOrigin()
	o.Name = "api"
	o.Endpoints = []Endpoint{{Address: "127.0.0.1:9001", Weight: 1}}
	want.Origins = []Origin{o}
	cfg.file, cfg.lines, cfg.warnings, cfg.source = "", nil, nil, nil
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", cfg, want)
	}

	// The numbers the seeds and docs/contract.md fix, spelled out so that a
	// change to DefaultOrigin cannot silently move them.
	got := cfg.Origins[0]
	checks := []struct {
		key       string
		got, want any
	}{
		{"protocol", got.Protocol, ProtocolAuto},
		{"discovery.type", got.Discovery.Type, DiscoveryStatic},
		{"debounce", got.Debounce, 2 * time.Second},
		{"subset.algorithm", got.Subset.Algorithm, SubsetRingsteady},
		{"subset.size", got.Subset.Size, 0},
		{"subset.min_size", got.Subset.MinSize, 25},
		{"subset.max_size", got.Subset.MaxSize, 50},
		{"balancer.policy", got.Balancer.Policy, PolicyLeastWork}, // not the seed's peak_ewma: docs/decisions.md, "The default policy"
		{"balancer.choices", got.Balancer.Choices, 2},
		{"balancer.ewma_decay", got.Balancer.EWMADecay, 10 * time.Second},
		{"pool.max_connections", got.Pool.MaxConnections, 64},
		{"pool.max_pending", got.Pool.MaxPending, PendingLimit(50)},
		{"pool.acquire_timeout", got.Pool.AcquireTimeout, 100 * time.Millisecond},
		{"pool.over_cap", got.Pool.OverCap, OverCapQueue},
		{"pool.idle_timeout", got.Pool.IdleTimeout, 60 * time.Second},
		{"pool.max_lifetime", got.Pool.MaxLifetime, 10 * time.Minute},
		{"pool.keepalive", got.Pool.Keepalive, 15 * time.Second},
		{"pool.prewarm", got.Pool.Prewarm, 1},
		{"slow_start.window", got.SlowStart.Window, 60 * time.Second},
		{"slow_start.min_weight_percent", got.SlowStart.MinWeightPercent, 10},
		{"slow_start.aggression", got.SlowStart.Aggression, 1.0},
		{"outlier.consecutive_5xx", got.Outlier.Consecutive5xx, 3},
		{"outlier.base_ejection_time", got.Outlier.BaseEjectionTime, 30 * time.Second},
		{"outlier.max_ejection_time", got.Outlier.MaxEjectionTime, 300 * time.Second},
		{"outlier.max_ejection_percent", got.Outlier.MaxEjectionPercent, 20},
		{"panic_threshold_percent", got.PanicThresholdPercent, 80},
		{"zone.local_percent", got.Zone.LocalPercent, 85},
		{"retry.attempts", got.Retry.Attempts, 1},
		{"retry.budget_percent", got.Retry.BudgetPercent, 20},
		{"retry.on", got.Retry.On, []RetryOn{RetryConnectFailure, RetryRefusedStream, Retry503}},
		{"timeouts.connect", got.Timeouts.Connect, time.Second},
		{"timeouts.request", got.Timeouts.Request, time.Duration(0)},
		{"timeouts.response_header", got.Timeouts.ResponseHeader, 15 * time.Second},
		{"timeouts.stream_idle", got.Timeouts.StreamIdle, 60 * time.Second},
		{"timeouts.grpc_max", got.Timeouts.GRPCMax, time.Duration(0)},
		{"retry.per_try_timeout", got.Retry.PerTryTimeout, time.Duration(0)},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("default %s = %v, want %v", c.key, c.got, c.want)
		}
	}
	if got.SLO != nil || got.TLS != nil || cfg.TLS != nil || cfg.Workload != nil {
		t.Errorf("optional blocks should be nil when absent: slo %v, origin tls %v, tls %v, workload %v", got.SLO, got.TLS, cfg.TLS, cfg.Workload)
	}
}

func TestLoopCount(t *testing.T) {
	cfg := mustParse(t, minimal)
	if got := cfg.LoopCount(); got != runtime.GOMAXPROCS(0) {
		t.Errorf("loops 0: LoopCount = %d, want GOMAXPROCS %d", got, runtime.GOMAXPROCS(0))
	}
	cfg = mustParse(t, "loops: 3\n"+minimal)
	if got := cfg.LoopCount(); got != 3 {
		t.Errorf("loops 3: LoopCount = %d", got)
	}
}

func TestExplicitValuesOverrideDefaults(t *testing.T) {
	cfg := mustParse(t, `
listen: ":0"
admin: 127.0.0.1:0
downstream: {trusted_proxies: [10.1.2.3/8, "::1/128"]}
routes: [{host: API.Example.com, path_prefix: /v1, origin: api}]
origins:
  - name: api
    endpoints: [{address: "[::1]:9001", zone: b, weight: 3}]
    pool: {max_pending: 1, over_cap: temporary, idle_timeout: 0s}
    retry: {on: ["503"]}
    slo: {p99: 20ms}
`)
	o := cfg.Origins[0]
	if o.Pool.MaxPending != 1 || o.Pool.OverCap != OverCapTemporary || o.Pool.IdleTimeout != 0 {
		t.Errorf("pool = %+v", o.Pool)
	}
	if o.Pool.MaxConnections != 64 {
		t.Errorf("a key left out of a written block lost its default: max_connections %d", o.Pool.MaxConnections)
	}
	if !reflect.DeepEqual(o.Retry.On, []RetryOn{Retry503}) {
		t.Errorf("a written list must replace the default list, got %v", o.Retry.On)
	}
	if o.Endpoints[0] != (Endpoint{Address: "[::1]:9001", Zone: "b", Weight: 3}) {
		t.Errorf("endpoint = %+v", o.Endpoints[0])
	}
	if cfg.Routes[0].Host != "api.example.com" {
		t.Errorf("route host not lower-cased: %q", cfg.Routes[0].Host)
	}
	wantProxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	if !reflect.DeepEqual(cfg.Downstream.TrustedProxies, wantProxies) {
		t.Errorf("trusted_proxies = %v, want %v (masked)", cfg.Downstream.TrustedProxies, wantProxies)
	}
	if o.SLO == nil || o.SLO.P99 != 20*time.Millisecond {
		t.Errorf("slo = %+v", o.SLO)
	}
}

func TestMergeKeysAndAliases(t *testing.T) {
	cfg := mustParse(t, `
routes: [{origin: a}, {path_prefix: /b, origin: b}]
origins:
  - name: a
    endpoints: [{address: 127.0.0.1:9001}]
    pool: &p {max_connections: 8, over_cap: reject, prewarm: 2}
    timeouts: &t {connect: 200ms, request: 3s}
  - name: b
    endpoints: [{address: 127.0.0.1:9002}]
    pool: {<<: *p, over_cap: temporary}
    timeouts: *t
`)
	a, b := cfg.Origins[0], cfg.Origins[1]
	if b.Pool.MaxConnections != 8 || b.Pool.Prewarm != 2 {
		t.Errorf("merged keys missing: %+v", b.Pool)
	}
	if b.Pool.OverCap != OverCapTemporary || a.Pool.OverCap != OverCapReject {
		t.Errorf("a key written next to a merge must win: a %s, b %s", a.Pool.OverCap, b.Pool.OverCap)
	}
	if b.Timeouts != a.Timeouts || b.Timeouts.Request != 3*time.Second {
		t.Errorf("alias not followed: %+v", b.Timeouts)
	}
}

func TestExamples(t *testing.T) {
	cases := []struct {
		file string
		code string // "" = valid
		key  string
		line int
	}{
		{"gateway.yaml", "", "", 0},
		{"bad-unbounded-queue.yaml", CodeUnboundedQueue, "origins[0].pool.max_pending", 12},
		{"bad-average-slo.yaml", CodeAverageOnly, "origins[0].slo.average", 11},
		{"bad-uniform-workload.yaml", CodeNoWorkloadSkew, "workload.classes", 11},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("..", "..", "examples", c.file)
			cfg, err := Load(path)
			if c.code == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if len(cfg.Warnings()) != 0 {
					t.Errorf("the example should be free of warnings: %v", cfg.Warnings())
				}
				if err := cfg.Validate(); err != nil {
					t.Errorf("a parsed config must pass Validate: %v", err)
				}
				return
			}
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("Load error %v, want Diagnostics", err)
			}
			if len(ds) != 1 {
				t.Fatalf("want exactly one diagnostic, got %d:\n%v", len(ds), ds)
			}
			d := ds[0]
			if d.Code != c.code || d.Key != c.key || d.Line != c.line || d.File != path {
				t.Errorf("got %s\nwant %s:%d: %s: %s: ...", d, path, c.line, c.key, c.code)
			}
		})
	}
}

func TestGatewayExampleContents(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "..", "examples", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Origins) != 2 || len(cfg.Routes) != 2 {
		t.Fatalf("origins %d routes %d", len(cfg.Origins), len(cfg.Routes))
	}
	p, ok := cfg.Origin("payments")
	if !ok || len(p.Endpoints) != 4 || p.Endpoints[3].Weight != 2 || p.Zone.Local != "us-east-1a" {
		t.Errorf("payments = %+v", p)
	}
	b, ok := cfg.Origin("balance")
	if !ok || b.Pool.OverCap != OverCapReject || b.Pool.MaxConnections != 64 || b.Protocol != ProtocolH1 {
		t.Errorf("balance = %+v", b)
	}
	if _, ok := cfg.Origin("missing"); ok {
		t.Error("Origin found a name that is not defined")
	}
	if cfg.Workload == nil || cfg.Workload.Validate() != nil || !reflect.DeepEqual(cfg.Workload.Classes[1], workload.Class{Name: "card-authorization", Percent: 30, Latency: 140 * time.Millisecond}) {
		t.Errorf("workload = %+v", cfg.Workload)
	}
}

// TestAccessLog: the block is off by default; written, it takes json and
// a sample of 1 unless set, and a relative path is the config file's
// directory's, while stdout stays stdout.
func TestAccessLog(t *testing.T) {
	if cfg := mustParse(t, minimal); cfg.AccessLog != nil {
		t.Errorf("access_log without the key = %+v, want nil (off)", cfg.AccessLog)
	}
	dir := t.TempDir()
	parse := func(block string) *AccessLog {
		t.Helper()
		cfg, err := Parse([]byte(block+minimal), filepath.Join(dir, "gw.yaml"))
		if err != nil {
			t.Fatalf("Parse: %v\n%s", err, block)
		}
		return cfg.AccessLog
	}
	if got, want := parse("access_log: {path: access.log}\n"), (AccessLog{Path: filepath.Join(dir, "access.log"), Format: AccessLogJSON, Sample: 1}); got == nil || *got != want {
		t.Errorf("access_log with a relative path = %+v, want %+v", got, want)
	}
	if got, want := parse("access_log: {path: stdout, format: combined, sample: 0.25}\n"), (AccessLog{Path: AccessLogStdout, Format: AccessLogCombined, Sample: 0.25}); got == nil || *got != want {
		t.Errorf("access_log to stdout = %+v, want %+v", got, want)
	}
	if got := parse("access_log: {path: stdout, sample: 1}\n"); got == nil || got.Sample != 1 {
		t.Errorf("sample: 1 (an integer) = %+v, want 1", got)
	}
}

func TestValidateConfigBuiltInGo(t *testing.T) {
	cfg := Default()
	o := DefaultOrigin()
	o.Name = "api"
	o.Endpoints = []Endpoint{{Address: "127.0.0.1:9001", Weight: 1}}
	cfg.Origins = []Origin{o}
	cfg.Routes = []Route{{PathPrefix: "/", Origin: "api"}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	cfg.Origins[0].Pool.MaxPending = 0
	err := cfg.Validate()
	var ds Diagnostics
	if !errors.As(err, &ds) || len(ds) != 1 || ds[0].Code != CodeUnboundedQueue || ds[0].Line != 0 {
		t.Fatalf("Validate with max_pending 0: %v", err)
	}
	if got, want := ds[0].String(), "origins[0].pool.max_pending: "+CodeUnboundedQueue+": "+unboundedMessage("0"); got != want {
		t.Errorf("String without file or line:\n got %s\nwant %s", got, want)
	}
}

func TestDiagnosticString(t *testing.T) {
	cases := []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{File: "f.yaml", Line: 3, Key: "loops", Message: "m"}, "f.yaml:3: loops: m"},
		{Diagnostic{File: "f.yaml", Line: 3, Key: "k", Code: "ERR_X", Message: "m"}, "f.yaml:3: k: ERR_X: m"},
		{Diagnostic{File: "f.yaml", Key: "k", Message: "m"}, "f.yaml: k: m"},
		{Diagnostic{File: "f.yaml", Line: 7, Message: "m"}, "f.yaml:7: m"},
		{Diagnostic{Line: 7, Key: "k", Severity: SeverityWarning, Message: "m"}, "line 7: k: warning: m"},
	}
	for _, c := range cases {
		if got := c.d.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	var ds Diagnostics
	if err == nil || errors.As(err, &ds) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want a plain not-exist error", err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
}

func TestPathPositionsFallBackToParent(t *testing.T) {
	r := &reporter{lines: map[string]int{"origins": 2, "origins[0]": 3, "origins[0].pool": 7}}
	cases := map[string]int{
		"origins[0].pool.max_pending": 7,
		"origins[0].endpoints":        3,
		"origins[1].name":             2,
		"routes":                      0,
	}
	for path, want := range cases {
		if got := r.lineOf(path); got != want {
			t.Errorf("lineOf(%q) = %d, want %d", path, got, want)
		}
	}
}

func TestClosestKey(t *testing.T) {
	keys := []string{"max_connections", "max_pending", "acquire_timeout", "over_cap"}
	cases := map[string]string{
		"max_pendng":      "max_pending",
		"Max_Pending":     "max_pending",
		"overcap":         "over_cap",
		"acquire_timeot":  "acquire_timeout",
		"zzz":             "",
		"max_connections": "max_connections",
	}
	for in, want := range cases {
		if got := closest(in, keys); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkParseGatewayExample(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "gateway.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, "gateway.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRedactedIsTheConfigAsWritten: GET /admin/config's tree names the
// YAML keys, writes durations and prefixes as the file does, shows the
// files the config names but never their content.
func TestRedactedIsTheConfigAsWritten(t *testing.T) {
	cfg, err := Parse([]byte(`
downstream: {trusted_proxies: [10.0.0.0/8]}
routes: [{origin: api}]
origins:
  - name: api
    endpoints: [{address: 127.0.0.1:9001}]
    pool: {acquire_timeout: 250ms}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Redacted()
	origins, _ := r["origins"].([]any)
	if len(origins) != 1 {
		t.Fatalf("origins: %#v", r["origins"])
	}
	pool := origins[0].(map[string]any)["pool"].(map[string]any)
	if pool["acquire_timeout"] != "250ms" || pool["max_connections"] != 64 {
		t.Errorf("pool: %#v", pool)
	}
	ds := r["downstream"].(map[string]any)
	if tp := ds["trusted_proxies"].([]any); len(tp) != 1 || tp[0] != "10.0.0.0/8" {
		t.Errorf("trusted_proxies: %#v", ds["trusted_proxies"])
	}
	if _, ok := r["admin"].(map[string]any)["token_file"]; !ok {
		t.Errorf("admin: %#v", r["admin"])
	}
}

// TestHealthCheckDefaults: an empty health_check block takes every default,
// and a key given keeps the others' defaults.
func TestHealthCheckDefaults(t *testing.T) {
	cfg := mustParse(t, "routes: [{origin: api}]\norigins:\n  - name: api\n    protocol: h2c\n    endpoints: [{address: 127.0.0.1:9001}]\n    health_check: {interval: 2s, grpc: {service: pay}}\n")
	h := cfg.Origins[0].HealthCheck
	want := DefaultHealthCheck()
	want.Interval, want.GRPC = 2*time.Second, &GRPCHealthCheck{Service: "pay"}
	if !reflect.DeepEqual(*h, want) {
		t.Fatalf("health_check = %+v; want %+v", *h, want)
	}
	if want := (HealthCheck{Path: "/healthz", Method: "GET", Interval: 5 * time.Second, Jitter: 500 * time.Millisecond,
		Timeout: time.Second, UnhealthyThreshold: 3, HealthyThreshold: 2}); !reflect.DeepEqual(DefaultHealthCheck(), want) {
		t.Fatalf("defaults moved: %+v", DefaultHealthCheck())
	}
	if mustParse(t, minimal).Origins[0].HealthCheck != nil {
		t.Fatal("an origin without the block has a health check")
	}
	for s, pass := range map[int]bool{200: true, 302: true, 399: true, 400: false, 500: false, 199: false} {
		if got := h.Passes(s); got != pass {
			t.Errorf("Passes(%d) = %v with no expected_statuses", s, got)
		}
	}
	h.ExpectedStatuses = []int{204}
	if h.Passes(200) || !h.Passes(204) {
		t.Error("expected_statuses [204]: only 204 passes")
	}
}
