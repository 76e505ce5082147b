package workload

import (
	"errors"
	"testing"
	"time"
)

func TestDefaultIsSkewed(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestUniformRejected(t *testing.T) {
	for name, m := range map[string]Mix{
		"empty":     {},
		"one class": {Classes: []Class{{Name: "ping", Percent: 100, Latency: 4 * time.Millisecond}}},
		"same cost": {Classes: []Class{{Name: "a", Percent: 50, Latency: time.Millisecond}, {Name: "b", Percent: 50, Latency: time.Millisecond}}},
	} {
		if err := m.Validate(); !errors.Is(err, ErrNoSkew) {
			t.Errorf("%s: Validate = %v, want %s", name, err, CodeNoSkew)
		}
	}
}

func TestPickShares(t *testing.T) {
	m := Default()
	if m.Pick(0.0).Name != "light" || m.Pick(0.6999).Name != "light" || m.Pick(0.70).Name != "heavy" || m.Pick(0.9999).Name != "heavy" {
		t.Fatal("Pick does not follow the 70/30 split")
	}
}
