package serve

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/discovery/xdstest"
	"github.com/corput/corput/internal/waitfor"
)

// origin is a real HTTP server on loopback that answers "origin".
func origin(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "origin") }))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// serving waits for r's gateway to serve and returns its listen and
// admin addresses.
func (r *run) serving(t *testing.T) (listen, admin string) {
	t.Helper()
	waitfor.Until(t, "corput serving", func() bool { return r.attr("corput serving", "admin") != "" })
	return r.attr("corput serving", "listen"), r.attr("corput serving", "admin")
}

// stopped waits for Run to return and fails t unless it returned nil.
func (r *run) stopped(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("Run: %v\n%s", err, r.log)
		}
	case <-time.After(waitfor.Timeout):
		t.Fatalf("Run did not return:\n%s", r.log)
	}
}

// raise sends sig to this process: Run's handlers are the ones that hear it.
func raise(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
}

// TestRunServesUntilItsContextEnds: a lone gateway places itself at 0 of
// 1, proxies to its origin, and when the context ends drains and
// returns nil, leaving no goroutine behind (TestMain's goleak).
func TestRunServesUntilItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := start(t, ctx, Options{Config: writeConfig(t, gatewayConfig("", origin(t)))})
	listen, _ := r.serving(t)
	if code, body := get(listen, "/x"); code != 200 || body != "origin" {
		t.Fatalf("through the gateway: %d %q, want the origin's 200", code, body)
	}
	if r.attr("fleet position", "instance") != "0" || r.attr("fleet position", "size") != "1" {
		t.Errorf("a lone gateway placed otherwise:\n%s", r.log)
	}
	cancel()
	r.stopped(t)
	if !strings.Contains(r.log.String(), "shutting down: draining in-flight requests") {
		t.Errorf("returned without the drain:\n%s", r.log)
	}
	if code, _ := get(listen, "/x"); code != 0 {
		t.Errorf("the listener still answers (%d) after Run returned", code)
	}
}

