package gateway

import (
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFewerRequestsPayWithHealthChecks (CORPUT_LONG=1: about a minute):
// two gateways over the same 10 origins, one with health checks at 1 s and
// one with passive ejection alone, no retries; one endpoint starts
// answering 503 to probes and requests alike. Real requests at about
// 1 req/s per endpoint, then at 200 req/s: the checked gateway's failed
// requests are at most the passive one's, and fewer at 1 req/s.
func TestFewerRequestsPayWithHealthChecks(t *testing.T) {
	if os.Getenv("CORPUT_LONG") == "" {
		t.Skip("about a minute; set CORPUT_LONG=1")
	}
	for _, c := range []struct {
		name string
		rate int // requests per second per gateway
		run  time.Duration
	}{{"1 req/s per endpoint", 10, 40 * time.Second}, {"200 req/s", 200, 10 * time.Second}} {
		t.Run(c.name, func(t *testing.T) {
			var sick atomic.Bool
			var addrs []string
			for i := range 10 {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addrs = append(addrs, ln.Addr().String())
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if i == 0 && sick.Load() {
						w.WriteHeader(http.StatusServiceUnavailable)
					}
				})}
				go srv.Serve(ln)
				t.Cleanup(func() { srv.Close() })
			}
			const base = "    retry: {attempts: 0}\n"
			checked := gatewayTo(t, 1, "", base+"    health_check: {path: /healthz, interval: 1s, jitter: 100ms, timeout: 500ms}\n", addrs...)
			passive := gatewayTo(t, 1, "", base, addrs...)
			sick.Store(true)
			var wg sync.WaitGroup
			failed := make([]int64, 2)
			for g, gw := range []*Gateway{checked, passive} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c2 := &http.Client{Timeout: 5 * time.Second}
					tick := time.NewTicker(time.Second / time.Duration(c.rate))
					defer tick.Stop()
					end := time.Now().Add(c.run)
					for time.Now().Before(end) {
						<-tick.C
						resp, err := c2.Get("http://" + gw.Addr() + "/pay")
						if err != nil || resp.StatusCode != 200 {
							atomic.AddInt64(&failed[g], 1)
						}
						if err == nil {
							resp.Body.Close()
						}
					}
				}()
			}
			wg.Wait()
			t.Logf("%s for %v: failed requests with checks at 1 s %d, with passive ejection alone %d", c.name, c.run, failed[0], failed[1])
			if failed[0] > failed[1] || c.rate == 10 && failed[0] >= failed[1] {
				t.Errorf("with checks %d failed, passive alone %d: want fewer (at 1 req/s per endpoint) or no more (at 200 req/s)", failed[0], failed[1])
			}
		})
	}
}
