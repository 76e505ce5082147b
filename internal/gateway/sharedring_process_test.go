package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/cluster"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/testbin"
	"github.com/corput/corput/internal/waitfor"
)

// startControlPlaneProcess runs `corput control-plane` on a source file
// and a state file and returns its ADS address (from its log).
func startControlPlaneProcess(t *testing.T, source, state string) string {
	t.Helper()
	cmd := exec.Command(testbin.Corput(t), "control-plane", "--listen", "127.0.0.1:0", "--admin", "",
		"--source", source, "--state", state, "--debounce", "0s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`control plane: serving.* listen=(\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("corput control-plane did not log its address within 30s")
		return ""
	}
}

// TestLiveFleetOneRingFromTheControlPlane is shared ring indices' live
// check (docs/control-plane.md), every
// part a real process but the origins: `corput control-plane` serves 16
// endpoints (subsets of 4); four `corput serve` gateways (2 loops each)
// start one after the other, an endpoint replaced before each of the
// later ones, so each starts from another membership. Then every
// gateway's /admin/subsets gives the (gateway, loop) pairs that use each
// endpoint on its own instance; summed over the gateways every endpoint
// has the same count, and with fixed pools (prewarm = max_connections =
// 2) the origins' accepted connections per endpoint are that count × 2.
func TestLiveFleetOneRingFromTheControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs corput processes")
	}
	const gateways, loops, perPool = 4, 2, 2
	origins := startOrigins(t, 16+gateways-1, testorigin.Options{Classes: fastClass})
	dir := t.TempDir()
	source, state := filepath.Join(dir, "origins.yaml"), filepath.Join(dir, "state.json")
	members := origins[:16]
	writeSource := func() {
		var b strings.Builder
		b.WriteString("origins:\n  - name: app\n    subset: {size: 4}\n    endpoints:\n")
		for _, s := range members {
			fmt.Fprintf(&b, "      - {address: %q}\n", s.Addr())
		}
		writeFileAtomic(t, source, b.String())
	}
	writeSource()
	cp := startControlPlaneProcess(t, source, state)
	var procs []*serveProcess
	for i := range gateways {
		if i > 0 { // another membership for each later gateway
			members = append(members[1:], origins[16+i-1])
			writeSource()
			want := addrsOfServers(members)
			for j, p := range procs {
				waitfor.Until(t, fmt.Sprintf("gateway %d to follow the change", j), func() bool { return slices.Equal(endpointsOf(t, p), want) })
			}
		}
		cfg := filepath.Join(dir, fmt.Sprintf("gw%d.yaml", i))
		writeFileAtomic(t, cfg, fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: %d
fleet: {instance: %d, size: %d}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    discovery: {type: xds, server: %q, cluster: app, node_id: gw-%d}
    debounce: 0s
    subset: {size: 4}
    pool: {prewarm: %d, max_connections: %d}
`, loops, i, gateways, cp, i, perPool, perPool))
		p := startServeWith(t, serveSpec{config: cfg})
		waitfor.Until(t, fmt.Sprintf("gateway %d ready", i), func() bool { return statusOf(t, "http://"+p.admin+"/readyz") == 200 })
		procs = append(procs, p)
	}
	want := addrsOfServers(members)
	count := map[string]int{}
	for i, p := range procs {
		v := subsetsOf(t, p)
		if v.Placement != "shared" {
			t.Errorf("gateway %d: placement %q, want shared", i, v.Placement)
		}
		for _, e := range v.Endpoints {
			for _, u := range e.Users {
				if u.Gateway == v.Gateway {
					count[e.Address]++
				}
			}
		}
	}
	var per []int
	for _, a := range want {
		per = append(per, count[a])
		if count[a] != count[want[0]] {
			t.Errorf("endpoint %s: %d (gateway, loop) pairs, endpoint %s: %d; want the same count for every endpoint", a, count[a], want[0], count[want[0]])
		}
	}
	// The origins' ground truth: every endpoint holds exactly its pairs'
	// fixed pools open (the pools of endpoints that moved or left have
	// drained), and the endpoints that left hold none.
	expect := func() map[string]int64 {
		out := map[string]int64{}
		for _, s := range origins {
			out[s.Addr()] = int64(perPool * count[s.Addr()])
		}
		return out
	}()
	var open map[string]int64
	if !eventually(10*time.Second, func() bool { open = openConns(origins); return maps.Equal(open, expect) }) {
		t.Errorf("open connections per endpoint %v, want the (gateway, loop) pairs × %d: %v", open, perPool, expect)
	}
	t.Logf("4 gateways started at 4 memberships, 16 endpoints (subsets of 4): (gateway, loop) pairs per endpoint %v; open connections at every endpoint = pairs × %d", per, perPool)
}

// subsetsOf is a process's GET /admin/subsets?origin=app.
func subsetsOf(t *testing.T, p *serveProcess) cluster.SubsetsView {
	t.Helper()
	resp, err := adminHTTP.Get("http://" + p.admin + "/admin/subsets?origin=app")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v cluster.SubsetsView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// endpointsOf is the sorted endpoints of a process's ring for origin app.
func endpointsOf(t *testing.T, p *serveProcess) []string {
	t.Helper()
	var out []string
	for _, e := range subsetsOf(t, p).Endpoints {
		out = append(out, e.Address)
	}
	return sortedCopyOf(out)
}
