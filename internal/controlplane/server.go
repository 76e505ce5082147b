package controlplane

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/corput/corput/internal/discovery"
)

// Server is the ADS server: go-control-plane's state-of-the-world server
// over a LinearCache of ClusterLoadAssignments, one resource per origin,
// the same for every node. The linear cache versions each resource by the
// cache update that last set it, so a response carries only the clusters
// that changed since the stream last got them (EDS is not a full-state
// type): an origin that did not change is not sent again.
//
// A second LinearCache, of type discovery.FleetType, holds the fleet
// positions, one resource per node id; a MuxCache serves each request
// from the cache of its type URL. A stream's first fleet subscription,
// named by the node id it presents, is counted by the fleet (fleetMembers)
// until the stream closes. A follower has no fleet: its fleet cache stays
// empty, so a gateway asking it gets no position.
//
// With identity set (over mTLS), a fleet subscription is refused — the
// stream ends with PermissionDenied, counted and logged — unless its node
// id is one of the identities of the stream's verified client
// certificate (its DNS and URI SANs): a gateway cannot take another's
// fleet position.
type Server struct {
	cache      *cachev3.LinearCache // EDS
	fleetCache *cachev3.LinearCache // fleet positions
	grpc       *grpc.Server
	cancel     context.CancelFunc
	metrics    *Metrics
	log        *slog.Logger
	identity   bool // fleet node ids must be an identity of the client certificate; set before Serve

	mu          sync.Mutex // guards following
	streams     map[int64]*stream
	names       map[string]bool // the origins published
	members     fleetMembers    // nil for a follower
	fleetLogged map[string]bool // nodes told a follower assigns no position
}

// fleetMembers is told of the nodes' fleet streams.
type fleetMembers interface {
	connect(node string)
	disconnect(node string)
}

// stream is one gateway's ADS stream.
type stream struct {
	identities []string // the verified client certificate's DNS and URI SANs; nil without one
	node       string
	last       *discoveryv3.DiscoveryResponse // the last EDS response sent, for NACK logs
	warned     map[string]bool                // unknown clusters already logged
	fleetSeen  bool                           // a fleet subscription came (only the first counts)
	fleet      string                         // the node counted as connected by this stream
	fleetLast  *discoveryv3.DiscoveryResponse // the last fleet response sent, for NACK logs
}

// NewServer returns a server whose version_info strings start with
// prefix (the writer's generation: a restart never reuses a version). opts
// go to the gRPC server (grpc.Creds for TLS: see handshakes).
func NewServer(prefix string, m *Metrics, log *slog.Logger, opts ...grpc.ServerOption) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cache:       cachev3.NewLinearCache(resource.EndpointType, cachev3.WithVersionPrefix(prefix)),
		fleetCache:  cachev3.NewLinearCache(discovery.FleetType, cachev3.WithVersionPrefix(prefix)),
		grpc:        grpc.NewServer(opts...),
		cancel:      cancel,
		metrics:     m,
		log:         log,
		streams:     map[int64]*stream{},
		names:       map[string]bool{},
		fleetLogged: map[string]bool{},
	}
	mux := &cachev3.MuxCache{
		Classify: func(r *cachev3.Request) string { return r.GetTypeUrl() },
		Caches:   map[string]cachev3.Cache{resource.EndpointType: s.cache, discovery.FleetType: s.fleetCache},
	}
	ads := serverv3.NewServer(ctx, mux, serverv3.CallbackFuncs{
		StreamOpenFunc:     s.opened,
		StreamClosedFunc:   s.closed,
		StreamRequestFunc:  s.request,
		StreamResponseFunc: s.response,
	})
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(s.grpc, ads)
	return s
}

// Serve serves ADS on lis until Stop.
func (s *Server) Serve(lis net.Listener) error { return s.grpc.Serve(lis) }

// Stop cuts every stream and stops serving; gateways keep the last
// assignment they accepted and reconnect with backoff.
func (s *Server) Stop() {
	s.grpc.Stop()
	s.cancel()
}

// Publish sets the changed origins' assignments and removes the given
// origins, as one cache update: one version, and one response per stream
// that follows any of them, holding only those.
func (s *Server) Publish(changed map[string]*Assignment, removed []string) error {
	if len(changed) == 0 && len(removed) == 0 {
		return nil
	}
	res := make(map[string]types.Resource, len(changed))
	for name, a := range changed {
		res[name] = CLA(name, a)
	}
	if err := s.cache.UpdateResources(res, removed); err != nil {
		return err
	}
	s.mu.Lock()
	for name := range changed {
		s.names[name] = true
	}
	for _, name := range removed {
		delete(s.names, name)
	}
	s.mu.Unlock()
	for name, a := range changed {
		s.metrics.published(name, a)
	}
	for _, name := range removed {
		s.metrics.removed(name)
	}
	return nil
}

