package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/poll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// value reads a counter or gauge.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func testLogger() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// endpoints returns n addresses 127.0.0.1:(base+i); none needs to listen.
func endpoints(base, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", base+i)
	}
	return out
}

// sourceYAML renders a source file: origin name → addresses (zone "z1",
// weight 1).
func sourceYAML(origins map[string][]string) string {
	var b strings.Builder
	b.WriteString("origins:\n")
	for _, name := range sortedKeys(origins) {
		fmt.Fprintf(&b, "  - name: %s\n    endpoints:\n", name)
		if len(origins[name]) == 0 {
			b.WriteString("      []\n")
		}
		for _, a := range origins[name] {
			fmt.Fprintf(&b, "      - {address: %q, zone: z1}\n", a)
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// writeFile replaces path's content atomically, as an editor or a
// ConfigMap does.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// fixture is a control plane over a source file in a temporary directory.
type fixture struct {
	t      *testing.T
	dir    string
	source string
	state  string
	opts   Options
	cp     *ControlPlane
	log    *logBuffer
}

func newFixture(t *testing.T, origins map[string][]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, source: filepath.Join(dir, "origins.yaml"), state: filepath.Join(dir, "state.json")}
	writeFile(t, f.source, sourceYAML(origins))
	logger, buf := testLogger()
	f.log = buf
	f.opts = Options{Listen: "127.0.0.1:0", StatePath: f.state, Source: f.source, Debounce: 50 * time.Millisecond, Logger: logger}
	return f
}

// start starts the control plane (again: on the address it had).
func (f *fixture) start() *ControlPlane {
	f.t.Helper()
	if f.cp != nil {
		f.opts.Listen = f.cp.Addr()
	}
	cp, err := Start(f.opts)
	if err != nil {
		f.t.Fatalf("start: %v", err)
	}
	f.cp = cp
	f.t.Cleanup(cp.Close)
	return cp
}

func (f *fixture) setSource(origins map[string][]string) {
	f.t.Helper()
	writeFile(f.t, f.source, sourceYAML(origins))
}

// version is the persisted version of an origin.
func (f *fixture) version(origin string) uint64 {
	a := f.cp.State().Origins[origin]
	if a == nil {
		return 0
	}
	return a.Version
}

// waitVersion waits until origin's persisted version is v.
func (f *fixture) waitVersion(origin string, v uint64) {
	f.t.Helper()
	poll.Until(f.t, fmt.Sprintf("%s at version %d", origin, v), func() bool { return f.version(origin) == v })
}

// response is one EDS response as a raw client decoded it.
type response struct {
	version  string
	nonce    string
	clusters map[string]*endpointv3.ClusterLoadAssignment
}

// indices is the address → ring_index map of one cluster of a response,
// and its ring_subsets (the same on every endpoint, or the test fails).
func indicesOf(t *testing.T, cla *endpointv3.ClusterLoadAssignment) (map[string]int, int) {
	t.Helper()
	out := map[string]int{}
	subsets := -1
	for _, loc := range cla.GetEndpoints() {
		for _, lbe := range loc.GetLbEndpoints() {
			sa := lbe.GetEndpoint().GetAddress().GetSocketAddress()
			addr := fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue())
			i, s, ok := RingMetadata(lbe)
			if !ok {
				t.Fatalf("cluster %s endpoint %s has no corput ring metadata", cla.GetClusterName(), addr)
			}
			if subsets >= 0 && s != subsets {
				t.Fatalf("cluster %s: ring_subsets %d and %d on one origin", cla.GetClusterName(), s, subsets)
			}
			subsets = s
			out[addr] = i
		}
	}
	return out, subsets
}

// adsStream is one ADS stream of a test gateway, opened with its first
// request sent; close cuts it.
type adsStream struct {
	conn   *grpc.ClientConn
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	cancel context.CancelFunc
}

func openADS(t *testing.T, addr string, first *discoveryv3.DiscoveryRequest) adsStream {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	return adsStream{conn, stream, cancel}
}

// adsClient is a minimal ADS client that records every response and
// answers each with an ACK, or a NACK when nack says so.
type adsClient struct {
	t      *testing.T
	conn   *grpc.ClientConn
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	names  []string
	nack   func(*discoveryv3.DiscoveryResponse) bool
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	responses []response
	accepted  string
}

func dialADS(t *testing.T, addr, node string, names []string, nack func(*discoveryv3.DiscoveryResponse) bool) *adsClient {
	t.Helper()
	a := openADS(t, addr, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: resource.EndpointType, ResourceNames: names})
	c := &adsClient{t: t, conn: a.conn, stream: a.stream, names: names, nack: nack, cancel: a.cancel, done: make(chan struct{})}
	go c.run()
	t.Cleanup(c.close)
	return c
}

func (c *adsClient) run() {
	defer close(c.done)
	for {
		resp, err := c.stream.Recv()
		if err != nil {
			return
		}
		r := response{version: resp.GetVersionInfo(), nonce: resp.GetNonce(), clusters: map[string]*endpointv3.ClusterLoadAssignment{}}
		for _, a := range resp.GetResources() {
			var cla endpointv3.ClusterLoadAssignment
			if err := a.UnmarshalTo(&cla); err == nil {
				r.clusters[cla.GetClusterName()] = &cla
			}
		}
		next := &discoveryv3.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: c.names, ResponseNonce: resp.GetNonce()}
		c.mu.Lock()
		c.responses = append(c.responses, r)
		if c.nack != nil && c.nack(resp) {
			next.VersionInfo = c.accepted
			next.ErrorDetail = &statuspb.Status{Code: 3, Message: "test NACK of " + resp.GetVersionInfo()}
		} else {
			c.accepted = resp.GetVersionInfo()
			next.VersionInfo = c.accepted
		}
		c.mu.Unlock()
		if err := c.stream.Send(next); err != nil {
			return
		}
	}
}

func (c *adsClient) close() {
	c.cancel()
	<-c.done
	c.conn.Close()
}

func (c *adsClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.responses)
}

// wait waits for the n-th response (1-based) and returns it.
func (c *adsClient) wait(n int) response {
	c.t.Helper()
	poll.Until(c.t, fmt.Sprintf("response %d", n), func() bool { return c.count() >= n })
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.responses[n-1]
}

// xdsClient runs corput's own xDS client (the gateway's) against addr and
// records every membership it emits.
type xdsClient struct {
	x      *discovery.XDS
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	updates []discovery.Update
}

func runXDS(t *testing.T, addr, node string, clusters ...string) *xdsClient {
	t.Helper()
	return runXDSWith(t, discovery.XDSConfig{Server: addr, NodeID: node}, clusters...)
}

// runXDSWith runs corput's own xDS client (the gateway's) as cfg says,
// following clusters, and records every membership it emits.
func runXDSWith(t *testing.T, cfg discovery.XDSConfig, clusters ...string) *xdsClient {
	t.Helper()
	cfg.Clusters = map[string]string{}
	for _, c := range clusters {
		cfg.Clusters[c] = c
	}
	cfg.BackoffBase, cfg.BackoffMax = 20*time.Millisecond, 100*time.Millisecond
	if cfg.Logger == nil {
		cfg.Logger, _ = testLogger()
	}
	x, err := discovery.NewXDS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &xdsClient{x: x, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		_ = x.Run(ctx, func(u discovery.Update) {
			c.mu.Lock()
			c.updates = append(c.updates, u)
			c.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func (c *xdsClient) emitted() []discovery.Update {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]discovery.Update(nil), c.updates...)
}