// TestSignalsReloadReopenAndDrain sends real signals to this process
// while Run serves: SIGHUP reloads the changed file in place, SIGUSR1
// (no access log here) is logged and ends nothing, and SIGTERM drains and
// makes Run return nil.
func TestSignalsReloadReopenAndDrain(t *testing.T) {
	to := origin(t)
	file := writeConfig(t, gatewayConfig("", to))
	r := start(t, context.Background(), Options{Config: file})
	listen, _ := r.serving(t)
	if err := os.WriteFile(file, []byte(strings.Replace(gatewayConfig("", to), "routes: [", "routes: [{path_prefix: /b, origin: a}, ", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	raise(t, syscall.SIGHUP)
	waitfor.Until(t, "the reload", func() bool { return strings.Contains(r.log.String(), "configuration reloaded") })
	if !strings.Contains(r.log.String(), "SIGHUP: reloading the configuration") {
		t.Errorf("reloaded without SIGHUP's line:\n%s", r.log)
	}
	raise(t, syscall.SIGUSR1)
	waitfor.Until(t, "SIGUSR1 heard", func() bool { return strings.Contains(r.log.String(), "SIGUSR1: no access log file to reopen") })
	if code, body := get(listen, "/b"); code != 200 || body != "origin" {
		t.Fatalf("after SIGHUP and SIGUSR1: %d %q, want the gateway still serving", code, body)
	}
	raise(t, syscall.SIGTERM)
	r.stopped(t)
	if !strings.Contains(r.log.String(), "shutting down: draining in-flight requests") {
		t.Errorf("SIGTERM did not drain:\n%s", r.log)
	}
}

// TestWatchReloadsAChangedFile: with Watch, a change to the config file
// is one reload.
func TestWatchReloadsAChangedFile(t *testing.T) {
	to := origin(t)
	file := writeConfig(t, gatewayConfig("", to))
	r := start(t, context.Background(), Options{Config: file, Watch: true, WatchDebounce: 10 * time.Millisecond})
	r.serving(t)
	waitfor.Until(t, "the watch", func() bool { return r.attr("--watch: reloading when these files change", "files") != "" })
	if err := os.WriteFile(file, []byte(gatewayConfig("", to)+"# changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the reload", func() bool { return strings.Contains(r.log.String(), "configuration reloaded") })
	if !strings.Contains(r.log.String(), "--watch: files changed; reloading") {
		t.Errorf("reloaded without the watcher's line:\n%s", r.log)
	}
}

// TestAnInvalidConfigIsRefused: the diagnostics go to Diagnostics as
// `corput check` prints them, and the error is the operator's.
func TestAnInvalidConfigIsRefused(t *testing.T) {
	keepProcs(t)
	var diags strings.Builder
	file := writeConfig(t, "listen: 127.0.0.1:0\nroutes: [{origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}], pool: {max_pending: -1}}]\n")
	err := Run(context.Background(), Options{Config: file, Logger: slog.New(slog.DiscardHandler), Diagnostics: &diags})
	if !IsConfigError(err) || !strings.Contains(err.Error(), "refusing an invalid config") {
		t.Fatalf("Run: %v, want a config error refusing the file", err)
	}
	if !strings.Contains(diags.String(), "ERR_UNBOUNDED_QUEUE_REJECTED") || !strings.Contains(diags.String(), ": invalid: 1 error(s)") {
		t.Errorf("diagnostics:\n%s", diags.String())
	}
}

// TestTheAdminWaitsForThePositionAndIsHandedOver: placed by a control
// plane, the gateway waits for its position with its admin address
// answering /healthz ok and /readyz 503; once the position comes the
// gateway starts there and serves its admin API on that same address.
func TestTheAdminWaitsForThePositionAndIsHandedOver(t *testing.T) {
	cp := xdstest.New(t, "127.0.0.1:0")
	admin := freeAddr(t)
	fleet := "fleet: {server: " + cp.Addr() + ", node_id: gw-a}\n"
	r := start(t, context.Background(), Options{Config: writeConfig(t, gatewayConfig(fleet, origin(t))), Admin: admin})
	waitfor.Until(t, "the waiting admin", func() bool { code, _ := get(admin, "/readyz"); return code == 503 })
	if code, body := get(admin, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz while waiting: %d %q", code, body)
	}
	if strings.Contains(r.log.String(), "corput serving") {
		t.Fatalf("served before the position came:\n%s", r.log)
	}
	if err := cp.SetFleet("gw-a", discovery.FleetResource(1, 2)); err != nil {
		t.Fatal(err)
	}
	if _, served := r.serving(t); served != admin {
		t.Errorf("the gateway's admin is %s, not the address it waited on (%s)", served, admin)
	}
	if r.attr("fleet position", "instance") != "1" || r.attr("fleet position", "size") != "2" {
		t.Errorf("placed otherwise than the control plane's 1 of 2:\n%s", r.log)
	}
	waitfor.Until(t, "the gateway's /readyz", func() bool { code, _ := get(admin, "/readyz"); return code == 200 })
}

// TestSIGTERMEndsTheWaitForAPosition: while a gateway waits for its
// position (no gateway runs yet to reload or reopen), SIGHUP and SIGUSR1
// end nothing; SIGTERM ends the wait, Run returns nil (exit 0) and the
// admin address it answered on is closed.
func TestSIGTERMEndsTheWaitForAPosition(t *testing.T) {
	cp := xdstest.New(t, "127.0.0.1:0")
	admin := freeAddr(t)
	fleet := "fleet: {server: " + cp.Addr() + ", node_id: gw-a}\n"
	r := start(t, context.Background(), Options{Config: writeConfig(t, gatewayConfig(fleet, origin(t))), Admin: admin})
	waitfor.Until(t, "the waiting admin", func() bool {
		code, body := get(admin, "/readyz")
		return code == 503 && strings.Contains(body, "not ready: waiting for the fleet position from the control plane at "+cp.Addr())
	})
	raise(t, syscall.SIGHUP)
	raise(t, syscall.SIGUSR1)
	if code, _ := get(admin, "/readyz"); code != 503 {
		t.Fatalf("/readyz after SIGHUP and SIGUSR1 during the wait: %d, want still waiting (503)", code)
	}
	raise(t, syscall.SIGTERM)
	r.stopped(t)
	if !strings.Contains(r.log.String(), "stopped before the control plane gave a fleet position") {
		t.Errorf("the wait ended without saying why:\n%s", r.log)
	}
	if code, _ := get(admin, "/healthz"); code != 0 {
		t.Errorf("the admin address still answers (%d) after Run returned", code)
	}
}
