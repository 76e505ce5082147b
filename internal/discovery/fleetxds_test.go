package discovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery/xdstest"
	"github.com/corput/corput/internal/waitfor"
)

func TestFleetFromResource(t *testing.T) {
	pos := func(fields map[string]any) *anypb.Any {
		s, err := structpb.NewStruct(fields)
		if err != nil {
			t.Fatal(err)
		}
		a, err := anypb.New(s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	good, err := anypb.New(FleetResource(2, 5))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := FleetFromResource(good); err != nil || f.Instance != 2 || f.Size != 5 || f.InstanceFrom != "control plane" {
		t.Fatalf("FleetFromResource(FleetResource(2, 5)) = %+v, %v", f, err)
	}
	other, _ := anypb.New(&structpb.Value{})
	for _, c := range []struct {
		a    *anypb.Any
		want string
	}{
		{pos(map[string]any{"instance": 2, "size": 2}), "instance 2 of size 2"},
		{pos(map[string]any{"instance": 0, "size": 0}), "instance 0 of size 0"},
		{pos(map[string]any{"instance": 1.5, "size": 4}), `"instance" is 1.5`},
		{pos(map[string]any{"instance": -1, "size": 4}), `"instance" is -1`},
		{pos(map[string]any{"instance": "1", "size": 4}), `"instance" is 1, want a whole number`},
		{pos(map[string]any{"size": 4}), `no "instance" field`},
		{pos(map[string]any{"instance": 0, "size": MaxFleetSize + 1}), `"size" is`},
		{other, "want " + FleetType},
	} {
		if _, err := FleetFromResource(c.a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v; want it to say %q", c.a, err, c.want)
		}
	}
}

// TestFleetXDSFollowsItsPosition: the client subscribes to the resource
// named by its node id, emits each new position once, NACKs an invalid one
// keeping the last, says so while the control plane is down, and follows a
// restarted one.
func TestFleetXDSFollowsItsPosition(t *testing.T) {
	cp := xdstest.New(t, "127.0.0.1:0")
	set := func(s *xdstest.Server, inst, size int) {
		t.Helper()
		if err := s.SetFleet(testNode, FleetResource(inst, size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.SetFleet("gw-other", FleetResource(0, 2)); err != nil {
		t.Fatal(err)
	}
	set(cp, 1, 2)
	cfg := testXDSConfig(cp.Addr(), clock.Real())
	src, err := NewFleetXDS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Fleet, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, func(f Fleet) { got <- f }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	})
	next := func() Fleet {
		t.Helper()
		select {
		case f := <-got:
			return f
		case <-time.After(10 * time.Second):
			t.Fatal("no fleet position emitted")
			return Fleet{}
		}
	}
	quiet := func(when string) {
		t.Helper()
		select {
		case f := <-got:
			t.Fatalf("%s: emitted %+v", when, f)
		default:
		}
	}

	if f := next(); f.Instance != 1 || f.Size != 2 {
		t.Fatalf("first position %+v; want 1 of 2 (another node's resource must not reach it)", f)
	}
	for _, r := range cp.Requests() {
		if r.GetTypeUrl() == FleetType && (len(r.GetResourceNames()) != 1 || r.GetResourceNames()[0] != testNode) {
			t.Fatalf("asked for %v; want exactly its node id %q", r.GetResourceNames(), testNode)
		}
	}
	set(cp, 1, 3) // another gateway joined
	if f := next(); f.Instance != 1 || f.Size != 3 {
		t.Fatalf("after a join: %+v; want 1 of 3", f)
	}

	// An invalid position is NACKed; the last one stays, nothing emitted.
	if err := cp.SetFleet(testNode, FleetResource(3, 3)); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "a NACK", func() bool { return len(cp.NACKs()) > 0 })
	if msg := cp.NACKs()[0].GetErrorDetail().GetMessage(); !strings.Contains(msg, "instance 3 of size 3") {
		t.Fatalf("NACK says %q", msg)
	}
	if err := src.Err(); err == nil || !strings.Contains(err.Error(), "keeping the last accepted fleet position") {
		t.Fatalf("Err() = %v", err)
	}
	quiet("after the NACK")
	set(cp, 0, 2) // compaction moved it
	if f := next(); f.Instance != 0 || f.Size != 2 {
		t.Fatalf("after a move: %+v; want 0 of 2", f)
	}
	waitfor.Until(t, "Err to clear", func() bool { return src.Err() == nil })

	// Down: the last position stays, and Err says so; back: followed.
	addr := cp.Addr()
	cp.Stop()
	waitfor.Until(t, "Err to report the outage", func() bool {
		err := src.Err()
		return err != nil && strings.Contains(err.Error(), "keeping the last known fleet position")
	})
	quiet("while the control plane was down")
	cp2 := xdstest.New(t, addr)
	set(cp2, 0, 2)
	set(cp2, 0, 4)
	// Run emits only changes: 0 of 2 again is none.
	if f := next(); f.Instance != 0 || f.Size != 4 {
		t.Fatalf("after the restart: %+v; want 0 of 4 (and 0 of 2, unchanged, not emitted)", f)
	}
}

func TestNewFleetXDSValidates(t *testing.T) {
	for _, c := range []struct {
		cfg  XDSConfig
		want string
	}{
		{XDSConfig{Server: "nohostport", NodeID: "a"}, "fleet.server"},
		{XDSConfig{Server: "127.0.0.1:1"}, "fleet.node_id"},
	} {
		if _, err := NewFleetXDS(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewFleetXDS(%+v) = %v; want an error naming %s", c.cfg, err, c.want)
		}
	}
}
