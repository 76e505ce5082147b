package health

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/health/healthtest"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/upstream"
)

// grpcRig is one grpc-go server on a real socket (h2c) and a second
// endpoint that answers, a balancer and an HTTP/2 pool each, on a fake
// clock, with a Checker using the gRPC health protocol.
type grpcRig struct {
	clk   *clock.Fake
	bal   *balance.Origin
	pools map[string]*pool.Pool
	c     *Checker
}

func (r *grpcRig) ProbePool(addr string) (*pool.Pool, bool) { return r.pools[addr], true }

// startGRPC serves a grpc-go server with the standard health service
// (nil: without it) on 127.0.0.1.
func startGRPC(t *testing.T, hs *grpchealth.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	if hs != nil {
		healthpb.RegisterHealthServer(srv, hs)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return ln.Addr().String()
}

func newGRPCRig(t *testing.T, service string, addrs ...string) *grpcRig {
	t.Helper()
	r := &grpcRig{clk: clock.NewFake(time.Unix(1000, 0)), pools: map[string]*pool.Pool{}}
	var ms []balance.Member
	for _, a := range addrs {
		ms = append(ms, balance.Member{Address: a})
	}
	r.bal = warmPools(t, r.clk, "rpc", upstream.H2C, 1, ms, r.pools)
	oc := config.DefaultOrigin()
	oc.Name, oc.Protocol = "rpc", config.ProtocolH2C
	hc := check()
	hc.GRPC = &config.GRPCHealthCheck{Service: service}
	oc.HealthCheck = &hc
	r.c = New(Env{Origin: "rpc", Clock: r.clk, Seed: 5, Balance: r.bal, Pools: r})
	r.c.Configure(&oc)
	r.c.Sync(addrs)
	t.Cleanup(func() {
		r.c.Close()
		for _, p := range r.pools {
			p.Close()
		}
		r.bal.Close()
	})
	return r
}

// run advances the fake clock by d, a timer at a time, letting each
// probe end.
func (r *grpcRig) run(t *testing.T, d time.Duration) {
	healthtest.Advance(t, r.clk, d, func() bool { return r.c.InFlight() == 0 })
}

func (r *grpcRig) lastResult(addr string) string {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.targets[addr].lastResult
}

// TestGRPCHealthServerNotServingIsEjected: a grpc-go health server that
// answers SERVING passes; switched to NOT_SERVING it fails its checks and
// is ejected; SERVING again, it returns.
func TestGRPCHealthServerNotServingIsEjected(t *testing.T) {
	hs := grpchealth.NewServer()
	hs.SetServingStatus("pay", healthpb.HealthCheckResponse_SERVING)
	x := startGRPC(t, hs)
	other := grpchealth.NewServer()
	other.SetServingStatus("pay", healthpb.HealthCheckResponse_SERVING)
	y := startGRPC(t, other)
	r := newGRPCRig(t, "pay", x, y)
	r.run(t, 3*time.Second)
	if st := r.c.State(x); st != Healthy {
		t.Fatalf("SERVING: state %s (last %q)", st, r.lastResult(x))
	}
	hs.SetServingStatus("pay", healthpb.HealthCheckResponse_NOT_SERVING)
	r.run(t, 3*time.Second)
	if st := r.c.State(x); st != Unhealthy || r.lastResult(x) != "grpc: NOT_SERVING" {
		t.Fatalf("NOT_SERVING: state %s, last %q; want unhealthy, grpc: NOT_SERVING", st, r.lastResult(x))
	}
	if s := r.bal.Endpoint(x).Status(); !s.Ejected || s.EjectedBy != balance.ReasonHealthCheck {
		t.Fatalf("NOT_SERVING: %+v; want ejected by health_check", s)
	}
	if r.c.State(y) != Healthy {
		t.Fatal("the other server is not healthy")
	}
	hs.SetServingStatus("pay", healthpb.HealthCheckResponse_SERVING)
	r.run(t, 3*time.Second)
	if r.bal.Endpoint(x).Status().Ejected {
		t.Fatal("SERVING again, still ejected")
	}
}

// TestGRPCErrorStatusWithHTTP200Fails: a gRPC server without the health
// service answers HTTP 200 with grpc-status 12 (UNIMPLEMENTED); a server
// asked about a service it does not know answers grpc-status 5
// (NOT_FOUND). Both fail the check.
func TestGRPCErrorStatusWithHTTP200Fails(t *testing.T) {
	bare := startGRPC(t, nil)
	hs := grpchealth.NewServer()
	known := startGRPC(t, hs)
	r := newGRPCRig(t, "nosuch", bare, known)
	r.run(t, 3*time.Second)
	for addr, want := range map[string]string{bare: "grpc-status 12", known: "grpc-status 5"} {
		if st, got := r.c.State(addr), r.lastResult(addr); st != Unhealthy || got != want {
			t.Errorf("%s: state %s, last %q; want unhealthy, %q", addr, st, got, want)
		}
	}
}

// TestServingStatus reads HealthCheckResponse frames.
func TestServingStatus(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		st   uint64
		okay bool
	}{
		{[]byte{0, 0, 0, 0, 2, 0x08, 0x01}, 1, true},
		{[]byte{0, 0, 0, 0, 2, 0x08, 0x02}, 2, true},
		{[]byte{0, 0, 0, 0, 0}, 0, true},                              // status omitted: UNKNOWN
		{[]byte{0, 0, 0, 0, 5, 0x12, 0x01, 'x', 0x08, 0x01}, 1, true}, // an unknown field skipped
		{[]byte{1, 0, 0, 0, 2, 0x08, 0x01}, 0, false},                 // compressed
		{[]byte{0, 0, 0, 0, 9, 0x08, 0x01}, 0, false},                 // short
		{nil, 0, false},
	} {
		st, ok := servingStatus(c.b)
		if st != c.st || ok != c.okay {
			t.Errorf("servingStatus(%x) = %d, %v; want %d, %v", c.b, st, ok, c.st, c.okay)
		}
	}
	if got := grpcRequest("pay"); string(got) != "\x00\x00\x00\x00\x05\x0a\x03pay" {
		t.Errorf("grpcRequest(pay) = %q", got)
	}
}
