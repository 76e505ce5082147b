package discovery

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/discovery/xdstest"
	"github.com/corput/corput/internal/waitfor"
)

// indexed builds a membership of addresses a0..: endpoint i has index
// idx[i] (-1: none) and the subset count subsets[i] (a single value: the
// same on every endpoint).
func indexed(idx []int, subsets ...int) []Endpoint {
	out := make([]Endpoint, len(idx))
	for i, x := range idx {
		out[i] = Endpoint{Address: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1}
		if x >= 0 {
			out[i].Indexed, out[i].RingIndex = true, x
		}
		switch {
		case len(subsets) == 1:
			out[i].RingSubsets = subsets[0]
		case len(subsets) > 1:
			out[i].RingSubsets = subsets[i]
		}
	}
	return out
}

func TestCheckRing(t *testing.T) {
	ok := map[string][]Endpoint{
		"no index at all":                   indexed([]int{-1, -1, -1}),
		"empty":                             nil,
		"a permutation of 0..N-1":           indexed([]int{2, 0, 1}),
		"with a shared subset count":        indexed([]int{1, 0, 3, 2}, 2),
		"one endpoint, one subset":          indexed([]int{0}, 1),
		"a count above N (gateway caps it)": indexed([]int{0, 1}, 8),
	}
	for name, eps := range ok {
		if err := CheckRing(eps); err != nil {
			t.Errorf("%s: %v, want accepted", name, err)
		}
	}
	bad := map[string]struct {
		eps  []Endpoint
		want string
	}{
		"partly indexed":           {indexed([]int{0, -1, 1, -1}), "ring_index is set on 2 of 4 endpoints, not on 10.0.0.2:80, 10.0.0.4:80"},
		"duplicate":                {indexed([]int{0, 1, 1}), "ring_index 1 is held by both 10.0.0.2:80 and 10.0.0.3:80"},
		"a gap":                    {indexed([]int{0, 1, 3}), "ring_index 3 of 10.0.0.3:80 is outside 0..2"},
		"subsets disagree":         {indexed([]int{0, 1, 2}, 2, 2, 4), "ring_subsets differs between endpoints: 2 on 10.0.0.1:80, 4 on 10.0.0.3:80"},
		"subsets on some only":     {indexed([]int{0, 1}, 2, 0), "ring_subsets differs between endpoints: 2 on 10.0.0.1:80, none on 10.0.0.2:80"},
		"not a power of two":       {indexed([]int{0, 1, 2}, 3), "ring_subsets 3 is not a power of two"},
		"subsets without index":    {indexed([]int{-1, -1}, 2), "10.0.0.1:80 has ring_subsets but no ring_index"},
		"many missing are counted": {indexed([]int{0, -1, -1, -1, -1}), "not on 10.0.0.2:80, 10.0.0.3:80, 10.0.0.4:80 and 1 more"},
	}
	for name, c := range bad {
		err := CheckRing(c.eps)
		if err == nil || !errors.Is(err, ErrRing) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: CheckRing = %v; want ErrRing saying %q", name, err, c.want)
		}
	}
	idx, s := RingIndices(indexed([]int{1, 0}, 2))
	if !maps.Equal(idx, map[string]int{"10.0.0.1:80": 1, "10.0.0.2:80": 0}) || s != 2 {
		t.Errorf("RingIndices = %v, %d", idx, s)
	}
	if idx, s := RingIndices(indexed([]int{-1})); idx != nil || s != 0 {
		t.Errorf("RingIndices of an unindexed membership = %v, %d; want nil", idx, s)
	}
}

// ringEP is an xdstest endpoint with a shared index (index < 0: none).
func ringEP(addr string, index, subsets int, health corev3.HealthStatus) xdstest.Endpoint {
	e := xdstest.Endpoint{Addr: addr, Zone: "z", Health: health}
	if index >= 0 {
		e.Metadata = RingMetadata(index, subsets)
	}
	return e
}

