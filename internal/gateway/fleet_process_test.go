package gateway

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/discovery/xdstest"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/poll"
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
	writeFileAtomic(t, file, serveConfig(nil, origins, fleet))
	set := func(instance, size int) {
		t.Helper()
		if err := cp.SetFleet("gw-a", discovery.FleetResource(instance, size)); err != nil {
			t.Fatal(err)
		}
	}
	// The position is published only once the gateway has asked for it:
	// a gateway that served before would log its addresses first.
	asked := make(chan bool, 1)
	go func() {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if slices.ContainsFunc(cp.Requests(), func(r *discoveryv3.DiscoveryRequest) bool {
				return r.GetTypeUrl() == discovery.FleetType && slices.Equal(r.GetResourceNames(), []string{"gw-a"})
			}) {
				asked <- cp.SetFleet("gw-a", discovery.FleetResource(0, 2)) == nil
				return
			}
		}
		asked <- false
	}()
	p := startServeWith(t, serveSpec{config: file})
	if !<-asked {
		t.Fatal("the gateway never asked for its position as node gw-a")
	}
	if log := p.log(); strings.Index(log, "waiting for the control plane") > strings.Index(log, "corput serving") {
		t.Fatalf("the gateway served before it waited for its position:\n%s", log)
	}
	position := func() (int, int) { return fleetPosition(t, p.admin) }
	if i, n := position(); i != 0 || n != 2 {
		t.Fatalf("at start: instance %d of %d, want the control plane's 0 of 2", i, n)
	}
	poll.Until(t, "/readyz", func() bool { return statusOf(t, "http://"+p.admin+"/readyz") == 200 })
	load := startSteadyLoad(t, "http://"+p.listen+"/x", 8)
	poll.Until(t, "the load to start", func() bool { return load.ok.Load() > 100 })
	moved := func(what string, instance, size int) {
		t.Helper()
		poll.Until(t, what, func() bool {
			i, n := position()
			return i == instance && n == size
		})
	}

	set(1, 2) // compaction moved it
	moved("the move to 1 of 2", 1, 2)
	writeFileAtomic(t, file, serveConfig([]string{"/extra/"}, origins, fleet))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the reload", func() bool { return strings.Contains(p.log(), "configuration reloaded") })
	if i, n := position(); i != 1 || n != 2 {
		t.Errorf("after a SIGHUP: instance %d of %d, want the control plane's 1 of 2 kept", i, n)
	}
	set(1, 3) // a gateway joined
	moved("the resize to 3", 1, 3)

	cp.Stop()
	poll.Until(t, "more load with the control plane down", func() bool { return load.ok.Load() > 400 })
	if i, n := position(); i != 1 || n != 3 {
		t.Errorf("with the control plane down: instance %d of %d, want 1 of 3 kept", i, n)
	}
	load.halt()
	load.check(t, "under the control plane's moves")
}
