package lab

import (
	"context"
	"testing"
	"time"
)

// benchStep simulates 10 virtual seconds of one step on one gateway with 16
// loops in front of 800 endpoints and reports the cost per simulated
// request: the price of the real pool, balancer and event queue per request.
func benchStep(b *testing.B, name string) {
	sc := DefaultScenario(ScaleSmall, 1)
	sc.Fleet.Gateways = 1
	sc.Steps = StepsScenario{Duration: 10 * time.Second, SteadyFrom: 5 * time.Second, SteadyTo: 10 * time.Second,
		DeployAt: time.Hour, DeployBatch: 1, DeployEvery: time.Second, AutoscaleAt: time.Hour, AggressiveIdle: time.Second}
	var st step
	for _, s := range steps {
		if s.name == name {
			st = s
		}
	}
	b.ReportAllocs()
	var requests int64
	for b.Loop() {
		r, err := runStep(context.Background(), &sc, st, nil)
		if err != nil {
			b.Fatal(err)
		}
		requests += r.Requests
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(requests), "ns/request")
}

func BenchmarkStepPerLoopPools(b *testing.B) { benchStep(b, "per_loop_pools") }
func BenchmarkStepSubsetting(b *testing.B)   { benchStep(b, "subsetting") }
func BenchmarkStepConnPerRequest(b *testing.B) {
	benchStep(b, "conn_per_request")
}
