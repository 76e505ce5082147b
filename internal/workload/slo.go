package workload

import (
	"fmt"
	"net/url"
)

// validate checks a class's budget; errors start with the key's tail.
func (b *Budget) validate() error {
	if b == nil {
		return nil
	}
	switch {
	case b.P99 <= 0:
		return fmt.Errorf(".p99: missing or not positive; the guard acts on the p99, e.g. p99: 20ms")
	case b.P50 < 0:
		return fmt.Errorf(".p50: %v is negative", b.P50)
	case b.P90 < 0:
		return fmt.Errorf(".p90: %v is negative", b.P90)
	case b.P50 > 0 && b.P90 > 0 && b.P50 > b.P90:
		return fmt.Errorf(".p50: %v is above p90 (%v); a lower percentile cannot have a higher target", b.P50, b.P90)
	case b.P90 > b.P99 || b.P50 > b.P99:
		return fmt.Errorf(".p99: %v is below p50 or p90; a lower percentile cannot have a higher target", b.P99)
	}
	return nil
}

// validate checks the scale-out rule; errors start with the key's tail.
func (s *ScaleOut) validate() error {
	if s == nil {
		return nil
	}
	if s.AbovePercent < 0 || s.AbovePercent >= 100 {
		return fmt.Errorf(".above_percent: %v is outside (0, 100); e.g. 45", s.AbovePercent)
	}
	if s.For < 0 {
		return fmt.Errorf(".for: %v is negative; e.g. 30s", s.For)
	}
	if s.Webhook != "" {
		u, err := url.Parse(s.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf(".webhook: %q is not an http:// or https:// URL, e.g. http://127.0.0.1:9100/scale", s.Webhook)
		}
	}
	return nil
}
