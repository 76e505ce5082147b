package dashboard

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/gateway"
	testorigin "github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/telemetry"
	"github.com/corput/corput/internal/workload"
)

// fleet is a real gateway on loopback in front of real origins, with a
// Dashboard mounted on its admin listener.
type fleet struct {
	origins []*testorigin.Server
	gw      *gateway.Gateway
	dash    *Dashboard
	admin   string // http://ADDR
	target  string // http://ADDR
}

// startFleet starts n origins (the one at index failing always answers 500,
// none when failing < 0) and a gateway whose config is yaml with ENDPOINTS
// replaced by their list, zones cycling over us-east-1a/b/c.
func startFleet(t testing.TB, n, failing int, yaml string, opts Options) *fleet {
	t.Helper()
	f := &fleet{}
	var eps []string
	for i := range n {
		o := testorigin.Options{ID: fmt.Sprintf("o%d", i), Classes: []workload.Class{
			{Name: "light", Latency: 15 * time.Millisecond}, {Name: "heavy", Latency: 140 * time.Millisecond}}}
		if i == failing {
			o.ErrorRate = 1
		}
		srv, err := testorigin.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		f.origins = append(f.origins, srv)
		eps = append(eps, fmt.Sprintf("{address: %q, zone: us-east-1%c}", srv.Addr(), 'a'+i%3))
	}
	cfg, err := config.Parse([]byte(strings.ReplaceAll(yaml, "ENDPOINTS", "["+strings.Join(eps, ", ")+"]")), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts.Metrics = telemetry.New()
	f.dash = New(opts)
	f.gw, err = gateway.New(cfg, gateway.Options{Metrics: opts.Metrics, Dashboard: f.dash,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.dash.Close()
		t.Fatal(err)
	}
	if err := f.gw.Start(); err != nil {
		f.dash.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.gw.Close()
		f.dash.Close()
	})
	for deadline := time.Now().Add(10 * time.Second); !f.gw.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("gateway not ready within 10s")
		}
	}
	f.admin, f.target = "http://"+f.gw.AdminAddr(), "http://"+f.gw.Addr()
	return f
}

// get fetches url and returns the status, content type and body.
func get(t testing.TB, c *http.Client, url string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// acceptedConnections is the origins' ground truth: TCP connections they
// accepted from the gateway.
func (f *fleet) acceptedConnections() int64 {
	var n int64
	for _, o := range f.origins {
		n += o.Stats().Connections.Accepted
	}
	return n
}
