package config

// SplitTarget is one of routes[].split: an origin and its weight, the
// share of the route's requests it gets relative to the other targets'.
type SplitTarget struct {
	Origin string `yaml:"origin"`
	Weight int    `yaml:"weight"`
	// retry is the route's own retry block completed with this target's
	// origin's keys (inheritRetry); nil without routes[].retry.
	retry *Retry
}

// maxSplitWeight bounds a split target's weight: sums stay far from
// overflow, and 10000 already expresses a hundredth of a percent.
const maxSplitWeight = 1_000_000

// Origins are the origins a route sends to: its origin, or its split's
// targets in order.
func (r *Route) Origins() []string {
	if len(r.Split) == 0 {
		if r.Origin == "" {
			return nil
		}
		return []string{r.Origin}
	}
	out := make([]string, len(r.Split))
	for i, t := range r.Split {
		out[i] = t.Origin
	}
	return out
}

// TargetRetry is the retry rules of route i's requests sent to split
// target t: the route's own (routes[].retry) completed key by key with
// that target's origin's; nil when the route has no retry block of its
// own.
func (c *Config) TargetRetry(i, t int) *Retry {
	rt := &c.Routes[i]
	if rt.Retry == nil {
		return nil
	}
	if t < len(rt.Split) && rt.Split[t].retry != nil {
		return rt.Split[t].retry
	}
	return rt.Retry
}

// checkSplitKey checks routes[].split_hash_on: a valid key source, and
// only with a split.
func (c *Config) checkSplitKey(r *reporter, p string, rt *Route) {
	if rt.SplitHashOn == "" {
		return
	}
	if len(rt.Split) == 0 {
		r.errorf(p+".split_hash_on", "makes a split sticky, and the route has no split; remove split_hash_on or write split: [{origin: A, weight: 95}, {origin: B, weight: 5}]")
	} else if _, err := ParseHashOn(rt.SplitHashOn); err != nil {
		r.errorf(p+".split_hash_on", "%v", err)
	}
}

// checkSplit checks the split of the route at p, its one action
// (checkAction): every target a known origin named once, weights not
// negative and not all zero. It counts the routes to each origin in
// origins.
func (c *Config) checkSplit(r *reporter, p string, rt *Route, origins map[string]int) {
	if len(rt.Split) == 0 {
		r.errorf(p+".split", "is empty; list the targets, e.g. split: [{origin: v1, weight: 95}, {origin: v2, weight: 5}], or name one origin instead")
		return
	}
	sum := 0
	seen := map[string]int{}
	for j, t := range rt.Split {
		q := joinIndex(p+".split", j)
		if k, dup := seen[t.Origin]; dup && t.Origin != "" {
			r.errorf(q+".origin", "%q is also split[%d]; name each origin once and give it the sum of the weights", t.Origin, k)
		} else {
			seen[t.Origin] = j
			switch {
			case t.Origin == "":
				r.errorf(q+".origin", "missing; name the origin")
			case c.knownOrigin(r, q+".origin", t.Origin, origins):
				origins[t.Origin]++
			}
		}
		switch {
		case t.Weight < 0:
			r.errorf(q+".weight", "%d is negative; use 0 (no requests) up to %d", t.Weight, maxSplitWeight)
		case t.Weight > maxSplitWeight:
			r.errorf(q+".weight", "%d is over %d; scale the weights down (only their ratio counts)", t.Weight, maxSplitWeight)
		default:
			sum += t.Weight
		}
	}
	if sum == 0 {
		r.errorf(p+".split", "weights sum to 0, so no target would get a request; give at least one target a positive weight")
	}
}

// splitRetry completes a split route's own retry block per target, with
// each target's origin's keys (as inheritRetry does for one origin); the
// route's block itself takes its first target's.
func (c *Config) splitRetry(i int, merge func(base Retry) Retry) {
	rt := &c.Routes[i]
	for t := range rt.Split {
		base := DefaultOrigin().Retry
		if o, ok := c.Origin(rt.Split[t].Origin); ok {
			base = o.Retry
		}
		m := merge(base)
		rt.Split[t].retry = &m
	}
}
