package controlplane

import (
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
	"github.com/corput/corput/internal/kubetest"
	"github.com/corput/corput/internal/testbin"
	"github.com/corput/corput/internal/testlog"
	"github.com/corput/corput/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testbin.M(kubetest.M(m))) }

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
	log    *testlog.Buffer
}

func newFixture(t *testing.T, origins map[string][]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, source: filepath.Join(dir, "origins.yaml"), state: filepath.Join(dir, "state.json")}
	writeFile(t, f.source, sourceYAML(origins))
	logger, buf := testlog.New(slog.LevelDebug)
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
	waitfor.Until(f.t, fmt.Sprintf("%s at version %d", origin, v), func() bool { return f.version(origin) == v })
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

// adsStream is one ADS stream of a test gateway: one goroutine answers
// every response on it until close, which the test's end calls too.
type adsStream struct {
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// openADS opens an ADS stream to addr, sends first, and answers each
// response with what answer returns (an ACK or a NACK).
func openADS(t *testing.T, addr string, first *discoveryv3.DiscoveryRequest, answer func(*discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest) *adsStream {
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
	a := &adsStream{conn: conn, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			if err := stream.Send(answer(resp)); err != nil {
				return
			}
		}
	}()
	t.Cleanup(a.close)
	return a
}

// close ends the stream, as a gateway that stops does.
func (a *adsStream) close() {
	a.once.Do(func() {
		a.cancel()
		<-a.done
		a.conn.Close()
	})
}

// adsClient is a minimal ADS client that records every response and
// answers each with an ACK, or a NACK when nack says so.
type adsClient struct {
	*adsStream
	t     *testing.T
	names []string
	nack  func(*discoveryv3.DiscoveryResponse) bool

	mu        sync.Mutex
	responses []response
	accepted  string
}

func dialADS(t *testing.T, addr, node string, names []string, nack func(*discoveryv3.DiscoveryResponse) bool) *adsClient {
	t.Helper()
	c := &adsClient{t: t, names: names, nack: nack}
	c.adsStream = openADS(t, addr, &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: resource.EndpointType, ResourceNames: names}, c.answer)
	return c
}

// answer records resp and ACKs it, or NACKs it when c.nack says so.
func (c *adsClient) answer(resp *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryRequest {
	r := response{version: resp.GetVersionInfo(), nonce: resp.GetNonce(), clusters: map[string]*endpointv3.ClusterLoadAssignment{}}
	for _, a := range resp.GetResources() {
		var cla endpointv3.ClusterLoadAssignment
		if err := a.UnmarshalTo(&cla); err == nil {
			r.clusters[cla.GetClusterName()] = &cla
		}
	}
	next := &discoveryv3.DiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNames: c.names, ResponseNonce: resp.GetNonce()}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.responses = append(c.responses, r)
	if c.nack != nil && c.nack(resp) {
		next.VersionInfo = c.accepted
		next.ErrorDetail = &statuspb.Status{Code: 3, Message: "test NACK of " + resp.GetVersionInfo()}
	} else {
		c.accepted = resp.GetVersionInfo()
		next.VersionInfo = c.accepted
	}
	return next
}

func (c *adsClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.responses)
}

// wait waits for the n-th response (1-based) and returns it.
func (c *adsClient) wait(n int) response {
	c.t.Helper()
	waitfor.Until(c.t, fmt.Sprintf("response %d", n), func() bool { return c.count() >= n })
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.responses[n-1]
}

// xdsClient runs corput's own xDS client (the gateway's) against addr and
// records every membership it emits.
type xdsClient struct {
	x *discovery.XDS
	*emissions[discovery.Update]
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
	x, err := discovery.NewXDS(clientConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return &xdsClient{x: x, emissions: record(t, x.Run)}
}

// clientConfig is cfg with a test's retry backoff (20 to 100 ms) and, if
// it has none, a logger.
func clientConfig(cfg discovery.XDSConfig) discovery.XDSConfig {
	cfg.BackoffBase, cfg.BackoffMax = 20*time.Millisecond, 100*time.Millisecond
	if cfg.Logger == nil {
		cfg.Logger, _ = testlog.New(slog.LevelDebug)
	}
	return cfg
}

// emissions are the values a gateway's xDS client (discovery.XDS or
// FleetXDS) emitted while it ran.
type emissions[T any] struct {
	stop func() // ends Run, as a gateway that stops; the test's end calls it too

	mu  sync.Mutex
	got []T
}

// record runs run (a client's Run) until stop, recording every value it
// emits.
func record[T any](t *testing.T, run func(context.Context, func(T)) error) *emissions[T] {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e := &emissions[T]{stop: sync.OnceFunc(func() { cancel(); <-done })}
	go func() {
		defer close(done)
		_ = run(ctx, func(v T) {
			e.mu.Lock()
			e.got = append(e.got, v)
			e.mu.Unlock()
		})
	}()
	t.Cleanup(e.stop)
	return e
}

// emitted is every value emitted so far, in order.
func (e *emissions[T]) emitted() []T {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}
