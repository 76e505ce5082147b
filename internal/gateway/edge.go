package gateway

import (
	"fmt"
	"math"
	"net"
	"strings"

	"github.com/corput/corput/internal/addrrule"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/proxy"
	"github.com/corput/corput/internal/proxyproto"
	"github.com/corput/corput/internal/ratelimit"
)

// The ingress edge (docs/gateway.md, "Ingress edge"): the PROXY protocol
// on the downstream listener, the listener's and the routes' address
// rules, and the routes' rate limits. All of it is read from the
// configuration in force, so a reload changes it in place.

// defaultRateKeys is routes[].rate_limit.max_keys's default.
const defaultRateKeys = 65536

// setEdges gives st's table its admissions: the listener's address rules,
// and each route's rules and rate limit. A route of prev (the state a
// reload replaces) with the same name and the same rate_limit keeps its
// buckets; any other starts full.
func (g *Gateway) setEdges(st *state, prev *state) {
	cfg := st.cfg
	t := st.table
	t.Listener = proxy.Listener{
		Rules:  addrrule.New(cfg.Downstream.Addresses.Allow, cfg.Downstream.Addresses.Deny),
		Denied: g.metrics.RequestsRefused.WithLabelValues("", forward.AddressDenied.String()),
	}
	kept := map[string]*proxy.Edge{}
	if prev != nil {
		for i, rt := range prev.cfg.Routes {
			if i < len(prev.table.Edges) && prev.table.Edges[i] != nil && rt.RateLimit != nil {
				kept[rt.RouteName()+"\x00"+rateKey(rt.RateLimit)] = prev.table.Edges[i]
			}
		}
	}
	t.Edges = make([]*proxy.Edge, len(cfg.Routes))
	for i, rt := range cfg.Routes {
		if rt.RateLimit == nil && rt.Addresses.Empty() {
			continue
		}
		name := rt.RouteName()
		e := &proxy.Edge{
			Rules:   addrrule.New(rt.Addresses.Allow, rt.Addresses.Deny),
			Denied:  g.metrics.RequestsRefused.WithLabelValues(name, forward.AddressDenied.String()),
			Limited: g.metrics.RequestsRefused.WithLabelValues(name, forward.RateLimited.String()),
		}
		if rl := rt.RateLimit; rl != nil {
			switch {
			case rl.Key == config.RateKeyClientAddress:
				e.KeyAddr = true
			case strings.HasPrefix(rl.Key, config.RateKeyHeaderPrefix):
				e.Header = strings.ToLower(strings.TrimPrefix(rl.Key, config.RateKeyHeaderPrefix))
			}
			if old, ok := kept[name+"\x00"+rateKey(rl)]; ok {
				e.Limit = old.Limit
			} else {
				e.Limit = ratelimit.New(rateSettings(rl), g.clk)
			}
		}
		t.Edges[i] = e
	}
}

// rateKey is a rate_limit block's identity: a limiter is kept across a
// reload only for the same settings.
func rateKey(rl *config.RateLimit) string { return fmt.Sprintf("%+v", *rl) }

// rateSettings are a rate_limit block's limiter settings, its defaults
// applied: burst as many as a second's rate, 65536 keys.
func rateSettings(rl *config.RateLimit) ratelimit.Settings {
	s := ratelimit.Settings{Rate: rl.RequestsPerSecond, Burst: rl.Burst, MaxKeys: rl.MaxKeys}
	if s.Burst == 0 {
		s.Burst = int(math.Ceil(rl.RequestsPerSecond))
	}
	if s.MaxKeys == 0 {
		s.MaxKeys = defaultRateKeys
	}
	s.Keyed = rl.Key != "" && rl.Key != config.RateKeyNone
	return s
}

// proxyPolicy is the PROXY protocol policy of cfg, nil for none.
func (g *Gateway) proxyPolicy(cfg *config.Config) *proxyproto.Policy {
	pp := cfg.Downstream.ProxyProtocol
	if pp == nil {
		return nil
	}
	p := &proxyproto.Policy{From: pp.From, Timeout: cfg.Downstream.ReadHeaderTimeout,
		Count: func(reason string) { g.metrics.ProxyProtocolRefused.WithLabelValues(reason).Inc() }}
	if pp.Other == config.ProxyOtherPlain {
		p.Other = proxyproto.Plain
	}
	return p
}

// edgeListener wraps the downstream listener in the PROXY protocol policy
// in force (a pass-through while there is none), so that a reload turns
// it on, off or changes it for the connections accepted next.
func (g *Gateway) edgeListener(ln net.Listener) net.Listener {
	return proxyproto.NewListener(ln, g.ppCur.Load)
}
