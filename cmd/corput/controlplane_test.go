package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/waitfor"
)

// syncBuffer is a concurrency-safe stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestControlPlaneExitCodes(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("origins:\n  - name: a\n    endpoints:\n      - {address: nope}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "damaged.json")
	if err := os.WriteFile(damaged, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("origins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "usage: corput control-plane"},
		{"no state", []string{"--source", good}, 2, "--state FILE is required"},
		{"no membership", []string{"--state", state}, 2, "--source FILE, --relay ADDR"},
		{"follow and source", []string{"--state", state, "--follow", "--source", good}, 2, "--follow serves"},
		{"clusters without relay", []string{"--state", state, "--source", good, "--clusters", "a"}, 2, "needs --relay"},
		{"relay without clusters", []string{"--state", state, "--relay", "127.0.0.1:1"}, 2, "--relay needs the clusters"},
		{"bad flag", []string{"--stat", state}, 2, "flag provided but not defined"},
		{"zero fleet grace", []string{"--state", state, "--source", good, "--fleet-grace", "0s"}, 2, "--fleet-grace 0s: must be > 0"},
		{"negative fleet grace", []string{"--state", state, "--source", good, "--fleet-grace", "-1s"}, 2, "--fleet-grace -1s: must be > 0"},
		{"positional", []string{"--state", state, "extra"}, 2, `unexpected argument "extra"`},
		{"invalid source", []string{"--state", state, "--source", bad}, 2, "origins[0].endpoints[0]"},
		{"damaged state", []string{"--state", damaged, "--source", good}, 2, "fix or restore it"},
		{"listener taken", []string{"--state", state, "--source", good, "--listen", taken.Addr().String(), "--admin", ""}, 1, "--listen"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var errw syncBuffer
			code := controlPlaneMain(context.Background(), c.args, io.Discard, &errw)
			if code != c.code || !strings.Contains(errw.String(), c.want) {
				t.Fatalf("exit %d, want %d with %q in:\n%s", code, c.code, c.want, errw.String())
			}
		})
	}
}

// The command serves until its context ends (SIGTERM), with /readyz and
// /metrics on the admin listener, then exits 0 leaving the state behind.
func TestControlPlaneServesUntilStopped(t *testing.T) {
	dir := t.TempDir()
	state, source := filepath.Join(dir, "state.json"), filepath.Join(dir, "origins.yaml")
	if err := os.WriteFile(source, []byte("origins: [{name: payments, subset: {min_size: 10, max_size: 20}, endpoints: [{address: 127.0.0.1:1, zone: a, weight: 2}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var errw syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- controlPlaneMain(ctx, []string{"--state", state, "--source", source, "--listen", "127.0.0.1:0", "--admin", admin, "--debounce", "0"}, io.Discard, &errw)
	}()
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
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after the stop, want 0:\n%s", code, errw.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the stop")
	}
	s, fresh, err := controlplane.LoadState(state)
	if err != nil || fresh || s.Origins["payments"] == nil || s.Origins["payments"].Endpoints[0].Weight != 2 {
		t.Fatalf("state after the stop: %+v %v %v", s, fresh, err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
