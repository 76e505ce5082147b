package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestTracing: off by default; written, it takes grpc and a ratio of 0.01
// unless set, its headers as a mapping and its TLS files against the
// config file's directory; /admin/config shows no header value.
func TestTracing(t *testing.T) {
	if cfg := mustParse(t, minimal); cfg.Tracing != nil {
		t.Errorf("tracing without the key = %+v, want nil (off)", cfg.Tracing)
	}
	dir := t.TempDir()
	cfg, err := Parse([]byte("tracing: {endpoint: otel:4317}\n"+minimal), filepath.Join(dir, "gw.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Tracing{Endpoint: "otel:4317", Protocol: TracingGRPC, SampleRatio: 0.01}); !reflect.DeepEqual(*cfg.Tracing, want) {
		t.Errorf("tracing defaults = %+v, want %+v", *cfg.Tracing, want)
	}
	cfg, err = Parse([]byte(`tracing:
  endpoint: 127.0.0.1:4318
  protocol: http
  sample_ratio: 1
  headers: {Authorization: Bearer s3cret, X-Tenant: a}
  tls: {insecure_skip_verify: true, server_name: otel}
`+minimal), filepath.Join(dir, "gw.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Tracing
	if tr.Protocol != TracingHTTP || tr.SampleRatio != 1 || !reflect.DeepEqual(tr.Headers, Headers{"Authorization": "Bearer s3cret", "X-Tenant": "a"}) ||
		tr.TLS == nil || tr.TLS.ServerName != "otel" {
		t.Errorf("tracing = %+v", tr)
	}
	if got := cfg.Redacted()["tracing"].(map[string]any)["headers"]; got != "[redacted]" {
		t.Errorf("/admin/config's tracing.headers = %v, want [redacted]", got)
	}
	if w := cfg.Warnings(); len(w) != 1 || w[0].Key != "tracing.tls.insecure_skip_verify" {
		t.Errorf("warnings = %v, want one for tracing.tls.insecure_skip_verify", w)
	}
}

// TestTracingErrorsNameTheKey: each mistake is reported at its key path,
// and a header value (a secret) is never quoted.
func TestTracingErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ block, key, says string }{
		{"tracing: {}", "tracing.endpoint", "missing"},
		{"tracing: {endpoint: otel}", "tracing.endpoint", "host:port"},
		{"tracing: {endpoint: otel:4317, protocol: zipkin}", "tracing.protocol", "grpc, http"},
		{"tracing: {endpoint: otel:4317, sample_ratio: 1.5}", "tracing.sample_ratio", "[0, 1]"},
		{"tracing: {endpoint: otel:4317, headers: {\"bad name\": x}}", "tracing.headers", "not a header name"},
		{"tracing: {endpoint: otel:4317, headers: {X-Key: \"s3cret\\n\"}}", "tracing.headers.X-Key", "one line"},
		{"tracing: {endpoint: otel:4317, headers: [a]}", "tracing.headers", "mapping of header names"},
		{"tracing: {endpoint: otel:4317, tls: {ca: missing.pem}}", "tracing.tls.ca", "cannot read"},
		{"tracing: {endpoint: otel:4317, tls: {cert: c.pem}}", "tracing.tls.key", "missing"},
	} {
		_, err := Parse([]byte(c.block+"\n"+minimal), filepath.Join(t.TempDir(), "gw.yaml"))
		var ds Diagnostics
		if !errors.As(err, &ds) {
			t.Errorf("%s: err = %v, want diagnostics", c.block, err)
			continue
		}
		found := false
		for _, d := range ds.Errors() {
			if d.Key == c.key && strings.Contains(d.Message, c.says) {
				found = true
			}
			if strings.Contains(d.String(), "s3cret") {
				t.Errorf("%s: a diagnostic quotes the header value: %s", c.block, d)
			}
		}
		if !found {
			t.Errorf("%s: diagnostics %v, want one at %s saying %q", c.block, ds, c.key, c.says)
		}
	}
}
