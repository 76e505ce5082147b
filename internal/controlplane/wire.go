package controlplane

import (
	"cmp"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/corput/corput/internal/discovery"
)

// The wire keys the gateways read are internal/discovery's
// (MetadataNamespace, KeyRingIndex, KeyRingSubsets; docs/discovery.md,
// "Shared ring indices"): this control plane always sets both, on every
// endpoint of every origin it serves.

// CLA is the ClusterLoadAssignment the control plane publishes for an
// origin: one locality per zone (zones in order of name), each endpoint
// HEALTHY at priority 0 with its weight and corput's metadata, then one
// locality without a zone holding the draining endpoints, DRAINING. The
// same assignment always gives the same message.
func CLA(name string, a *Assignment) *endpointv3.ClusterLoadAssignment {
	out := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	eps := slices.Clone(a.Endpoints)
	slices.SortStableFunc(eps, func(x, y Endpoint) int {
		return cmp.Or(cmp.Compare(x.Zone, y.Zone), cmp.Compare(x.Index, y.Index))
	})
	var loc *endpointv3.LocalityLbEndpoints
	for _, e := range eps {
		if loc == nil || loc.GetLocality().GetZone() != e.Zone {
			loc = &endpointv3.LocalityLbEndpoints{Locality: &corev3.Locality{Zone: e.Zone}}
			out.Endpoints = append(out.Endpoints, loc)
		}
		loc.LbEndpoints = append(loc.LbEndpoints, lbEndpoint(e, a.Subsets))
	}
	if len(a.Draining) > 0 {
		loc := &endpointv3.LocalityLbEndpoints{}
		for _, addr := range a.Draining {
			loc.LbEndpoints = append(loc.LbEndpoints, drainingEndpoint(addr))
		}
		out.Endpoints = append(out.Endpoints, loc)
	}
	return out
}

// drainingEndpoint is an endpoint that drains: DRAINING, no weight, no
// ring index (gateways leave it out of the ring; one that had it applies
// its leaving at once, discovery.Update.Urgent).
func drainingEndpoint(addr string) *endpointv3.LbEndpoint {
	host, port := splitAddress(addr)
	sock := &corev3.SocketAddress{Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: sock}}}},
		HealthStatus: corev3.HealthStatus_DRAINING,
	}
}

func lbEndpoint(e Endpoint, subsets int) *endpointv3.LbEndpoint {
	host, port := splitAddress(e.Address)
	sock := &corev3.SocketAddress{Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: sock}}}},
		HealthStatus:        corev3.HealthStatus_HEALTHY,
		LoadBalancingWeight: wrapperspb.UInt32(uint32(e.Weight)),
		Metadata:            discovery.RingMetadata(e.Index, subsets),
	}
}

// RingMetadata reads corput's metadata from an LbEndpoint: its ring index
// and subset count, and false when either is missing. Tests and tools use
// it to read what a control plane sent.
func RingMetadata(lbe *endpointv3.LbEndpoint) (index, subsets int, ok bool) {
	s := lbe.GetMetadata().GetFilterMetadata()[discovery.MetadataNamespace]
	i, okI := s.GetFields()[discovery.KeyRingIndex].GetKind().(*structpb.Value_NumberValue)
	n, okN := s.GetFields()[discovery.KeyRingSubsets].GetKind().(*structpb.Value_NumberValue)
	if !okI || !okN {
		return 0, 0, false
	}
	return int(i.NumberValue), int(n.NumberValue), true
}
