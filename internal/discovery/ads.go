package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/tlsfiles"
)

// ads is one state-of-the-world ADS subscription: a gRPC stream asking for
// names of one type, that ACKs each response accept takes (version_info +
// response_nonce) and NACKs one it refuses (error_detail, keeping the last
// accepted version), pacing repeated NACKs of one version on the backoff.
// When the stream breaks it reconnects with jittered exponential backoff;
// what was last accepted stays in force meanwhile, and Err says why.
type ads struct {
	health
	server   string
	typeURL  string
	names    []string
	node     *corev3.Node
	tls      *tlsfiles.Loader // nil: plaintext
	dialOpts []grpc.DialOption
	clock    clock.Clock
	backoff  backoff
	// what names the subscription in errors ("clusters a, b"); health's
	// kept, what stays in force while it fails ("membership").
	what string
}

// init sets the subscription up as cfg describes (its server, node,
// backoff, clock and transport), with cfg's defaults filled in; the caller
// sets typeURL, names, what and kept. The error is cfg.TLS's files not
// loading.
func (a *ads) init(cfg XDSConfig) error {
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultXDSBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultXDSBackoffMax
	}
	cfg.BackoffMax = max(cfg.BackoffMax, cfg.BackoffBase)
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Rand == nil {
		cfg.Rand = rng.New(seedOf(cfg.NodeID))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a.server, a.clock = cfg.Server, cfg.Clock
	a.backoff = backoff{base: cfg.BackoffBase, max: cfg.BackoffMax, rand: cfg.Rand}
	a.dialOpts = cfg.DialOptions
	if cfg.TLS != nil {
		var err error
		if a.tls, err = tlsfiles.New(*cfg.TLS, cfg.Logger.With("xds_server", cfg.Server)); err != nil {
			return err
		}
	}
	a.node = &corev3.Node{Id: cfg.NodeID, UserAgentName: "corput"}
	if cfg.Zone != "" {
		a.node.Locality = &corev3.Locality{Zone: cfg.Zone}
	}
	a.health.log = cfg.Logger.With("xds_server", cfg.Server)
	return nil
}

// run holds a stream open to the server, reconnecting until ctx ends.
// accept is given each response, on run's goroutine; an error NACKs it.
// Until the first accepted response, Err reports that it is waiting.
func (a *ads) run(ctx context.Context, accept func(*discoveryv3.DiscoveryResponse) error) {
	a.wait(fmt.Errorf("xds server %s: waiting for the first response for %s", a.server, a.what))
	for attempt := 0; ; attempt++ {
		accepted, err := a.session(ctx, accept)
		if ctx.Err() != nil {
			return
		}
		if accepted {
			attempt = 0 // the server was healthy: start the backoff over
		}
		wait := a.backoff.delay(attempt)
		a.fail(fmt.Errorf("xds server %s: %w; keeping the last known %s, reconnecting in %v", a.server, err, a.kept, wait.Round(time.Millisecond)))
		if !clock.Sleep(ctx, a.clock, wait) {
			return
		}
	}
}

// session runs one stream until it breaks. It reports whether any response
// on it was accepted.
func (a *ads) session(ctx context.Context, accept func(*discoveryv3.DiscoveryResponse) error) (accepted bool, err error) {
	conn, err := grpc.NewClient(a.server, append([]grpc.DialOption{a.transport()}, a.dialOpts...)...)
	if err != nil {
		return false, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return false, fmt.Errorf("open stream: %w", err)
	}
	// A new stream starts with an empty version: a restarted control plane
	// may reuse version strings for different content, so ask for all.
	req := &discoveryv3.DiscoveryRequest{Node: a.node, TypeUrl: a.typeURL, ResourceNames: a.names}
	if err := stream.Send(req); err != nil {
		return false, fmt.Errorf("send request: %w", err)
	}
	var version string // last accepted on this stream
	var rejected string
	rejections := 0
	for {
		resp, err := stream.Recv()
		if err != nil {
			return accepted, fmt.Errorf("stream: %w", err)
		}
		next := &discoveryv3.DiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResourceNames: a.names, ResponseNonce: resp.GetNonce()}
		if err := a.check(resp, accept); err != nil {
			next.VersionInfo = version
			next.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
			a.fail(fmt.Errorf("xds server %s: rejected (NACK) version %q: %w; keeping the last accepted %s (version %q) until the control plane sends a valid one",
				a.server, resp.GetVersionInfo(), err, a.kept, version))
			// A snapshot cache answers a NACK by resending the same
			// version at once; pace the NACKs so a bad snapshot does
			// not become a busy loop.
			if resp.GetVersionInfo() == rejected {
				rejections++
				if !clock.Sleep(ctx, a.clock, a.backoff.delay(rejections-1)) {
					return accepted, ctx.Err()
				}
			} else {
				rejected, rejections = resp.GetVersionInfo(), 0
			}
		} else {
			version, accepted, rejected, rejections = resp.GetVersionInfo(), true, "", 0
			next.VersionInfo = version
			a.ok()
		}
		if err := stream.Send(next); err != nil {
			return accepted, fmt.Errorf("send ACK/NACK: %w", err)
		}
	}
}

// transport is a session's transport credentials: TLS from the files as
// they are now (a rotated certificate or CA is used from the next
// session on; the session up keeps its connection), or plaintext.
func (a *ads) transport() grpc.DialOption {
	if a.tls == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(a.tls.Client()))
}

// check refuses a response of another type than the one asked for, and
// otherwise gives it to accept.
func (a *ads) check(resp *discoveryv3.DiscoveryResponse, accept func(*discoveryv3.DiscoveryResponse) error) error {
	if resp.GetTypeUrl() != a.typeURL {
		return fmt.Errorf("unexpected type %q; corput asks only for %s", resp.GetTypeUrl(), a.typeURL)
	}
	return accept(resp)
}
