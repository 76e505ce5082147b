package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/tlsfiles"
)

// Reconnect backoff defaults of the xDS client.
const (
	DefaultXDSBackoffBase = 250 * time.Millisecond
	DefaultXDSBackoffMax  = 30 * time.Second
)

// XDSConfig configures an xDS client.
type XDSConfig struct {
	Server string // host:port of the ADS server (discovery.server)
	NodeID string // node.id sent to the server; the snapshot cache keys on it
	Zone   string // this gateway's zone, sent as node.locality.zone; optional
	// Clusters maps each origin to the EDS cluster (ClusterLoadAssignment
	// cluster_name) it follows. Several origins may follow one cluster; all
	// share one stream.
	Clusters map[string]string

	BackoffBase time.Duration // first reconnect wait; 0 = DefaultXDSBackoffBase
	BackoffMax  time.Duration // cap; 0 = DefaultXDSBackoffMax
	Clock       clock.Clock   // for backoff; nil = clock.Real()
	Rand        *rng.Source   // for jitter; nil = seeded from the node id
	// TLS dials the server over TLS with these files (the CA that
	// verifies the server, its name, and a client certificate for mTLS),
	// read again for every connection so that a rotation needs no
	// restart; nil: plaintext.
	TLS *tlsfiles.Files
	// DialOptions are added after the transport credentials (and may
	// replace them).
	DialOptions []grpc.DialOption
	Logger      *slog.Logger // nil = slog.Default()
}

// XDS is a state-of-the-world ADS client for EDS: one gRPC stream asks for
// every configured cluster's ClusterLoadAssignment, ACKs each valid
// response (version_info + response_nonce) and NACKs an invalid one
// (error_detail, keeping the last accepted version). When the stream
// breaks it reconnects with jittered exponential backoff, and the last
// known membership stays in force meanwhile.
//
// From each ClusterLoadAssignment: locality zone → Endpoint.Zone,
// load_balancing_weight → Endpoint.Weight (unset = 1), corput's metadata
// → the shared ring index (ring.go; a response whose indices CheckRing
// refuses is NACKed), and only endpoints
// whose health_status is HEALTHY or UNKNOWN are kept. Of the priorities,
// the lowest that has such an endpoint is used (priority 0 unless all of it
// is down). A cluster absent from a response keeps its membership (EDS is
// not a full-state resource); a ClusterLoadAssignment with no endpoints
// empties it.
type XDS struct {
	ads
	origins map[string][]string // cluster → origins following it

	running atomic.Bool
	last    map[string][]Endpoint // origin → last membership emitted; owned by Run
}

var _ Source = (*XDS)(nil)

// NewXDS returns an xDS client; it connects on Run.
func NewXDS(cfg XDSConfig) (*XDS, error) {
	if _, _, err := net.SplitHostPort(cfg.Server); err != nil {
		return nil, fmt.Errorf("discovery.server %q is not host:port (%v); name the ADS server, e.g. istiod.istio-system.svc:15010", cfg.Server, err)
	}
	if cfg.NodeID == "" {
		return nil, errors.New("discovery.node_id is empty; the control plane needs a node id to choose this gateway's snapshot")
	}
	if len(cfg.Clusters) == 0 {
		return nil, errors.New("discovery xds: no origin names a cluster; set discovery.cluster")
	}
	x := &XDS{origins: map[string][]string{}}
	if err := x.init(cfg); err != nil {
		return nil, fmt.Errorf("discovery.tls: %w", err)
	}
	for origin, cluster := range cfg.Clusters {
		if cluster == "" {
			return nil, fmt.Errorf("origin %s: discovery.cluster is empty; name the EDS cluster to follow", origin)
		}
		x.origins[cluster] = append(x.origins[cluster], origin)
	}
	x.typeURL, x.names = resource.EndpointType, slices.Sorted(maps.Keys(x.origins))
	for _, o := range x.origins {
		slices.Sort(o)
	}
	x.what, x.kept = "clusters "+strings.Join(x.names, ", "), "membership"
	return x, nil
}

// seedOf spreads node ids over seeds so that gateways of one fleet jitter
// differently.
func seedOf(s string) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h = rng.Mix64(h ^ uint64(s[i]))
	}
	return h
}

// Run holds a stream open to the server, reconnecting until ctx ends.
// Until the first valid response, Err reports that it is waiting.
func (x *XDS) Run(ctx context.Context, emit func(Update)) error {
	if !x.running.CompareAndSwap(false, true) {
		return errAlreadyRunning
	}
	defer x.running.Store(false)
	x.last = map[string][]Endpoint{} // every Run starts by emitting the membership
	x.run(ctx, func(resp *discoveryv3.DiscoveryResponse) error {
		updates, err := x.decode(resp)
		if err != nil {
			return err
		}
		for _, u := range updates {
			if prev, ok := x.last[u.Origin]; ok && slices.Equal(prev, u.Endpoints) {
				continue
			}
			x.last[u.Origin] = u.Endpoints
			emit(Update{Origin: u.Origin, Endpoints: slices.Clone(u.Endpoints)})
		}
		return nil
	})
	return nil
}

