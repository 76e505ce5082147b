package balance

import (
	"errors"
	"strings"
	"testing"

	"github.com/corput/corput/internal/config"
)

func TestDefaultConfigIsTheSeeds(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Policy != LeastWork || c.MaxPending != 50 || c.SlowStart.Window.Seconds() != 60 || c.Outlier.Consecutive5xx != 3 ||
		c.Outlier.MaxEjectionPercent != 20 || c.PanicThresholdPercent != 80 || c.Zone.LocalPercent != 85 {
		t.Errorf("defaults drift from seed LB-PAY-001: %+v", c)
	}
	o := config.DefaultOrigin()
	if got := FromConfig(&o); got != c {
		t.Errorf("FromConfig(DefaultOrigin) = %+v\nwant DefaultConfig %+v", got, c)
	}
}

func TestUnboundedQueueRejected(t *testing.T) {
	for _, n := range []int{0, -1, 51, 1 << 30} {
		c := DefaultConfig()
		c.MaxPending = n
		err := c.Validate()
		if !errors.Is(err, ErrUnboundedQueue) || !strings.Contains(err.Error(), "pool.max_pending") ||
			!strings.Contains(err.Error(), "ERR_UNBOUNDED_QUEUE_REJECTED") {
			t.Errorf("max_pending %d: %v", n, err)
		}
		if _, err := NewOrigin("payments", c, members(2), Options{}); !errors.Is(err, ErrUnboundedQueue) {
			t.Errorf("NewOrigin with max_pending %d: %v", n, err)
		}
	}
}

func TestValidateReportsEveryKey(t *testing.T) {
	c := Config{} // every field zero
	err := c.Validate()
	for _, key := range []string{"balancer.policy", "balancer.choices", "balancer.ewma_decay", "balancer.default_rtt",
		"slow_start.min_weight_percent", "slow_start.aggression", "outlier.consecutive_5xx",
		"outlier.base_ejection_time", "pool.max_pending"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("zero Config: error does not name %s: %v", key, err)
		}
	}
}
