package subset

import (
	"fmt"
	"math/bits"
)

// DefaultSlack is the hysteresis margin of DefaultSizing and FixedSize.
const DefaultSlack = 0.2

// DefaultSizing is Zuul's ideal subset size (docs/spec.md): 25–50 endpoints.
var DefaultSizing = Sizing{Min: 25, Max: 50, Slack: DefaultSlack}

// Sizing chooses the subset count S, a power of two, from the number of
// endpoints N and frontends F.
//
// A fresh choice is the smallest S with N/S ≤ Max: subsets as large as the
// ideal range allows, and one subset of everything for origins of at most Max
// endpoints. A current S is kept while N/S stays within
// [Min·(1−Slack), Max·(1+Slack)], so an origin whose size oscillates around a
// boundary does not reshuffle. S never exceeds N (no empty subset) nor F (no
// subset without a frontend); when F caps it, subsets are larger than Max.
type Sizing struct {
	Min   int     `json:"min"`   // smallest ideal subset size
	Max   int     `json:"max"`   // largest ideal subset size; at least 2·Min
	Slack float64 `json:"slack"` // hysteresis margin in [0, 1)
}

// FixedSize returns the sizing for config subset.size = k: subsets of at
// most k endpoints (between k/2 and k when chosen), for k ≥ 2. k = 0 means
// automatic: DefaultSizing.
func FixedSize(k int) Sizing {
	if k == 0 {
		return DefaultSizing
	}
	return Sizing{Min: k / 2, Max: k, Slack: DefaultSlack}
}

// NewSizing returns the sizing for an origin's config: subset.size when it
// is set, else the ideal range subset.min_size–subset.max_size with the
// default slack.
func NewSizing(size, minSize, maxSize int) (Sizing, error) {
	if size < 0 || size == 1 {
		return Sizing{}, fmt.Errorf("subset.size %d: must be 0 (automatic) or at least 2", size)
	}
	z := FixedSize(size)
	if size == 0 {
		z = Sizing{Min: minSize, Max: maxSize, Slack: DefaultSlack}
	}
	return z, z.Validate()
}

// Validate reports a sizing that could not pick a stable power of two,
// naming the config key to change.
func (z Sizing) Validate() error {
	switch {
	case z.Min < 1:
		return fmt.Errorf("subset.min_size %d: must be at least 1 (25 is the default)", z.Min)
	case z.Max < 2*z.Min:
		return fmt.Errorf("subset.max_size %d: less than twice subset.min_size %d, so some origin sizes would have no power-of-two subset count in range; use at least %d", z.Max, z.Min, 2*z.Min)
	case z.Slack < 0 || z.Slack >= 1:
		return fmt.Errorf("subset sizing: slack %g: must be in [0, 1)", z.Slack)
	}
	return nil
}

func (z Sizing) orDefault() Sizing {
	if z == (Sizing{}) {
		return DefaultSizing
	}
	return z
}

// Subsets returns the subset count for n endpoints and the given number of
// frontends, keeping current (0 if there is none yet) when the hysteresis
// band allows it.
func (z Sizing) Subsets(n, frontends, current int) int {
	limit := floorPow2(min(n, frontends))
	if current >= 1 && current <= limit && current&(current-1) == 0 {
		size := float64(n) / float64(current)
		if size >= float64(z.Min)*(1-z.Slack) && size <= float64(z.Max)*(1+z.Slack) {
			return current
		}
	}
	s := 1
	for s < limit && n > z.Max*s {
		s *= 2
	}
	return s
}

// floorPow2 returns the largest power of two ≤ x, and 1 for x < 1.
func floorPow2(x int) int {
	if x < 1 {
		return 1
	}
	return 1 << (bits.Len(uint(x)) - 1)
}