func TestEndpointsFromCLAReadsSharedRingIndices(t *testing.T) {
	const healthy, unhealthy = corev3.HealthStatus_HEALTHY, corev3.HealthStatus_UNHEALTHY
	// An unhealthy endpoint is left out with its index: the rules apply
	// to the endpoints kept, which hold 0..1.
	got, err := EndpointsFromCLA(xdstest.CLA("c",
		ringEP("10.0.0.2:80", 0, 2, healthy),
		ringEP("10.0.0.1:80", 1, 2, healthy),
		ringEP("10.0.0.9:80", 0, 2, unhealthy),
	))
	want := []Endpoint{
		{Address: "10.0.0.1:80", Zone: "z", Weight: 1, Indexed: true, RingIndex: 1, RingSubsets: 2},
		{Address: "10.0.0.2:80", Zone: "z", Weight: 1, Indexed: true, RingIndex: 0, RingSubsets: 2},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}

	// Other metadata (another namespace, other corput keys) is ignored.
	other := ringEP("10.0.0.1:80", 0, 0, healthy)
	other.Metadata.FilterMetadata["envoy.lb"] = &structpb.Struct{Fields: map[string]*structpb.Value{"canary": structpb.NewBoolValue(true)}}
	other.Metadata.FilterMetadata[MetadataNamespace].Fields["owner"] = structpb.NewStringValue("cp-1")
	if got, err := EndpointsFromCLA(xdstest.CLA("c", other)); err != nil || !got[0].Indexed || got[0].RingIndex != 0 || got[0].RingSubsets != 0 {
		t.Fatalf("with other metadata: %v, %v", got, err)
	}

	bad := map[string]struct {
		value *structpb.Value
		key   string
		want  string
	}{
		"a string index":  {structpb.NewStringValue("3"), KeyRingIndex, `corput.ring_index is the string "3", not a number`},
		"a fraction":      {structpb.NewNumberValue(1.5), KeyRingIndex, "is 1.5, not a whole number"},
		"negative":        {structpb.NewNumberValue(-1), KeyRingIndex, "is -1, not a whole number in 0.."},
		"zero subsets":    {structpb.NewNumberValue(0), KeyRingSubsets, "corput.ring_subsets is 0, not a whole number in 1.."},
		"a boolean count": {structpb.NewBoolValue(true), KeyRingSubsets, "is a bool, not a number"},
		"a huge index":    {structpb.NewNumberValue(1e12), KeyRingIndex, "not a whole number"},
	}
	for name, c := range bad {
		e := ringEP("10.0.0.1:80", 0, 0, healthy)
		e.Metadata.FilterMetadata[MetadataNamespace].Fields[c.key] = c.value
		if _, err := EndpointsFromCLA(xdstest.CLA("c", e)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, c.want)
		}
	}

	// Kept endpoints whose indices CheckRing refuses refuse the assignment.
	if _, err := EndpointsFromCLA(xdstest.CLA("c",
		ringEP("10.0.0.1:80", 0, 0, healthy), ringEP("10.0.0.2:80", -1, 0, healthy),
	)); !errors.Is(err, ErrRing) || !strings.Contains(err.Error(), `cluster "c"`) {
		t.Fatalf("a partly indexed assignment: %v; want ErrRing naming the cluster", err)
	}
}

