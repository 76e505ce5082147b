package lab

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// tinyPayments is the payments drill at a scale go test can afford: 8 pods
// in three zones (3, 3, 2: zone routing needs 6), 3000 req/s, one pod
// killed. Below about 2000 req/s a gateway of another zone sends the dead
// pod too few requests to see 3 failures within 500 ms (passive ejection
// needs traffic: 800 req/s took 630 ms).
func tinyPayments() Scenario {
	sc := DefaultScenario(ScaleSmall, 3)
	sc.Payments = PaymentsScenario{
		Zones: []int{3, 3, 2}, Workers: 40, Rate: 3000, GatewaysPerZone: 1, Loops: 2,
		Kill: 1, KillAt: 3 * time.Second, During: time.Second, From: time.Second, Duration: 6 * time.Second,
		Timeout: 2 * time.Second, EjectWithin: 500 * time.Millisecond,
	}
	if err := sc.Select(ExpPayments); err != nil {
		panic(err)
	}
	return sc
}

// TestPaymentsTiny runs the drill for every policy on both service-time
// models: every request answered (502 with a reason at most), the killed
// pod ejected on every gateway within the bound, no panic, per-class
// percentiles for each phase.
func TestPaymentsTiny(t *testing.T) {
	res, err := Simulate(context.Background(), tinyPayments(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * len(lbPolicies); len(res.Payments) != want {
		t.Fatalf("%d payments runs, want %d (every policy on both models)", len(res.Payments), want)
	}
	if len(res.LB) != 0 || len(res.Steps) != 0 {
		t.Fatal("the payments scenario ran other experiments")
	}
	var resets, retried, twice int64
	for _, x := range res.Payments {
		if x.Requests < 15000 || x.Unanswered != 0 || x.Answered != x.Requests {
			t.Errorf("%s %s: %d requests, %d answered, %d unanswered", x.Policy, x.Model, x.Requests, x.Answered, x.Unanswered)
		}
		for k, n := range x.GatewayAnswers {
			if !strings.HasPrefix(k, "502 ") {
				t.Errorf("%s %s: the gateway answered %d requests %q, want only 502s with a reason", x.Policy, x.Model, n, k)
			}
		}
		resets += x.GatewayAnswers["502 upstream_reset"]
		retried += x.Retried
		twice += x.Twice
		if x.FailedAuthorizations+x.FailedInquiries > x.Retried {
			t.Errorf("%s %s: %d authorizations and %d inquiries failed, %d retried: retries should save most", x.Policy, x.Model, x.FailedAuthorizations, x.FailedInquiries, x.Retried)
		}
		if len(x.Killed) != 1 || len(x.Killed[0].EjectedMs) != 3 {
			t.Fatalf("%s %s: killed %+v, want one pod watched on 3 gateways", x.Policy, x.Model, x.Killed)
		}
		if x.EjectionMaxMs < 0 || x.EjectionMaxMs > 500 || x.Panic {
			t.Errorf("%s %s: slowest ejection %.1f ms, panic %v", x.Policy, x.Model, x.EjectionMaxMs, x.Panic)
		}
		for _, ph := range paymentPhases {
			if h := x.Classes["heavy"][ph]; h.P50 < 100 || h.P99 < h.P50 {
				t.Errorf("%s %s %s: heavy %+v", x.Policy, x.Model, ph, h)
			}
		}
		if x.ZoneLocal["before"] < 0.8 || x.ZoneLocal["after"] >= x.ZoneLocal["before"] {
			t.Errorf("%s %s: zone-local %v: want ≥ 80 %% before, less once a zone lost a pod", x.Policy, x.Model, x.ZoneLocal)
		}
	}
	if resets == 0 && retried == 0 {
		t.Error("no request was in flight at the killed pod in any run: the drill did not kill under load")
	}
	if twice == 0 {
		t.Error("no authorization was replayed after its pod died under it: the idempotency key was not used")
	}
	// At 8 pods the retry budget's floor binds: a gateway has about 57
	// requests in flight (20 %: 11 retries) when its share of the killed
	// pod's breaks at once, so a few are answered 502 upstream_reset. The
	// seed's scale (corput lab --scenario payments) loses none; here the
	// check must be reported, not passed.
	lossless := slices.IndexFunc(res.Checks, func(c Check) bool { return strings.Contains(c.Name, "loses no authorization") })
	if lossless < 0 {
		t.Fatal("no check of the authorizations lost")
	}
	res.Checks = slices.Delete(res.Checks, lossless, lossless+1)
	if !res.Passed() {
		var out bytes.Buffer
		res.Print(&out, "")
		t.Fatalf("checks:\n%s", out.String())
	}
}

// TestPaymentsChecksFail: killing 3 of 8 pods (37.5 %, above the 20 %
// ejection cap) must fail the ejection or the panic check, and the drill
// is not in the default run.
func TestPaymentsChecksFail(t *testing.T) {
	sc := tinyPayments()
	sc.Payments.Kill = 3
	res, err := Simulate(context.Background(), sc, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed() {
		t.Fatal("3 of 8 pods killed passed every payments check")
	}
	def := DefaultScenario(ScaleSmall, 1)
	if err := def.Select("default"); err != nil || def.Runs(ExpPayments) || slices.Contains(Experiments(), ExpPayments) {
		t.Fatalf("payments is in the default run: %v %v", def.Run, err)
	}
}
