package gateway

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLongSSEThroughServe runs a Server-Sent Events stream of one event a
// second through `corput serve` with the default config (only listen,
// admin, a route and an origin written), on both serving paths at once,
// for CORPUT_LONG_DURATION (10m by default). It runs only with
// CORPUT_LONG=1: it is the long run behind the claim that streams last.
func TestLongSSEThroughServe(t *testing.T) {
	if os.Getenv("CORPUT_LONG") != "1" {
		t.Skip("set CORPUT_LONG=1 to run the 10-minute stream")
	}
	d := 10 * time.Minute
	if v := os.Getenv("CORPUT_LONG_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	events := int(d / time.Second)
	var mu sync.Mutex
	conns := map[string]bool{} // the origin's peers: one connection per stream when none was cut
	origin := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			conns[r.RemoteAddr] = true
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			for i := 1; i <= events; i++ {
				time.Sleep(time.Second)
				if _, err := fmt.Fprintf(w, "id: %d\ndata: event %d\n\n", i, i); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go origin.Serve(ln)
	defer origin.Close()

	var wg sync.WaitGroup
	for _, fast := range []bool{true, false} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\ndownstream: {fast_path: %v}\nroutes: [{origin: sse}]\norigins:\n  - name: sse\n    endpoints: [{address: %s}]\n", fast, ln.Addr())
			p := startServe(t, cfg)
			defer p.stop()
			start := time.Now()
			resp, err := http.Get("http://" + p.listen + "/events")
			if err != nil {
				t.Errorf("fast_path %v: %v", fast, err)
				return
			}
			defer resp.Body.Close()
			got, last := 0, ""
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					got++
					last = sc.Text()
				}
			}
			took := time.Since(start)
			t.Logf("fast_path %v: %d of %d events in %v, last %q, end: %v", fast, got, events, took.Round(time.Millisecond), last, sc.Err())
			if got != events || sc.Err() != nil {
				t.Errorf("fast_path %v: got %d of %d events (%v), end %v", fast, got, events, took, sc.Err())
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	t.Logf("the origin saw %d connections (one per stream: none was cut and redialled)", len(conns))
	mu.Unlock()
}
