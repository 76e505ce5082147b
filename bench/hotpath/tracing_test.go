package hotpath

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/corput/corput/internal/gateway"
	"github.com/corput/corput/internal/tracing/receiver"
)

// TestFastPathTracingAllocs: with tracing on, a request that is not
// recorded allocates nothing on the fast path, over real sockets
// (testing.AllocsPerRun counts the whole process: client, gateway and
// origin). At sample_ratio 0 every request takes the unsampled path, the
// one of 99 % of requests at 0.01 (a recorded one costs on the order of
// a hundred allocations with its export, about one a request at 0.01: an
// average over requests cannot tell the two apart, so internal/tracing's
// TestUnsampledRequestsTouchNoSDK checks 0.01 itself, on seeded ids). At
// 1.0 with the receiver blackholed, once the first batch is recorded
// every request is shed (the export breaker, unproven, records one batch
// until an export is answered, and then opens): the window measured is one where the dropped-span
// counter rose by 2 (server and client span) for each request, so none
// was recorded.
func TestFastPathTracingAllocs(t *testing.T) {
	const runs = 2000
	t.Run("unsampled", func(t *testing.T) {
		rc, err := receiver.Start()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		g := startGatewayWith(t, true, 1, fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 0}\n", rc.GRPCAddr()), startTinyOrigin(t))
		c := warmClient(t, g, 100)
		if allocs := testing.AllocsPerRun(runs, func() { mustGet(t, c) }); allocs != 0 {
			t.Errorf("an unsampled fast path request: %v allocs on average, want 0", allocs)
		}
	})
	t.Run("blackholed_full_queue", func(t *testing.T) {
		bh, err := receiver.StartBlackhole()
		if err != nil {
			t.Fatal(err)
		}
		defer bh.Close()
		g := startGatewayWith(t, true, 1, fmt.Sprintf("tracing: {endpoint: %q, sample_ratio: 1.0}\n", bh.Addr()), startTinyOrigin(t))
		c := warmClient(t, g, 0)
		for dropped(t, g) == 0 { // the breaker's first batch: 512 spans
			mustGet(t, c)
		}
		// A probe (1 s after the first export timed out, then 2 s, 4 s, …)
		// records 256 requests: a window that met one is measured again.
		for try := 0; ; try++ {
			before := dropped(t, g)
			allocs := testing.AllocsPerRun(runs, func() { mustGet(t, c) })
			if shed := dropped(t, g) - before; shed != 2*(runs+1) {
				if try < 3 {
					continue
				}
				t.Fatalf("%v spans dropped over %d requests in each of 4 windows, want %d: the queue never stayed full", shed, runs+1, 2*(runs+1))
			}
			if allocs != 0 {
				t.Errorf("a shed fast path request: %v allocs on average, want 0", allocs)
			}
			return
		}
	})
}

// warmClient is a client of g that made n requests.
func warmClient(t *testing.T, g *gateway.Gateway, n int) *rawClient {
	t.Helper()
	c, err := dial(g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.c.Close() })
	for range n {
		mustGet(t, c)
	}
	return c
}

func mustGet(t *testing.T, c *rawClient) {
	if _, err := c.get(); err != nil {
		t.Fatal(err)
	}
}

// dropped is g's corput_tracing_spans_dropped_total, from its /metrics.
func dropped(t *testing.T, g *gateway.Gateway) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "corput_tracing_spans_dropped_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no corput_tracing_spans_dropped_total in /metrics")
	return 0
}
