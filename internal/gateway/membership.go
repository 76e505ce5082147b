package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/rng"
	"github.com/corput/corput/internal/subset"
)

// RunDiscovery follows the membership of every origin whose discovery type
// is file or xds until ctx ends: sources emit full membership sets, a
// debouncer coalesces each origin's changes within its debounce window, and
// Apply turns the result into ring deltas and pool changes. Origins sharing
// an xDS server share one ADS stream. Static origins need nothing here.
// A reload that adds, removes or changes a file or xDS source restarts the
// sources on the new configuration (a restarted source starts with a full
// set, which changes nothing where nothing changed).
func (g *Gateway) RunDiscovery(ctx context.Context) error {
	for {
		restart := g.discoveryRestart()
		run, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- g.runSources(run) }()
		select {
		case err := <-done:
			cancel()
			if err != nil || ctx.Err() != nil {
				return err
			}
			// No source (or every one ended): a reload may add one.
			select {
			case <-ctx.Done():
				return nil
			case <-restart:
			}
		case <-restart:
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				return err
			}
			g.log.Info("membership sources restarted on the reloaded configuration")
		}
	}
}

// runSources runs the current configuration's membership sources until ctx
// ends or one fails.
func (g *Gateway) runSources(ctx context.Context) error {
	deb := discovery.NewDebouncer(g.clk, func(u discovery.Update) {
		if err := g.ApplyMembership(u.Origin, membershipFromDiscovery(u.Endpoints)); err != nil {
			g.log.Error("apply membership", "origin", u.Origin, "err", err)
			g.SetSourceError(u.Origin, err)
		}
	})
	defer deb.Close()

	var sources []discovery.Source
	xdsByServer := map[string]*discovery.XDSConfig{}
	var xdsOrigins = map[string][]*cluster.Origin{}
	for _, o := range g.st().list {
		oc := o.Config()
		dc := oc.Discovery
		if dc.Type != config.DiscoveryFile && dc.Type != config.DiscoveryXDS {
			continue
		}
		deb.SetWindow(oc.Name, oc.Debounce, 0)
		switch dc.Type {
		case config.DiscoveryFile:
			src, err := discovery.NewFile(discovery.FileConfig{Origin: oc.Name, Path: dc.Path, Clock: g.clk, Logger: g.log})
			if err != nil {
				return fmt.Errorf("origins[%s].discovery: %w", oc.Name, err)
			}
			o.SetSource(src)
			sources = append(sources, src)
		case config.DiscoveryXDS:
			xc, ok := xdsByServer[dc.Server]
			if !ok {
				node := dc.NodeID
				if node == "" {
					host, _ := os.Hostname()
					node = fmt.Sprintf("corput-%s-%d", host, g.st().fleet().Instance)
				}
				xc = &discovery.XDSConfig{Server: dc.Server, NodeID: node, Zone: oc.Zone.Local, TLS: dc.TLS.Files(),
					Clusters: map[string]string{}, Clock: g.clk, Logger: g.log,
					Rand: rng.New(g.opts.Seed ^ rng.FNV(dc.Server))}
				xdsByServer[dc.Server] = xc
			}
			name := dc.Cluster
			if name == "" {
				name = oc.Name
			}
			xc.Clusters[oc.Name] = name
			xdsOrigins[dc.Server] = append(xdsOrigins[dc.Server], o)
		}
	}
	for server, xc := range xdsByServer {
		src, err := discovery.NewXDS(*xc)
		if err != nil {
			return fmt.Errorf("discovery.server %s: %w", server, err)
		}
		for _, o := range xdsOrigins[server] {
			o.SetSource(src)
		}
		sources = append(sources, src)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(sources))
	for i, src := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = src.Run(ctx, deb.Offer)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ApplyMembership gives an origin its full membership, with the shared
// ring indices its source gave, if any (cluster.Origin.ApplyMembership).
func (g *Gateway) ApplyMembership(originName string, m cluster.Membership) error {
	o, ok := g.st().origins[originName]
	if !ok {
		return fmt.Errorf("apply membership: unknown origin %q", originName)
	}
	return o.ApplyMembership(m)
}

// membershipFromDiscovery is an update's membership: the balancer's
// members and, when the source indexed every endpoint, the shared ring
// indices and subset count (the balancer does not need them; the
// placement does).
func membershipFromDiscovery(eps []discovery.Endpoint) cluster.Membership {
	out := make([]balance.Member, len(eps))
	for i, e := range eps {
		out[i] = balance.Member{Address: e.Address, Zone: e.Zone, Weight: e.Weight}
	}
	m := cluster.Membership{Members: out}
	if idx, subsets := discovery.RingIndices(eps); idx != nil {
		m.Shared = &subset.Shared{Indices: idx, Subsets: subsets}
	}
	return m
}
