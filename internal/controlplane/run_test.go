package controlplane

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

// TestRunServesUntilItsContextEnds: Run serves, with /readyz, /metrics
// and /healthz on the admin listener, until its context ends (SIGTERM
// for `corput control-plane`), then returns nil leaving the state behind.
func TestRunServesUntilItsContextEnds(t *testing.T) {
	dir := t.TempDir()
	state, source := filepath.Join(dir, "state.json"), filepath.Join(dir, "origins.yaml")
	writeFile(t, source, "origins: [{name: payments, subset: {min_size: 10, max_size: 20}, endpoints: [{address: 127.0.0.1:1, zone: a, weight: 2}]}]\n")
	logger, log := testlog.New(slog.LevelDebug)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Listen: "127.0.0.1:0", Admin: "127.0.0.1:0", StatePath: state, Source: source, Debounce: -1, Logger: logger})
	}()
	adminRE := regexp.MustCompile(`msg="control plane: serving" .*\badmin=(\S+)`)
	var admin string
	waitfor.Until(t, "the control plane serving", func() bool {
		if m := adminRE.FindStringSubmatch(log.String()); m != nil {
			admin = m[1]
		}
		return admin != ""
	})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + admin + path)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitfor.Until(t, "/readyz", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, `corput_controlplane_pushes_total{origin="payments"} 1`) {
		t.Errorf("/metrics %d:\n%s", code, body)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz %d %q", code, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v after the stop, want nil:\n%s", err, log)
		}
	case <-time.After(waitfor.Timeout):
		t.Fatal("Run did not return after the stop")
	}
	if !strings.Contains(log.String(), "control plane: shutting down; gateways keep their last assignment") {
		t.Errorf("stopped without saying so:\n%s", log)
	}
	if code, _ := get("/healthz"); code != 0 {
		t.Errorf("the admin listener still answers (%d) after Run returned", code)
	}
	s, fresh, err := LoadState(state)
	if err != nil || fresh || s.Origins["payments"] == nil || s.Origins["payments"].Endpoints[0].Weight != 2 {
		t.Fatalf("state after the stop: %+v %v %v", s, fresh, err)
	}
}

// TestRunReturnsStartsError: input Start refuses is Run's error, a
// config error, and nothing is left serving.
func TestRunReturnsStartsError(t *testing.T) {
	err := Run(context.Background(), Options{Listen: "127.0.0.1:0", StatePath: filepath.Join(t.TempDir(), "state.json")})
	if err == nil || !IsConfigError(err) || !strings.Contains(err.Error(), "name the membership") {
		t.Fatalf("Run without a membership source: %v, want Start's config error", err)
	}
}
