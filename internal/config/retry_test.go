package config

import (
	"slices"
	"testing"
	"time"
)

// TestRouteRetryInheritsTheOriginsKeys: a route's retry block takes every
// key it leaves out from its origin's retry, and a route without one has
// its origin's.
func TestRouteRetryInheritsTheOriginsKeys(t *testing.T) {
	cfg, err := Parse([]byte(`
routes:
  - {path_prefix: /pay, origin: api, retry: {idempotency_header: Idempotency-Key, on: [connect-failure, gateway-error]}}
  - {path_prefix: /, origin: api}
  - {path_prefix: /quick, origin: api, retry: {per_try_timeout: 300ms}}
origins:
  - name: api
    endpoints: [{address: 127.0.0.1:9001}]
    retry: {attempts: 2, replay_buffer: 4096, backoff: {base: 5ms}, per_try_timeout: 1s}
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pay := cfg.RouteRetry(0)
	if pay.IdempotencyHeader != "Idempotency-Key" || !slices.Equal(pay.On, []RetryOn{RetryConnectFailure, RetryGatewayError}) {
		t.Errorf("the route's own keys: %+v", pay)
	}
	if pay.Attempts != 2 || pay.ReplayBuffer != 4096 || pay.Backoff.Base != 5*time.Millisecond || pay.Backoff.Max != 250*time.Millisecond || pay.BudgetPercent != 20 || pay.PerTryTimeout != time.Second {
		t.Errorf("the keys left out are not the origin's: %+v", pay)
	}
	if rest := cfg.RouteRetry(1); rest.IdempotencyHeader != "" || rest.Attempts != 2 || !slices.Equal(rest.On, DefaultOrigin().Retry.On) {
		t.Errorf("a route without retry: %+v; want the origin's", rest)
	}
	if quick := cfg.RouteRetry(2); quick.PerTryTimeout != 300*time.Millisecond || quick.Attempts != 2 {
		t.Errorf("a route's own per_try_timeout: %+v; want 300ms, the rest the origin's", quick)
	}
}
