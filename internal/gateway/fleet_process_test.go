package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/corput/corput/internal/controlplane"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/discovery/xdstest"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/waitfor"
)

// TestAControlPlanePlacesTheGateway: a `corput serve` whose config names
// fleet.server asks that ADS server for the position of its node id and
// does not start before it has one; it then follows the control plane's
// moves in place under load with no request lost, a SIGHUP reload keeps
// the control plane's position, and while the control plane is down the
// last position stays.
func TestAControlPlanePlacesTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/corput")
	}
	cp := xdstest.New(t, "127.0.0.1:0")
	origins := startOrigins(t, 8, testorigin.Options{Classes: fastClass})
	file := filepath.Join(t.TempDir(), "corput.yaml")
	fleet := fmt.Sprintf("fleet: {server: %q, node_id: gw-a}\n", cp.Addr())
	// A fixed admin port, to probe it while the gateway waits.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := free.Addr().String()
	free.Close()
	configText := func(routes []string) string {
		return strings.Replace(serveConfig(routes, origins, fleet), "admin: 127.0.0.1:0", "admin: "+admin, 1)
	}
	writeFileAtomic(t, file, configText(nil))
	set := func(instance, size int) {
		t.Helper()
		if err := cp.SetFleet("gw-a", discovery.FleetResource(instance, size)); err != nil {
			t.Fatal(err)
		}
	}
	// The position is published only once the gateway has asked for it
	// (a gateway that served before would log its addresses first), and
	// its admin port, meanwhile, says it is alive and not ready.
	asked := make(chan string, 1)
	go func() {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if slices.ContainsFunc(cp.Requests(), func(r *discoveryv3.DiscoveryRequest) bool {
				return r.GetTypeUrl() == discovery.FleetType && slices.Equal(r.GetResourceNames(), []string{"gw-a"})
			}) {
				asked <- waitingProbes(admin) + publish(cp)
				return
			}
		}
		asked <- "the gateway never asked for its position as node gw-a"
	}()
	p := startServeWith(t, serveSpec{config: file})
	if problem := <-asked; problem != "" {
		t.Fatal(problem)
	}
	if p.admin != admin {
		t.Errorf("the gateway serves its admin API on %s, not on the socket it answered on while waiting (%s)", p.admin, admin)
	}
	if log := p.log(); strings.Index(log, "waiting for the control plane") > strings.Index(log, "corput serving") {
		t.Fatalf("the gateway served before it waited for its position:\n%s", log)
	}
	position := func() (int, int) { return fleetPosition(t, p.admin) }
	if i, n := position(); i != 0 || n != 2 {
		t.Fatalf("at start: instance %d of %d, want the control plane's 0 of 2", i, n)
	}
	waitfor.Until(t, "/readyz", func() bool { return statusOf(t, "http://"+p.admin+"/readyz") == 200 })
	load := startSteadyLoad(t, "http://"+p.listen+"/x", 8)
	waitfor.Until(t, "the load to start", func() bool { return load.ok.Load() > 100 })
	moved := func(what string, instance, size int) {
		t.Helper()
		waitfor.Until(t, what, func() bool {
			i, n := position()
			return i == instance && n == size
		})
	}

	set(1, 2) // compaction moved it
	moved("the move to 1 of 2", 1, 2)
	writeFileAtomic(t, file, configText([]string{"/extra/"}))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the reload", func() bool { return strings.Contains(p.log(), "configuration reloaded") })
	if i, n := position(); i != 1 || n != 2 {
		t.Errorf("after a SIGHUP: instance %d of %d, want the control plane's 1 of 2 kept", i, n)
	}
	set(1, 3) // a gateway joined
	moved("the resize to 3", 1, 3)

	cp.Stop()
	waitfor.Until(t, "more load with the control plane down", func() bool { return load.ok.Load() > 400 })
	if i, n := position(); i != 1 || n != 3 {
		t.Errorf("with the control plane down: instance %d of %d, want 1 of 3 kept", i, n)
	}
	load.halt()
	load.check(t, "under the control plane's moves")
}

// waitingProbes checks what a gateway waiting for its position answers
// on its admin port: /healthz 200, /readyz 503 with the reason. It
// returns what is wrong, or "".
func waitingProbes(admin string) string {
	var problems []string
	for _, c := range []struct {
		path, body string
		code       int
	}{{"/healthz", "ok", 200}, {"/readyz", "waiting for the fleet position", 503}} {
		resp, err := adminHTTP.Get("http://" + admin + c.path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("while waiting, %s: %v", c.path, err))
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.body) {
			problems = append(problems, fmt.Sprintf("while waiting, %s answered %d %q; want %d and %q", c.path, resp.StatusCode, b, c.code, c.body))
		}
	}
	return strings.Join(problems, "; ")
}

