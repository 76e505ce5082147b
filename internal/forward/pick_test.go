package forward

import (
	"errors"
	"fmt"
	"testing"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/rng"
)

// pick gives a retry an endpoint the request has not tried while the
// loop has one; when every endpoint was tried, a retry after nothing was
// sent (strict) stops, and any other retry may go back to a tried one.
func TestPickForAvoidsTriedEndpoints(t *testing.T) {
	ms := make([]balance.Member, 3)
	for i := range ms {
		ms[i] = balance.Member{Address: fmt.Sprintf("10.0.0.%d:80", i), Weight: 1}
	}
	o, err := balance.NewOrigin("app", balance.DefaultConfig(), ms, balance.Options{Rand: rng.New(5)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	pk := o.NewPicker(nil)
	defer pk.Close()

	a := &Attempt{pk: pk, cost: 1}
	tried := &a.tried
	first, ft, err := a.pick()
	if err != nil {
		t.Fatal(err)
	}
	first.End(ft, 0, balance.Shed)
	tried.add(first)
	tried.add(first) // counted once
	if tried.n != 1 {
		t.Fatalf("tried holds %d endpoints after adding one twice", tried.n)
	}
	for _, strict := range []bool{false, true} {
		tried.strict = strict
		for range 100 {
			ep, et, err := a.pick()
			if err != nil {
				t.Fatal(err)
			}
			ep.End(et, 0, balance.Shed)
			if ep == first {
				t.Fatalf("strict %v: a retry went back to the tried endpoint %s", strict, first.Address())
			}
		}
	}

	for _, ep := range o.Endpoints() {
		tried.add(ep)
	}
	tried.strict = true
	if ep, _, err := a.pick(); !errors.Is(err, balance.ErrAllTried) {
		t.Fatalf("strict, every endpoint tried: got %v, %v; want balance.ErrAllTried", ep, err)
	}
	tried.strict = false
	ep, et, err := a.pick()
	if err != nil {
		t.Fatalf("every endpoint tried, after a failure that may have reached the origin: %v, want a pick", err)
	}
	ep.End(et, 0, balance.Shed)
}

func TestUnsentRetriesOffWithRetries(t *testing.T) {
	if n := unsentRetries(1); n != 0 {
		t.Errorf("retry.attempts 0 allows %d retries after nothing was sent, want none", n)
	}
	if n := unsentRetries(2); n != maxUnsentRetries {
		t.Errorf("retry.attempts 1: %d retries after nothing was sent, want %d", n, maxUnsentRetries)
	}
}
