package subset

import "fmt"

// Fleet is the set of frontends that share an origin: Gateways gateway
// instances (config fleet.size) with Loops loops each.
type Fleet struct {
	Gateways int `json:"gateways"`
	Loops    int `json:"loops"`
}

// Frontend is one loop of one gateway: the unit that owns a subset.
type Frontend struct {
	Gateway int `json:"gateway"`
	Loop    int `json:"loop"`
}

// Frontends returns F = Gateways·Loops.
func (f Fleet) Frontends() int { return f.Gateways * f.Loops }

// Number returns the frontend number g·K + l that the subset mapping uses.
func (f Fleet) Number(fe Frontend) int { return fe.Gateway*f.Loops + fe.Loop }

// Frontend returns the frontend with number n; the inverse of Number.
func (f Fleet) Frontend(n int) Frontend {
	return Frontend{Gateway: n / f.Loops, Loop: n % f.Loops}
}

// Validate reports a fleet without gateways or loops.
func (f Fleet) Validate() error {
	if f.Gateways < 1 {
		return fmt.Errorf("fleet: %d gateways: fleet.size must be at least 1", f.Gateways)
	}
	if f.Loops < 1 {
		return fmt.Errorf("fleet: %d loops: loops must be at least 1", f.Loops)
	}
	return nil
}

func (f Fleet) orDefault() Fleet {
	if f == (Fleet{}) {
		return Fleet{Gateways: 1, Loops: 1}
	}
	return f
}
