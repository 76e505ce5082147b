package discovery

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// eps builds a membership from addresses, zone "z" and weight 1.
func eps(addrs ...string) []Endpoint {
	out := make([]Endpoint, len(addrs))
	for i, a := range addrs {
		out[i] = Endpoint{Address: a, Zone: "z", Weight: 1}
	}
	return out
}

// receive waits for an update from a source, failing the test after 10 s.
func receive(t *testing.T, ch <-chan Update, from string) Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(10 * time.Second):
		t.Fatalf("no update %s", from)
		return Update{}
	}
}
