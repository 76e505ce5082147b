package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/corput/corput/internal/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// keepProcs stops Run from raising this test process's GOMAXPROCS: the
// variable, set, is what scaleProcs leaves alone.
func keepProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", strconv.Itoa(runtime.GOMAXPROCS(0)))
}

// writeConfig writes text as a config file in a temporary directory.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "corput.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// gatewayConfig is a config serving one origin, at origin, on fresh
// ports, with top's keys first.
func gatewayConfig(top, origin string) string {
	return fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 2\n%sroutes: [{path_prefix: /, origin: a}]\norigins: [{name: a, endpoints: [{address: %q}]}]\n", top, origin)
}

// run is one Run in the background, with its log.
type run struct {
	log  *testlog.Buffer
	done chan error
}

// start runs Run with o (its Logger and Diagnostics given here) until the
// test ends or ctx does.
func start(t *testing.T, ctx context.Context, o Options) *run {
	t.Helper()
	keepProcs(t)
	r := &run{done: make(chan error, 1)}
	o.Logger, r.log = testlog.New(slog.LevelInfo)
	o.Diagnostics = r.log
	ctx, cancel := context.WithCancel(ctx)
	go func() { r.done <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// attr is the value of key in the first line of r's log whose message is
// msg, or "".
func (r *run) attr(msg, key string) string {
	re := regexp.MustCompile(`msg="?` + regexp.QuoteMeta(msg) + `"? .*\b` + regexp.QuoteMeta(key) + `=(\S+)`)
	if m := re.FindStringSubmatch(r.log.String()); m != nil {
		return m[1]
	}
	return ""
}

// get is path's status and body at addr, or 0 when nothing answers.
func get(addr, path string) (int, string) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// freeAddr is a loopback address nothing listens on (for a moment).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