// Published returns the names of the origins the cache holds, sorted.
func (s *Server) Published() []string {
	var out []string
	for name := range s.cache.GetResources() {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Assignment returns the ClusterLoadAssignment served for name.
func (s *Server) Assignment(name string) (*endpointv3.ClusterLoadAssignment, bool) {
	r, ok := s.cache.GetResources()[name]
	if !ok {
		return nil, false
	}
	cla, ok := r.(*endpointv3.ClusterLoadAssignment)
	return cla, ok
}

// setFleet makes the server count fleet streams for m (the writer's
// fleet); call it before Serve.
func (s *Server) setFleet(m fleetMembers) {
	s.mu.Lock()
	s.members = m
	s.mu.Unlock()
}

// publishFleet sets the changed nodes' positions and removes the given
// nodes, as one cache update of the fleet cache.
func (s *Server) publishFleet(changed map[string]position, removed []string) error {
	if len(changed) == 0 && len(removed) == 0 {
		return nil
	}
	res := make(map[string]types.Resource, len(changed))
	for node, p := range changed {
		res[node] = discovery.FleetResource(p.instance, p.size)
	}
	return s.fleetCache.UpdateResources(res, removed)
}

// FleetPosition returns the fleet position served to node.
func (s *Server) FleetPosition(node string) (discovery.Fleet, bool) {
	r, ok := s.fleetCache.GetResources()[node]
	if !ok {
		return discovery.Fleet{}, false
	}
	a, err := anypb.New(r)
	if err != nil {
		return discovery.Fleet{}, false
	}
	f, err := discovery.FleetFromResource(a)
	return f, err == nil
}

func (s *Server) opened(ctx context.Context, id int64, _ string) error {
	s.mu.Lock()
	s.streams[id] = &stream{identities: identities(ctx)}
	s.mu.Unlock()
	s.metrics.Connected.Inc()
	return nil
}

func (s *Server) closed(id int64, node *corev3.Node) {
	s.mu.Lock()
	st := s.streams[id]
	delete(s.streams, id)
	members := s.members
	s.mu.Unlock()
	if st != nil && st.fleet != "" && members != nil {
		members.disconnect(st.fleet)
	}
	s.metrics.Connected.Dec()
	s.log.Debug("control plane: gateway stream closed", "node", node.GetId(), "stream", id)
}

func (s *Server) request(id int64, req *discoveryv3.DiscoveryRequest) error {
	if req.GetTypeUrl() == discovery.FleetType {
		return s.fleetRequest(id, req)
	}
	s.mu.Lock()
	st := s.streamLocked(id)
	if n := req.GetNode().GetId(); n != "" && st.node == "" {
		st.node = n
		s.log.Info("control plane: gateway connected", "node", n, "stream", id, "clusters", req.GetResourceNames())
	}
	var unknown []string
	for _, name := range req.GetResourceNames() {
		if !s.names[name] && !st.warned[name] {
			if st.warned == nil {
				st.warned = map[string]bool{}
			}
			st.warned[name] = true
			unknown = append(unknown, name)
		}
	}
	last := st.last
	node := st.node
	s.mu.Unlock()
	if len(unknown) > 0 {
		s.log.Warn("control plane: a gateway asks for clusters this control plane does not serve (yet); it gets them once they are published",
			"node", node, "clusters", unknown)
	}
	if req.GetErrorDetail() == nil {
		return nil
	}
	// A NACK. go-control-plane recorded the rejected resources as sent
	// to this stream, so the linear cache does not send them again: the
	// gateway keeps the version it last accepted (req.version_info) and
	// the next change of those clusters is a new version.
	s.metrics.NACKs.Inc()
	rejected, clusters := "", []string(nil)
	if last != nil && last.GetNonce() == req.GetResponseNonce() {
		rejected = last.GetVersionInfo()
		clusters = clusterNames(last)
	}
	s.log.Warn("control plane: a gateway rejected (NACK) a response; it keeps its last accepted version, and the rejected one is not sent to it again",
		"node", node, "stream", id, "rejected_version", rejected, "clusters", clusters,
		"kept_version", req.GetVersionInfo(), "error", req.GetErrorDetail().GetMessage())
	return nil
}

func (s *Server) response(_ context.Context, id int64, _ *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
	fleet := resp.GetTypeUrl() == discovery.FleetType
	if !fleet {
		s.metrics.Responses.Inc()
	}
	s.mu.Lock()
	if st := s.streams[id]; st != nil && fleet {
		st.fleetLast = resp
	} else if st != nil {
		st.last = resp
	}
	s.mu.Unlock()
}

// streamLocked returns stream id's record, creating it.
func (s *Server) streamLocked(id int64) *stream {
	st := s.streams[id]
	if st == nil {
		st = &stream{}
		s.streams[id] = st
	}
	return st
}

// fleetRequest handles a fleet-position request. The stream's first one
// joins its node to the fleet, if it names exactly the node id the stream
// presents; later ones (ACKs, NACKs) change nothing. With identity set, a
// first one whose node id is not an identity of the stream's certificate
// is refused: the error ends the stream.
func (s *Server) fleetRequest(id int64, req *discoveryv3.DiscoveryRequest) error {
	node := req.GetNode().GetId()
	s.mu.Lock()
	st := s.streamLocked(id)
	first := !st.fleetSeen
	if first && s.identity && !slices.Contains(st.identities, node) {
		ids := st.identities
		s.mu.Unlock()
		s.metrics.FleetRefused.Inc()
		s.log.Warn("control plane: a fleet subscription names a node id its client certificate does not; refused",
			"node", node, "stream", id, "certificate_identities", ids)
		return status.Errorf(codes.PermissionDenied,
			"fleet position of node %q refused: the client certificate names %v (DNS and URI SANs), not that node id", node, ids)
	}
	st.fleetSeen = true
	members := s.members
	valid := node != "" && slices.Equal(req.GetResourceNames(), []string{node})
	if first && valid && members != nil {
		st.fleet = node
	}
	tell := first && members == nil && !s.fleetLogged[node]
	if tell {
		s.fleetLogged[node] = true
	}
	last := st.fleetLast
	s.mu.Unlock()
	switch {
	case tell:
		s.log.Info("control plane (follower): a gateway asks for its fleet position; fleet positions come from the writer, a follower serves none",
			"node", node)
	case first && members != nil && !valid:
		s.log.Warn("control plane: a fleet-position subscription must name exactly the node id the stream presents; ignored",
			"node", node, "stream", id, "names", req.GetResourceNames())
	case first && members != nil:
		members.connect(node)
	}
	if req.GetErrorDetail() == nil {
		return nil
	}
	s.metrics.NACKs.Inc()
	rejected := ""
	if last != nil && last.GetNonce() == req.GetResponseNonce() {
		rejected = last.GetVersionInfo()
	}
	s.log.Warn("control plane: a gateway rejected (NACK) its fleet position; it is not sent to it again until the position changes",
		"node", node, "stream", id, "rejected_version", rejected, "kept_version", req.GetVersionInfo(),
		"error", req.GetErrorDetail().GetMessage())
	return nil
}

// identities lists the identities of the stream's verified client
// certificate: its DNS SANs and URI SANs, as written. Nil without TLS or
// without a verified client certificate.
func identities(ctx context.Context) []string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return certIdentities(info.State.VerifiedChains[0][0])
}

func certIdentities(c *x509.Certificate) []string {
	out := slices.Clone(c.DNSNames)
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}

// handshakes are the ADS listener's TLS credentials, with every refused
// handshake (no client certificate, one of another CA, a client that
// does not trust the server's) counted and logged.
type handshakes struct {
	credentials.TransportCredentials
	metrics *Metrics
	log     *slog.Logger
}

func (h handshakes) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	remote := conn.RemoteAddr()
	c, info, err := h.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		h.metrics.TLSRefused.Inc()
		h.log.Warn("control plane: TLS handshake refused", "peer", fmt.Sprint(remote), "err", err)
	}
	return c, info, err
}

func (h handshakes) Clone() credentials.TransportCredentials {
	return handshakes{h.TransportCredentials.Clone(), h.metrics, h.log}
}

// clusterNames lists the clusters of a response, for logs.
func clusterNames(resp *discoveryv3.DiscoveryResponse) []string {
	var out []string
	for _, a := range resp.GetResources() {
		var cla endpointv3.ClusterLoadAssignment
		if a.UnmarshalTo(&cla) == nil {
			out = append(out, cla.GetClusterName())
		}
	}
	slices.Sort(out)
	return out
}
