package xdstest

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/corput/corput/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCLAGroupsLocalitiesByZoneAndPriority(t *testing.T) {
	c := CLA("c",
		Endpoint{Addr: "10.0.0.1:80", Zone: "a", Weight: 3, Health: corev3.HealthStatus_HEALTHY},
		Endpoint{Addr: "[fd00::1]:81", Zone: "b"},
		Endpoint{Addr: "10.0.0.2:82", Zone: "a", Priority: 1},
		Endpoint{Addr: "10.0.0.3:83", Zone: "a"},
	)
	if len(c.Endpoints) != 3 {
		t.Fatalf("%d localities, want 3 (a/0, b/0, a/1)", len(c.Endpoints))
	}
	a0 := c.Endpoints[0]
	if a0.GetLocality().GetZone() != "a" || a0.GetPriority() != 0 || len(a0.LbEndpoints) != 2 {
		t.Fatalf("first locality %v; want zone a, priority 0, two endpoints", a0)
	}
	first := a0.LbEndpoints[0]
	sock := first.GetEndpoint().GetAddress().GetSocketAddress()
	if sock.GetAddress() != "10.0.0.1" || sock.GetPortValue() != 80 || first.GetLoadBalancingWeight().GetValue() != 3 ||
		first.GetHealthStatus() != corev3.HealthStatus_HEALTHY {
		t.Fatalf("first endpoint %v", first)
	}
	if b := c.Endpoints[1].LbEndpoints[0]; b.GetLoadBalancingWeight() != nil ||
		b.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() != "fd00::1" {
		t.Fatalf("second locality's endpoint %v; want host fd00::1 and no weight", b)
	}
	if p := c.Endpoints[2].GetPriority(); p != 1 {
		t.Fatalf("third locality has priority %d, want 1", p)
	}
}

// A raw ADS stream: the server answers with what Set published and
// records the ACK and the NACK; Stop is idempotent and the address can be
// served again.
func TestServerRecordsACKsAndNACKs(t *testing.T) {
	s := New(t, "127.0.0.1:0")
	s.MustSet(t, "n", "1", CLA("c", Endpoint{Addr: "10.0.0.1:80"}))

	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "n"}, TypeUrl: resource.EndpointType, ResourceNames: []string{"c"}}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetVersionInfo() != "1" || len(resp.GetResources()) != 1 {
		t.Fatalf("response version %q with %d resources; want 1 and 1", resp.GetVersionInfo(), len(resp.GetResources()))
	}
	if s.Acked("1") {
		t.Fatal("Acked before any ACK was sent")
	}
	ack := proto.Clone(req).(*discoveryv3.DiscoveryRequest)
	ack.VersionInfo, ack.ResponseNonce = "1", resp.GetNonce()
	nack := proto.Clone(ack).(*discoveryv3.DiscoveryRequest)
	nack.ErrorDetail = &status.Status{Message: "bad"}
	for _, r := range []*discoveryv3.DiscoveryRequest{ack, nack} {
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Until(t, "the server to record 3 requests", func() bool { return len(s.Requests()) >= 3 })
	if !s.Acked("1") || s.Acked("2") {
		t.Fatalf("Acked(1) = %v, Acked(2) = %v; want true, false", s.Acked("1"), s.Acked("2"))
	}
	if n := s.NACKs(); len(n) != 1 || n[0].GetErrorDetail().GetMessage() != "bad" {
		t.Fatalf("NACKs %v; want the one sent", n)
	}

	addr := s.Addr()
	s.Stop()
	s.Stop()
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the stream survived Stop")
	}
	again := New(t, addr)
	if again.Addr() != addr {
		t.Fatalf("restarted on %s, want %s", again.Addr(), addr)
	}
}