// decode turns a response into one Update per origin whose cluster it
// carries. Any invalid resource rejects the whole response.
func (x *XDS) decode(resp *discoveryv3.DiscoveryResponse) ([]Update, error) {
	var updates []Update
	var errs []error
	for i, a := range resp.GetResources() {
		var cla endpointv3.ClusterLoadAssignment
		if err := a.UnmarshalTo(&cla); err != nil {
			errs = append(errs, fmt.Errorf("resources[%d]: %w", i, err))
			continue
		}
		origins, wanted := x.origins[cla.GetClusterName()]
		if !wanted {
			continue // not asked for: a server may send more than asked
		}
		eps, err := EndpointsFromCLA(&cla)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range origins {
			updates = append(updates, Update{Origin: o, Endpoints: eps})
		}
	}
	return updates, errors.Join(errs...)
}

// EndpointsFromCLA converts a ClusterLoadAssignment into a membership: the
// usable (HEALTHY or UNKNOWN) endpoints of its lowest priority that has
// any, sorted by address, the first of duplicate addresses kept, each with
// its shared ring index if metadata.filter_metadata["corput"] gives one
// (ring.go). An endpoint that is not a TCP socket address with a numeric
// port, whose weight is out of range or whose ring keys are not whole
// numbers, or kept endpoints whose indices CheckRing refuses, make the
// whole assignment invalid. The ring rules apply to the endpoints kept: a
// control plane indexes the endpoints it wants used, 0..N-1, and leaves an
// endpoint it marks unhealthy out of the sequence as if it had left.
func EndpointsFromCLA(cla *endpointv3.ClusterLoadAssignment) ([]Endpoint, error) {
	byPriority := map[uint32][]Endpoint{}
	for li, loc := range cla.GetEndpoints() {
		for ei, lbe := range loc.GetLbEndpoints() {
			e, err := endpointOf(loc, lbe)
			if err != nil {
				return nil, fmt.Errorf("cluster %q endpoints[%d].lb_endpoints[%d]: %w", cla.GetClusterName(), li, ei, err)
			}
			if usable(lbe.GetHealthStatus()) {
				byPriority[loc.GetPriority()] = append(byPriority[loc.GetPriority()], e)
			}
		}
	}
	if len(byPriority) == 0 {
		return []Endpoint{}, nil
	}
	eps := byPriority[slices.Min(slices.Collect(maps.Keys(byPriority)))]
	slices.SortStableFunc(eps, func(a, b Endpoint) int { return strings.Compare(a.Address, b.Address) })
	eps = slices.CompactFunc(eps, func(a, b Endpoint) bool { return a.Address == b.Address })
	if err := CheckRing(eps); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cla.GetClusterName(), err)
	}
	return eps, nil
}

func endpointOf(loc *endpointv3.LocalityLbEndpoints, lbe *endpointv3.LbEndpoint) (Endpoint, error) {
	sa := lbe.GetEndpoint().GetAddress().GetSocketAddress()
	if sa == nil {
		return Endpoint{}, errors.New("no socket address (named endpoints, pipes and internal addresses are not supported)")
	}
	if sa.GetProtocol() != corev3.SocketAddress_TCP {
		return Endpoint{}, fmt.Errorf("address %s uses %v; only TCP is supported", sa.GetAddress(), sa.GetProtocol())
	}
	if _, named := sa.GetPortSpecifier().(*corev3.SocketAddress_NamedPort); named {
		return Endpoint{}, fmt.Errorf("address %s has a named port; send port_value", sa.GetAddress())
	}
	e := Endpoint{
		Address: net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10)),
		Zone:    loc.GetLocality().GetZone(),
		Weight:  1,
	}
	if err := ringFromMetadata(lbe.GetMetadata(), &e); err != nil {
		return Endpoint{}, err
	}
	if w := lbe.GetLoadBalancingWeight(); w != nil {
		if w.GetValue() > MaxWeight {
			return Endpoint{}, fmt.Errorf("address %s: load_balancing_weight %d is above %d", e.Address, w.GetValue(), MaxWeight)
		}
		e.Weight = int(w.GetValue())
	}
	return e, e.Validate()
}

// usable reports whether a health status lets an endpoint take traffic:
// HEALTHY, or UNKNOWN (no health checking), as Envoy does. DEGRADED is left
// out with the rest: corput has no degraded tier.
func usable(s corev3.HealthStatus) bool {
	return s == corev3.HealthStatus_HEALTHY || s == corev3.HealthStatus_UNKNOWN
}
