package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// FleetXDS follows this gateway's fleet position from a control plane
// (fleetwire.go): on its own ADS stream it subscribes to the FleetType
// resource named by its node id, ACKs a valid position and NACKs an
// invalid one. A response without the resource changes nothing (the
// control plane has not placed the node yet); one with more than one is
// refused. While the stream is down the last position stays in force, and
// the control plane holds it for the node for its grace.
type FleetXDS struct {
	ads
	running atomic.Bool
}

// NewFleetXDS returns the follower of the position of cfg.NodeID at
// cfg.Server; cfg.Clusters is not used. It connects on Run.
func NewFleetXDS(cfg XDSConfig) (*FleetXDS, error) {
	if _, _, err := net.SplitHostPort(cfg.Server); err != nil {
		return nil, fmt.Errorf("fleet.server %q is not host:port (%v); name the control plane, e.g. corput-control-plane:18000", cfg.Server, err)
	}
	if cfg.NodeID == "" {
		return nil, errors.New("fleet.node_id is empty; the control plane places each node id it sees once")
	}
	f := &FleetXDS{}
	if err := f.init(cfg); err != nil {
		return nil, fmt.Errorf("fleet.tls: %w", err)
	}
	f.typeURL, f.names = FleetType, []string{cfg.NodeID}
	f.what, f.kept = "the fleet position of node "+cfg.NodeID, "fleet position"
	return f, nil
}

// Run follows the position until ctx ends, calling emit (on Run's
// goroutine) with each position that differs from the last one emitted;
// every Run emits its first position.
func (f *FleetXDS) Run(ctx context.Context, emit func(Fleet)) error {
	if !f.running.CompareAndSwap(false, true) {
		return errAlreadyRunning
	}
	defer f.running.Store(false)
	var last Fleet
	f.run(ctx, func(resp *discoveryv3.DiscoveryResponse) error {
		res := resp.GetResources()
		switch len(res) {
		case 0:
			return nil
		case 1:
		default:
			return fmt.Errorf("%d fleet positions for one node; want one", len(res))
		}
		fl, err := FleetFromResource(res[0])
		if err != nil {
			return err
		}
		if fl != last {
			last = fl
			emit(fl)
		}
		return nil
	})
	return nil
}
