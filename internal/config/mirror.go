package config

import "slices"

// Mirror is routes[].mirror: a sampled share of the route's requests is
// also sent to a shadow origin, its answer read and dropped
// (docs/gateway.md, "Mirroring"). The names follow Envoy's
// request_mirror_policies (cluster, runtime_fraction) and the Gateway
// API's HTTPRequestMirrorFilter (backendRef, percent).
type Mirror struct {
	// Origin is the shadow origin: an entry of origins other than the
	// route's own.
	Origin string `yaml:"origin"`
	// Percent is the share of the route's requests mirrored, in (0, 100];
	// default 100 (Envoy's and the Gateway API's default: every request).
	Percent float64 `yaml:"percent"`
	// MaxInFlight caps the route's mirrors in flight: over it a mirror is
	// dropped and counted, never queued. Default DefaultMirrorInFlight.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxBodyBytes is the largest request body mirrored; a longer one is
	// not (the request alone is not mirrored, and counted). 0, the
	// default: the route's retry.replay_buffer.
	MaxBodyBytes int `yaml:"max_body_bytes"`
}

// DefaultMirrorInFlight is routes[].mirror.max_in_flight's default.
const DefaultMirrorInFlight = 100

func (m *Mirror) setDefaults() { *m = Mirror{Percent: 100, MaxInFlight: DefaultMirrorInFlight} }

// checkMirror checks route i's mirror block: a known origin other than
// the route's, a share in (0, 100], a cap of at least 1, a body bound in
// range. It counts the shadow as one of its origin's routes (used).
func (c *Config) checkMirror(r *reporter, i int, origins map[string]int) {
	rt := c.Routes[i]
	m := rt.Mirror
	if m == nil {
		return
	}
	p := joinIndex("routes", i) + ".mirror"
	switch {
	case rt.Own():
		r.errorf(p, "copies requests an origin gets, and this route answers itself (redirect or answer): no request would be mirrored; remove the mirror, or give the route an origin")
	case m.Origin == "":
		r.errorf(p+".origin", "missing; name the shadow origin the route's sampled requests are copied to")
	case !c.knownOrigin(r, p+".origin", m.Origin, origins): // reported
	case slices.Contains(rt.Origins(), m.Origin):
		r.errorf(p+".origin", "%q is the route's own origin: it would get the sampled requests twice; name a separate shadow origin", m.Origin)
	default:
		origins[m.Origin]++
	}
	if !(m.Percent > 0 && m.Percent <= 100) {
		r.errorf(p+".percent", "%v is outside (0, 100]: the share of the route's requests mirrored; 100 (every request) is the default, 10 mirrors one in ten (remove the mirror block to mirror none)", m.Percent)
	}
	if m.MaxInFlight < 1 {
		r.errorf(p+".max_in_flight", "%d: the mirrors in flight need a bound of at least 1 (over it a mirror is dropped, never queued); the default is %d", m.MaxInFlight, DefaultMirrorInFlight)
	}
	if m.MaxBodyBytes < 0 || m.MaxBodyBytes > MaxReplayBuffer {
		r.errorf(p+".max_body_bytes", "%d: give 0 (the route's retry.replay_buffer) or 1 to %d bytes", m.MaxBodyBytes, MaxReplayBuffer)
	}
}
