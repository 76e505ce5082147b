package discovery

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Shared ring indices. A control plane that keeps one index assignment per
// origin for the whole fleet (the subset ring's rules: the initial set
// shuffled, a joining endpoint takes the next index, a leaving one's hole
// filled by the highest) hands every endpoint its index, and every gateway
// places the origin by it, whatever the gateway's own history
// (subset.Ring.Place). The keys are the same in both sources that carry
// them:
//
//   - EDS: LbEndpoint.metadata.filter_metadata["corput"] is a Struct with
//     the number fields "ring_index" and, optionally, "ring_subsets".
//   - The endpoints file: ring_index: and ring_subsets: on each endpoint.
//
// Any xDS control plane can set them; RingMetadata builds the metadata.
const (
	// MetadataNamespace is the filter_metadata key of corput's endpoint
	// metadata in EDS.
	MetadataNamespace = "corput"
	// KeyRingIndex is the endpoint's shared ring index: a whole number,
	// the endpoints of an origin holding 0..N-1 once each.
	KeyRingIndex = "ring_index"
	// KeyRingSubsets is the control plane's subset count for the origin:
	// a power of two, the same on every endpoint; optional. Gateways take
	// it as their sizing's current count, so that they agree on the count
	// while the origin's size sits in a hysteresis band.
	KeyRingSubsets = "ring_subsets"
)

// MaxRingIndex bounds a ring index (and a subset count) read from a source,
// far above any origin's size, so that a number converts to an int safely.
const MaxRingIndex = 1<<31 - 1

// RingMetadata is the EDS metadata that gives an endpoint its shared ring
// index and, when subsets > 0, the control plane's subset count: what a
// control plane sets as LbEndpoint.metadata.
func RingMetadata(index, subsets int) *corev3.Metadata {
	fields := map[string]*structpb.Value{KeyRingIndex: structpb.NewNumberValue(float64(index))}
	if subsets > 0 {
		fields[KeyRingSubsets] = structpb.NewNumberValue(float64(subsets))
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{MetadataNamespace: {Fields: fields}}}
}

// ringFromMetadata reads corput's ring keys from an endpoint's metadata
// into e. Other namespaces and other keys of corput's are ignored (a
// control plane may add its own).
func ringFromMetadata(md *corev3.Metadata, e *Endpoint) error {
	s := md.GetFilterMetadata()[MetadataNamespace]
	if s == nil {
		return nil
	}
	fields := s.GetFields()
	if v, ok := fields[KeyRingIndex]; ok {
		i, err := wholeNumber(v, 0)
		if err != nil {
			return fmt.Errorf("address %s: metadata %s.%s %w", e.Address, MetadataNamespace, KeyRingIndex, err)
		}
		e.Indexed, e.RingIndex = true, i
	}
	if v, ok := fields[KeyRingSubsets]; ok {
		n, err := wholeNumber(v, 1)
		if err != nil {
			return fmt.Errorf("address %s: metadata %s.%s %w", e.Address, MetadataNamespace, KeyRingSubsets, err)
		}
		e.RingSubsets = n
	}
	return nil
}

// wholeNumber reads a Struct value that must be a whole number in
// least..MaxRingIndex.
func wholeNumber(v *structpb.Value, least int) (int, error) {
	n, ok := v.GetKind().(*structpb.Value_NumberValue)
	if !ok {
		return 0, fmt.Errorf("is %s, not a number", kindOf(v))
	}
	f := n.NumberValue
	if f != math.Trunc(f) || f < float64(least) || f > MaxRingIndex {
		return 0, fmt.Errorf("is %v, not a whole number in %d..%d", f, least, MaxRingIndex)
	}
	return int(f), nil
}

func kindOf(v *structpb.Value) string {
	switch v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return fmt.Sprintf("the string %q", v.GetStringValue())
	case *structpb.Value_BoolValue:
		return "a bool"
	case *structpb.Value_StructValue:
		return "a struct"
	case *structpb.Value_ListValue:
		return "a list"
	}
	return "null"
}