func TestParseEndpointsSharedRingIndices(t *testing.T) {
	got, err := ParseEndpoints("f", []byte(`
endpoints:
  - {address: 10.0.0.2:80, ring_index: 0, ring_subsets: 2}
  - {address: 10.0.0.1:80, ring_index: 1, ring_subsets: 2}
`))
	want := []Endpoint{
		{Address: "10.0.0.1:80", Weight: 1, Indexed: true, RingIndex: 1, RingSubsets: 2},
		{Address: "10.0.0.2:80", Weight: 1, Indexed: true, RingIndex: 0, RingSubsets: 2},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	for name, c := range map[string]struct{ file, want string }{
		"partly indexed":   {"endpoints:\n  - {address: a:1, ring_index: 0}\n  - {address: b:1}\n", "ring_index is set on 1 of 2 endpoints, not on b:1"},
		"duplicate":        {"endpoints:\n  - {address: a:1, ring_index: 0}\n  - {address: b:1, ring_index: 0}\n", "ring_index 0 is held by both a:1 and b:1"},
		"not a number":     {"endpoints:\n  - {address: a:1, ring_index: first}\n", `line 2: endpoints[0].ring_index: want a whole number, got "first"`},
		"negative":         {"endpoints:\n  - {address: a:1, ring_index: -2}\n", `ring_index "-2" is not a whole number in 0..`},
		"a list":           {"endpoints:\n  - {address: a:1, ring_index: [0]}\n", "endpoints[0].ring_index: want a whole number, got a list"},
		"zero subsets":     {"endpoints:\n  - {address: a:1, ring_index: 0, ring_subsets: 0}\n", `ring_subsets "0" is not a whole number in 1..`},
		"subsets not pow2": {"endpoints:\n  - {address: a:1, ring_index: 0, ring_subsets: 6}\n", "ring_subsets 6 is not a power of two"},
	} {
		if _, err := ParseEndpoints("f", []byte(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", name, err, c.want)
		}
	}
}

// A file whose indices are refused keeps the last good set, with Err
// saying why, like any invalid file.
func TestFileKeepsLastGoodSetOnRefusedRingIndices(t *testing.T) {
	good := "endpoints:\n  - {address: 10.0.0.1:80, ring_index: 1}\n  - {address: 10.0.0.2:80, ring_index: 0}\n"
	h := startFile(t, good)
	first := h.next()
	if idx, _ := RingIndices(first.Endpoints); !maps.Equal(idx, map[string]int{"10.0.0.1:80": 1, "10.0.0.2:80": 0}) {
		t.Fatalf("initial update %v", first)
	}
	for _, bad := range []string{
		good + "  - {address: 10.0.0.3:80}\n",                // partly indexed
		good + "  - {address: 10.0.0.3:80, ring_index: 1}\n", // duplicate
	} {
		h.write(bad)
		h.clk.Advance(time.Second)
		if err := h.src.Err(); err == nil || !errors.Is(err, ErrRing) || !strings.Contains(err.Error(), "the last good set stays") {
			t.Fatalf("Err() = %v; want the refused indices", err)
		}
		select {
		case u := <-h.updates:
			t.Fatalf("a refused file was emitted: %v", u)
		default:
		}
	}
	h.write("endpoints:\n  - {address: 10.0.0.1:80, ring_index: 1}\n  - {address: 10.0.0.2:80, ring_index: 2}\n  - {address: 10.0.0.3:80, ring_index: 0}\n")
	h.clk.Advance(time.Second)
	if u := h.next(); len(u.Endpoints) != 3 || h.src.Err() != nil {
		t.Fatalf("after a valid file: %v, Err %v", u, h.src.Err())
	}
}

// Over a real go-control-plane server: a partly indexed response and one
// with duplicate indices are NACKed with an error_detail naming the
// problem; nothing of them is emitted, and the next valid one is followed.
func TestXDSNACKsRefusedRingIndices(t *testing.T) {
	cp := startControlPlane(t, "127.0.0.1:0")
	const healthy = corev3.HealthStatus_HEALTHY
	set := func(version string, eps ...xdstest.Endpoint) {
		cp.set(version, xdstest.CLA("payments-eds", eps...), xdstest.CLA("search-eds", ringEP("10.2.0.1:80", -1, 0, healthy)))
	}
	set("1", ringEP("10.0.0.1:80", 1, 2, healthy), ringEP("10.0.0.2:80", 0, 2, healthy))
	h := startXDS(t, testXDSConfig(cp.Addr(), clock.Real()))
	for range 2 {
		if u := h.next(); u.Origin == "payments" {
			if idx, s := RingIndices(u.Endpoints); !maps.Equal(idx, map[string]int{"10.0.0.1:80": 1, "10.0.0.2:80": 0}) || s != 2 {
				t.Fatalf("indices %v, subsets %d", idx, s)
			}
		}
	}
	waitfor.Until(t, "the ACK of version 1", func() bool { return cp.Acked("1") })

	for i, c := range []struct {
		eps  []xdstest.Endpoint
		want string
	}{
		{[]xdstest.Endpoint{ringEP("10.0.0.1:80", 1, 2, healthy), ringEP("10.0.0.2:80", 0, 2, healthy), ringEP("10.0.0.3:80", -1, 0, healthy)},
			"ring_index is set on 2 of 3 endpoints, not on 10.0.0.3:80"},
		{[]xdstest.Endpoint{ringEP("10.0.0.1:80", 1, 2, healthy), ringEP("10.0.0.2:80", 0, 2, healthy), ringEP("10.0.0.3:80", 1, 2, healthy)},
			"ring_index 1 is held by both 10.0.0.1:80 and 10.0.0.3:80"},
	} {
		before := len(cp.NACKs())
		version := fmt.Sprint(i + 2)
		set(version, c.eps...)
		// The cache resends a NACKed version, so earlier NACKs may repeat:
		// wait for the one that names this version's problem.
		var nack *discoveryv3.DiscoveryRequest
		waitfor.Until(t, "a NACK of version "+version, func() bool {
			for _, r := range cp.NACKs()[before:] {
				if strings.Contains(r.GetErrorDetail().GetMessage(), c.want) {
					nack = r
					return true
				}
			}
			return false
		})
		if nack.GetVersionInfo() != "1" {
			t.Fatalf("NACK of version %s carries version %q; want the last accepted, 1", version, nack.GetVersionInfo())
		}
		if err := h.src.Err(); err == nil || !errors.Is(err, ErrRing) {
			t.Fatalf("Err() = %v; want the refused indices", err)
		}
	}
	select {
	case u := <-h.updates:
		t.Fatalf("a NACKed response was emitted: %v", u)
	default:
	}
	set("9", ringEP("10.0.0.1:80", 1, 2, healthy), ringEP("10.0.0.2:80", 0, 2, healthy), ringEP("10.0.0.3:80", 2, 2, healthy))
	if u := h.next(); u.Origin != "payments" || len(u.Endpoints) != 3 {
		t.Fatalf("after a valid response: %v", u)
	}
	waitfor.Until(t, "Err to clear", func() bool { return h.src.Err() == nil })
}
