package config_test

import (
	"errors"
	"fmt"

	"github.com/corput/corput/internal/config"
)

func ExampleParse() {
	src := `
routes: [{origin: payments}]
origins:
  - name: payments
    endpoints: [{address: 127.0.0.1:9001}]
    pool: {max_pending: unlimited, idle_timout: 60s}
`
	_, err := config.Parse([]byte(src), "gateway.yaml")
	var diags config.Diagnostics
	if errors.As(err, &diags) {
		for _, d := range diags {
			fmt.Printf("%s:%d %s [%s]\n", d.File, d.Line, d.Key, d.Code)
		}
		fmt.Println(diags.HasCode(config.CodeUnboundedQueue))
	}
	// Output:
	// gateway.yaml:6 origins[0].pool.idle_timout []
	// gateway.yaml:6 origins[0].pool.max_pending [ERR_UNBOUNDED_QUEUE_REJECTED]
	// true
}

func ExampleConfig_Validate() {
	cfg := config.Default()
	api := config.DefaultOrigin()
	api.Name = "api"
	api.Endpoints = []config.Endpoint{{Address: "127.0.0.1:9001", Weight: 1}}
	api.SLO = &config.SLO{Average: 25_000_000} // 25ms, and no percentile
	cfg.Origins = []config.Origin{api}
	cfg.Routes = []config.Route{{PathPrefix: "/", Origin: "api"}}
	fmt.Println(cfg.Validate())
	// Output:
	// origins[0].slo.average: ERR_AVERAGE_ONLY_TARGET_REJECTED: an average target without p90 or p99 hides the tail: a 70/30 mix of 15ms and 140ms requests averages about 52ms while its p99 runs far above (seed ADV-AO-01, INV-LB-04); set p90 and p99, e.g. {p50: 8ms, p90: 14ms, p99: 20ms}
}
