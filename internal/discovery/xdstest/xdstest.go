// Package xdstest runs a real go-control-plane ADS server — its snapshot
// cache behind its gRPC server — on loopback, for tests of xDS clients.
//
// A Server records every DiscoveryRequest its streams receive, so a test
// can wait for the ACK of a version it published (Acked) or inspect the
// NACKs (NACKs). Stopping a server cuts its streams; starting another on
// the same address, with a fresh cache, is how a test restarts the control
// plane. CLA builds the ClusterLoadAssignment a test publishes. Besides
// EDS from a snapshot cache per node, a server serves fleet positions
// (discovery.FleetType, one resource per node id) from a linear cache:
// SetFleet.
package xdstest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Server is a running ADS server.
type Server struct {
	addr   string
	cache  cachev3.SnapshotCache
	fleet  *cachev3.LinearCache
	grpc   *grpc.Server
	cancel context.CancelFunc
	served chan struct{}

	mu       sync.Mutex // guards requests
	requests []*discoveryv3.DiscoveryRequest
}

// Start serves ADS on addr: "127.0.0.1:0" for a fresh port, or the address
// of a stopped server to restart the control plane there.
func Start(addr string) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("xds control plane: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		addr: lis.Addr().String(), cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil),
		fleet: cachev3.NewLinearCache(FleetType),
		grpc:  grpc.NewServer(), cancel: cancel, served: make(chan struct{}),
	}
	mux := &cachev3.MuxCache{
		Classify: func(r *cachev3.Request) string { return r.GetTypeUrl() },
		Caches:   map[string]cachev3.Cache{resource.EndpointType: s.cache, FleetType: s.fleet},
	}
	ads := serverv3.NewServer(ctx, mux, serverv3.CallbackFuncs{StreamRequestFunc: s.record})
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(s.grpc, ads)
	go func() {
		defer close(s.served)
		_ = s.grpc.Serve(lis)
	}()
	return s, nil
}

// New starts a server on addr for the duration of t (see Start), failing
// t if it cannot listen; it is stopped when t ends.
func New(t testing.TB, addr string) *Server {
	t.Helper()
	s, err := Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) record(_ int64, r *discoveryv3.DiscoveryRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	return nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.addr }

// Stop takes the server down, cutting its streams, and waits for it to
// finish. It may be called more than once.
func (s *Server) Stop() {
	s.grpc.Stop()
	s.cancel()
	<-s.served
}

// Set publishes clas as the endpoint resources of node under version.
func (s *Server) Set(node, version string, clas ...*endpointv3.ClusterLoadAssignment) error {
	res := make([]types.Resource, len(clas))
	for i, c := range clas {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{resource.EndpointType: res})
	if err != nil {
		return fmt.Errorf("xds snapshot %q: %w", version, err)
	}
	if err := s.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		return fmt.Errorf("xds snapshot %q for node %q: %w", version, node, err)
	}
	return nil
}

// MustSet is Set, failing t on an error.
func (s *Server) MustSet(t testing.TB, node, version string, clas ...*endpointv3.ClusterLoadAssignment) {
	t.Helper()
	if err := s.Set(node, version, clas...); err != nil {
		t.Fatal(err)
	}
}

// FleetType is discovery.FleetType (this package cannot import discovery,
// whose tests use it).
const FleetType = "type.googleapis.com/google.protobuf.Struct"

// SetFleet publishes the fleet position resource of node: any Struct, so
// that a test can send an invalid one; nil removes it.
func (s *Server) SetFleet(node string, pos *structpb.Struct) error {
	if pos == nil {
		return s.fleet.DeleteResource(node)
	}
	return s.fleet.UpdateResource(node, pos)
}

// Requests returns every request the server has received, in order.
func (s *Server) Requests() []*discoveryv3.DiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*discoveryv3.DiscoveryRequest(nil), s.requests...)
}

// Acked reports whether a client has ACKed version of the endpoint
// resources: a request that answers a response (it carries its nonce),
// names version and has no error detail.
func (s *Server) Acked(version string) bool { return s.AckedType(resource.EndpointType, version) }

// AckedType is Acked for the resources of typeURL.
func (s *Server) AckedType(typeURL, version string) bool {
	for _, r := range s.Requests() {
		if r.GetErrorDetail() == nil && r.GetVersionInfo() == version && r.GetResponseNonce() != "" && r.GetTypeUrl() == typeURL {
			return true
		}
	}
	return false
}

// NACKs returns the requests that rejected a response (they carry an
// error detail), in order.
func (s *Server) NACKs() []*discoveryv3.DiscoveryRequest {
	var out []*discoveryv3.DiscoveryRequest
	for _, r := range s.Requests() {
		if r.GetErrorDetail() != nil {
			out = append(out, r)
		}
	}
	return out
}

// Endpoint is one endpoint of an assignment built by CLA.
type Endpoint struct {
	Addr     string // host:port
	Zone     string
	Priority uint32
	Weight   uint32 // 0: load_balancing_weight unset
	Health   corev3.HealthStatus
	Metadata *corev3.Metadata // nil: none (discovery.RingMetadata gives a shared ring index)
}

// CLA builds the assignment of cluster: one locality per (zone, priority),
// in the order they first appear in eps, each endpoint in the order given.
// An address that does not split into host and numeric port gets port 0.
func CLA(cluster string, eps ...Endpoint) *endpointv3.ClusterLoadAssignment {
	type key struct {
		zone     string
		priority uint32
	}
	out := &endpointv3.ClusterLoadAssignment{ClusterName: cluster}
	locs := map[key]*endpointv3.LocalityLbEndpoints{}
	for _, e := range eps {
		k := key{e.Zone, e.Priority}
		loc := locs[k]
		if loc == nil {
			loc = &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Zone: e.Zone}, Priority: e.Priority}
			locs[k] = loc
			out.Endpoints = append(out.Endpoints, loc)
		}
		loc.LbEndpoints = append(loc.LbEndpoints, e.proto())
	}
	return out
}

func (e Endpoint) proto() *endpointv3.LbEndpoint {
	host, port, _ := net.SplitHostPort(e.Addr)
	p, _ := strconv.ParseUint(port, 10, 32)
	sock := &corev3.SocketAddress{Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)}}
	out := &endpointv3.LbEndpoint{
		HealthStatus: e.Health,
		Metadata:     e.Metadata,
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: sock}}}},
	}
	if e.Weight > 0 {
		out.LoadBalancingWeight = wrapperspb.UInt32(e.Weight)
	}
	return out
}
