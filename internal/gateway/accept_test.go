package gateway

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/corput/corput/internal/accept"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/proxyproto"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

// A downstream listener that can no longer accept (its socket closed under
// it, not by Shutdown) makes the gateway neither ready nor live, and the
// log says so at error level — on the fast path and on net/http's.
func TestAListenerThatStopsMakesTheGatewayNotLive(t *testing.T) {
	for _, fast := range []bool{true, false} {
		name := map[bool]string{true: "fast path", false: "net/http path"}[fast]
		t.Run(name, func(t *testing.T) {
			origins := startOrigins(t, 1, testorigin.Options{})
			logger, logs := testlog.New(slog.LevelInfo)
			extra := ""
			if !fast {
				extra = "downstream: {fast_path: false}\n"
			}
			g := startGateway(t, extra+cfgText(1, ""), origins,
				Options{Logger: logger})
			if !g.Live() || !g.Ready() {
				t.Fatalf("a started gateway: live %v, ready %v", g.Live(), g.Ready())
			}
			g.mu.Lock()
			ln := g.cur[listenIdx]
			g.mu.Unlock()
			if pl, ok := ln.(*proxyproto.Listener); ok {
				ln = pl.Listener
			}
			al, ok := ln.(*accept.Listener)
			if !ok {
				t.Fatalf("the downstream listener is a %T, not an accept.Listener", ln)
			}
			al.Listener.Close() // the socket, not the wrapper: as a fault would
			waitfor.Until(t, "the gateway to report not live", func() bool { return !g.Live() })
			if g.Ready() {
				t.Error("ready with a dead listener")
			}
			for path, want := range map[string]int{"/healthz": 503, "/readyz": 503} {
				resp, err := http.Get("http://" + g.AdminAddr() + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("%s = %d, want %d", path, resp.StatusCode, want)
				}
			}
			if log := logs.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "listener stopped accepting") {
				t.Errorf("no error logged:\n%s", log)
			}
		})
	}
}