// ErrRing marks a membership whose shared ring indices are refused (see
// CheckRing).
var ErrRing = errors.New("shared ring indices refused")

// CheckRing reports whether the ring indices of one origin's membership can
// be placed. The membership is valid when no endpoint has an index (the
// gateway places it by its own history) or when every endpoint has one and:
//
//   - the indices are 0..N-1, each held by one endpoint;
//   - ring_subsets, if given, is given on every endpoint, the same power of
//     two on each;
//   - no endpoint has ring_subsets without ring_index.
//
// An update that breaks a rule is refused whole (the xDS client NACKs it, a
// file keeps its last good set), never placed locally instead: that would
// reshuffle an origin every gateway holds in the same order. The error
// wraps ErrRing and names the endpoints at fault.
func CheckRing(eps []Endpoint) error {
	if err := checkRing(eps); err != nil {
		return fmt.Errorf("%w: %w", ErrRing, err)
	}
	return nil
}

func checkRing(eps []Endpoint) error {
	var indexed, unindexed []string
	for _, e := range eps {
		if e.Indexed {
			indexed = append(indexed, e.Address)
		} else {
			unindexed = append(unindexed, e.Address)
			if e.RingSubsets != 0 {
				return fmt.Errorf("%s has %s but no %s", e.Address, KeyRingSubsets, KeyRingIndex)
			}
		}
	}
	switch {
	case len(indexed) == 0:
		return nil
	case len(unindexed) > 0:
		return fmt.Errorf("%s is set on %d of %d endpoints, not on %s: index every endpoint of the origin or none",
			KeyRingIndex, len(indexed), len(eps), someOf(unindexed))
	}
	holder := make(map[int]string, len(eps))
	first := eps[0]
	for _, e := range eps {
		if e.RingIndex < 0 || e.RingIndex >= len(eps) {
			return fmt.Errorf("%s %d of %s is outside 0..%d: the indices of %d endpoints must be 0..%d, each held by one endpoint",
				KeyRingIndex, e.RingIndex, e.Address, len(eps)-1, len(eps), len(eps)-1)
		}
		if prev, dup := holder[e.RingIndex]; dup {
			return fmt.Errorf("%s %d is held by both %s and %s: each index must be held by one endpoint",
				KeyRingIndex, e.RingIndex, min(prev, e.Address), max(prev, e.Address))
		}
		holder[e.RingIndex] = e.Address
		if e.RingSubsets != first.RingSubsets {
			return fmt.Errorf("%s differs between endpoints: %s on %s, %s on %s; send the origin's one count on every endpoint, or on none",
				KeyRingSubsets, countOf(first.RingSubsets), first.Address, countOf(e.RingSubsets), e.Address)
		}
	}
	if s := first.RingSubsets; s&(s-1) != 0 {
		return fmt.Errorf("%s %d is not a power of two", KeyRingSubsets, s)
	}
	return nil // N unique indices in 0..N-1: dense
}

func countOf(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}

// someOf names up to three addresses, sorted, and counts the rest.
func someOf(addrs []string) string {
	addrs = slices.Sorted(slices.Values(addrs))
	if len(addrs) <= 3 {
		return strings.Join(addrs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(addrs[:3], ", "), len(addrs)-3)
}

// RingIndices returns a valid membership's shared indices (address →
// index) and the control plane's subset count (0: not given), or nil when
// the membership has no indices. The membership must have passed
// CheckRing.
func RingIndices(eps []Endpoint) (indices map[string]int, subsets int) {
	if len(eps) == 0 || !eps[0].Indexed {
		return nil, 0
	}
	indices = make(map[string]int, len(eps))
	for _, e := range eps {
		indices[e.Address] = e.RingIndex
	}
	return indices, eps[0].RingSubsets
}