// publish gives gw-a its first position, 0 of 2; it returns what went
// wrong, or "".
func publish(cp *xdstest.Server) string {
	if err := cp.SetFleet("gw-a", discovery.FleetResource(0, 2)); err != nil {
		return err.Error()
	}
	return ""
}

// TestARollingReplaceUnderTheControlPlane: three `corput serve` processes
// placed by a real `corput control-plane` (positions by node id, grace 1
// s), following an origin of 16 endpoints over its EDS (4 subsets of 4;
// 2 loops per gateway). gw-a and gw-b serve; gw-c joins (size 3), gw-a is
// stopped, and after the grace the control plane moves gw-c, the highest,
// into gw-a's position (size 2): a Deployment's rolling update of one pod.
// Under load through gw-b: no request fails, and gw-b opens no connection
// through the join, the leave and the compaction (its subsets never
// change: the cap loops × size stays at or above 4). gw-c's move from 2 of
// 3 to 0 of 2 keeps its frontends' subsets too ((2·2+l) mod 4 = (0·2+l)
// mod 4), so it opens none either.
func TestARollingReplaceUnderTheControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/corput")
	}
	origins := startOrigins(t, 16, testorigin.Options{Classes: fastClass})
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("origins:\n  - name: app\n    subset: {size: 4}\n    endpoints:\n")
	for _, a := range serverAddrs(origins) {
		fmt.Fprintf(&src, "      - {address: %q, zone: z1}\n", a)
	}
	source := filepath.Join(dir, "origins.yaml")
	writeFileAtomic(t, source, src.String())
	cp, err := controlplane.Start(controlplane.Options{Listen: "127.0.0.1:0", StatePath: filepath.Join(dir, "state.json"),
		Source: source, FleetGrace: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	start := func(node string) *serveProcess {
		t.Helper()
		file := filepath.Join(dir, node+".yaml")
		writeFileAtomic(t, file, fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 2
fleet: {server: %[1]q, node_id: %[2]s}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    discovery: {type: xds, server: %[1]q, cluster: app}
    subset: {size: 4}
`, cp.Addr(), node))
		p := startServeWith(t, serveSpec{config: file})
		waitfor.Until(t, node+" /readyz", func() bool { return statusOf(t, "http://"+p.admin+"/readyz") == 200 })
		return p
	}
	at := func(p *serveProcess, what string, instance, size int) {
		t.Helper()
		waitfor.Until(t, what, func() bool {
			i, n := fleetPosition(t, p.admin)
			return i == instance && n == size
		})
	}
	created := func(p *serveProcess) float64 {
		return scrapeAdmin(t, p.admin).sum("corput_upstream_connections_created_total")
	}

	a := start("gw-a")
	b := start("gw-b")
	at(a, "gw-a at 0 of 2", 0, 2)
	at(b, "gw-b at 1 of 2", 1, 2)
	load := startSteadyLoad(t, "http://"+b.listen+"/x", 8)
	waitfor.Until(t, "the load to start", func() bool { return load.ok.Load() > 100 })
	bBefore := created(b)
	if bBefore == 0 {
		t.Fatal("gw-b counted no connection created: the count below would prove nothing")
	}

	c := start("gw-c")
	at(c, "gw-c at 2 of 3", 2, 3)
	at(b, "gw-b at 1 of 3", 1, 3)
	cBefore := created(c)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if exited, err := a.wait(30 * time.Second); !exited || err != nil {
		t.Fatalf("gw-a after SIGTERM: exited %v, %v", exited, err)
	}
	at(c, "the compaction: gw-c moved to 0 of 2", 0, 2)
	at(b, "gw-b at 1 of 2 again", 1, 2)
	want := []controlplane.FleetMember{{Node: "gw-c", Instance: 0, Connected: true}, {Node: "gw-b", Instance: 1, Connected: true}}
	if got := cp.Fleet(); !slices.Equal(got, want) {
		t.Errorf("the control plane's fleet: %+v, want %+v", got, want)
	}
	waitfor.Until(t, "more load after the compaction", func() bool { return load.ok.Load() > 400 })
	load.halt()
	load.check(t, "through a rolling replace")
	if n := created(b) - bBefore; n != 0 {
		t.Errorf("gw-b opened %.0f connections through the join, the leave and the compaction; want 0 (its subsets never changed)", n)
	}
	if n := created(c) - cBefore; n != 0 {
		t.Errorf("gw-c opened %.0f connections for its move from 2 of 3 to 0 of 2; want 0 (the same subsets)", n)
	}
	if !strings.Contains(c.log(), "fleet position changed") {
		t.Errorf("gw-c logged no move:\n%s", c.log())
	}
}
