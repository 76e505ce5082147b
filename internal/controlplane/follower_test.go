package controlplane

import (
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

// A follower (--follow) serves the writer's persisted state read-only:
// the same indices and subset counts, the writer's changes as they are
// written, and — with the writer down — the last state it wrote, so a
// gateway connecting to the follower meanwhile gets the fleet's indices.
func TestFollowerServesTheWritersIndices(t *testing.T) {
	f := newFixture(t, map[string][]string{"payments": endpoints(11001, 80)})
	writer := f.start()
	logger, _ := testlog.New(slog.LevelDebug)
	fl, err := Start(Options{Listen: "127.0.0.1:0", StatePath: f.state, Follow: true, FollowInterval: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.Close)
	if !fl.Ready() {
		t.Fatal("a follower of an existing state is not ready")
	}
	fromWriter := dialADS(t, writer.Addr(), "gw-0", []string{"payments"}, nil)
	fromFollower := dialADS(t, fl.Addr(), "gw-1", []string{"payments"}, nil)
	w, ws := indicesOf(t, fromWriter.wait(1).clusters["payments"])
	r, rs := indicesOf(t, fromFollower.wait(1).clusters["payments"])
	if !maps.Equal(w, r) || ws != rs {
		t.Fatal("the follower serves other indices than the writer")
	}

	f.setSource(map[string][]string{"payments": append(endpoints(11001, 80), "127.0.0.1:19000")})
	w, _ = indicesOf(t, fromWriter.wait(2).clusters["payments"])
	r, _ = indicesOf(t, fromFollower.wait(2).clusters["payments"])
	if !maps.Equal(w, r) || r["127.0.0.1:19000"] != 80 {
		t.Fatal("the follower did not follow the writer's change")
	}
	if fl.State().Origins["payments"].Version != 2 {
		t.Fatalf("the follower holds version %d, want the writer's 2", fl.State().Origins["payments"].Version)
	}

	writer.Close()
	late := dialADS(t, fl.Addr(), "gw-2", []string{"payments"}, nil)
	got, _ := indicesOf(t, late.wait(1).clusters["payments"])
	if !maps.Equal(got, w) {
		t.Fatal("with the writer down, the follower does not serve its last state")
	}
	// A follower never writes: the state file is the writer's last.
	before := f.cp.State()
	time.Sleep(50 * time.Millisecond)
	if s := fl.State(); !slices.Equal(s.Origins["payments"].Endpoints, before.Origins["payments"].Endpoints) {
		t.Fatal("the follower's state moved without the writer")
	}
	waitfor.Until(t, "the follower to stay ready", fl.Ready)
}
