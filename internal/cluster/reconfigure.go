package cluster

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/upstream"
)

// A reload changes an origin in place, in two steps: Prepare does
// everything that can fail (the new dialer reads the TLS files, the pool
// and balancer settings are validated, a new placement is built) and
// touches nothing, so that a reload with any error is refused whole;
// Commit applies the change and cannot fail. What changes in place:
//
//   - the balancer's settings (policy, weights, slow start, outlier rules,
//     zones): balance.Origin.Reconfigure, endpoints keep their state;
//   - retries and timeouts: requests started before keep what they had;
//   - pool settings (caps, timeouts, prewarm) and the dialer (protocol,
//     TLS files, connect timeout): pool.Reconfigure on every pool — open
//     connections carry on until their lifetime, a lower cap retires only
//     the connections above it as they become idle, new handshakes use the
//     new files;
//   - a static endpoint list: the membership delta path (Apply);
//   - the key source of a sticky policy (balancer.hash_on);
//   - the subset settings (or a change to or from a sticky policy, which
//     places by "none"): a new placement (set to the origin's shared ring
//     indices when it has them and the algorithm places by them), and only
//     loops whose subset changed touch their pools;
//   - the fleet's size: the same placement told the new fleet
//     (Placement.SetFleet: every endpoint keeps its ring index, the subset
//     count is capped by the new number of frontends); this gateway's
//     fleet instance: the same placement read at the new instance; either
//     way only loops whose subset changed touch their pools.
//
// An origin whose configuration and fleet position did not change keeps
// everything: Prepare returns nil.

// Change is a prepared reconfiguration of one origin.
type Change struct {
	o         *Origin
	oc        *config.Origin
	balance   *balance.Config
	pool      pool.Config
	dialer    pool.Dialer // nil: keep the pool's
	placement subset.Placement
	placedOn  []string         // the endpoints placement was built on
	members   []balance.Member // the new static membership, nil when unchanged
	fleet     *config.Fleet    // the new fleet position, nil when unchanged
}

// Prepare checks oc and the gateway's fleet position fl against the
// origin's and returns what Commit will apply, nil when nothing changed,
// or the error that refuses the reload. The TLS files are read again
// whenever the origin has TLS, so that certificates rotated under the same
// paths are picked up.
func (o *Origin) Prepare(oc *config.Origin, fl config.Fleet) (*Change, error) {
	old := o.conf.Load()
	o.mu.Lock()
	oldFleet := o.fleet
	o.mu.Unlock()
	if reflect.DeepEqual(old, oc) && oc.TLS == nil && fl == oldFleet {
		return nil, nil
	}
	c := &Change{o: o, oc: oc}
	if fl != oldFleet {
		c.fleet = &fl
	}
	var err error
	if c.pool, err = poolConfig(oc); err != nil {
		return nil, err
	}
	if bc := balance.FromConfig(oc); !reflect.DeepEqual(bc, balance.FromConfig(old)) {
		if err := bc.Validate(); err != nil {
			return nil, fmt.Errorf("origins[%s].%w", oc.Name, err)
		}
		c.balance = &bc
	}
	if o.env.Dialer == nil && (oc.TLS != nil || dialerChanged(old, oc)) {
		if c.dialer, err = newDialer(oc); err != nil {
			return nil, err
		}
	}
	if oc.Discovery.Type == config.DiscoveryStatic || oc.Discovery.Type == "" {
		if members := membersOf(oc.Endpoints); !slices.Equal(members, membersOf(old.Endpoints)) {
			c.members = members
		}
	}
	if !reflect.DeepEqual(old.Subset, oc.Subset) || old.Balancer.Sticky() != oc.Balancer.Sticky() {
		addrs := o.addrs()
		if c.members != nil {
			addrs = addrsOf(c.members)
		}
		if c.placement, err = o.newPlacement(oc, fl, addrs); err != nil {
			return nil, err
		}
		c.placedOn = addrs
	}
	return c, nil
}

// dialerChanged reports whether the keys the dialer is built from differ.
func dialerChanged(a, b *config.Origin) bool {
	return a.Protocol != b.Protocol || a.Timeouts.Connect != b.Timeouts.Connect ||
		a.Pool.MaxResponseHeaderBytes != b.Pool.MaxResponseHeaderBytes || !reflect.DeepEqual(a.TLS, b.TLS)
}

func (o *Origin) addrs() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return addrsOf(o.members)
}

// Commit applies the change. Requests in flight finish on what they
// started with: their policy, their lease, their pool.
func (c *Change) Commit() error {
	o := c.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return fmt.Errorf("origin %s: reconfigured after shutdown", o.name)
	}
	if c.balance != nil {
		if err := o.bal.Reconfigure(*c.balance); err != nil {
			return err // validated in Prepare: not reached
		}
	}
	old := o.conf.Load()
	if !reflect.DeepEqual(old.Retry, c.oc.Retry) {
		o.policy.Store(o.newPolicy(c.oc.Retry))
	}
	o.reqTimeout.Store(int64(c.oc.Timeouts.Request))
	if c.pool != o.poolCfg || c.dialer != nil {
		o.poolCfg = c.pool
		// Open connections carry on with a new dialer until max_lifetime,
		// but the fast path relays only upstream's own connections (HTTP/1.1
		// and HTTP/2): a change that turns it on for this origin renews every
		// pool first, while the origin still goes through net/http, which
		// takes any.
		renew := false
		if c.dialer != nil {
			o.dialer = c.dialer
			fast := o.env.FastPath && upstream.DialsFast(c.dialer)
			renew = fast && !o.fast.Load()
			if !renew {
				o.fast.Store(fast)
			}
		}
		homes := o.drv.Homes()
		for _, ol := range o.loops {
			for _, p := range *ol.pools.Load() {
				cfg := homeCfg(c.pool, c.oc, p.Addr(), ol.idx, homes)
				if !slices.Contains(ol.subset, p.Addr()) {
					cfg.Prewarm = 0 // an on-demand pool outside the subset stays unwarmed
				}
				if err := p.Reconfigure(cfg, c.dialer); err != nil {
					return err // subsetFleet has a gateway and a loop at least: not reached
				}
				if renew {
					p.Renew()
				}
			}
		}
		if renew {
			o.fast.Store(true)
		}
	}
	o.conf.Store(c.oc)
	o.health.Configure(c.oc)
	o.drv.SetMultiplexes(multiplexes(c.oc))
	o.keys.Store(keySource(c.oc))
	if c.fleet != nil {
		resized := c.fleet.Size != o.fleet.Size
		o.fleet = *c.fleet
		if resized && c.placement == nil {
			// The same ring, its subset count capped by the new number of
			// frontends: a resize moves no endpoint's index, so a ring
			// with its own history keeps it (rebuilding it from the
			// current members would reshuffle a gateway whose membership
			// changed since it started).
			if err := o.placement.SetFleet(o.subsetFleet(o.fleet)); err != nil {
				return err // subsetFleet has a gateway and a loop at least: not reached
			}
			if sp, ok := o.placement.(subset.SharedPlacement); ok && o.shared != nil {
				if err := sp.PlaceShared(*o.shared); err != nil { // the control plane's count, capped anew
					return err // checked when applied: not reached
				}
			}
		}
	}
	if c.placement != nil {
		if c.members == nil && !slices.Equal(c.placedOn, addrsOf(o.members)) {
			// Discovery changed the membership since Prepare: place the
			// endpoints there are now. The settings were checked by
			// Prepare's placement, so this cannot fail but on a bug.
			p, err := o.newPlacement(c.oc, o.fleet, addrsOf(o.members))
			if err != nil {
				return err
			}
			c.placement = p
		}
		o.placement = c.placement
		if sp, ok := c.placement.(subset.SharedPlacement); ok && o.shared != nil {
			// A new sizing or algorithm keeps the fleet's shared ring:
			// every gateway reloaded alike computes the same placement.
			if err := sp.PlaceShared(*o.shared); err != nil {
				return err // checked when applied: not reached
			}
		}
		o.noteModeLocked()
		if c.members == nil {
			return o.resubsetLocked()
		}
		o.members = c.members
		if err := o.bal.Update(c.members); err != nil {
			return err
		}
		o.changes++
		o.m.membership.Inc()
		return o.resubsetLocked()
	}
	if c.members != nil {
		return o.applyLocked(Membership{Members: c.members})
	}
	if c.fleet != nil {
		return o.resubsetLocked()
	}
	return nil
}
