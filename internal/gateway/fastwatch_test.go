package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	testorigin "github.com/corput/corput/internal/origin"
)

// TestClientLeavesAfterQuickRequests: the client-watch timer is lazy (set
// by an earlier exchange, it may fire while a later one is young, and
// sleeps again until that one has waited watchAfter). A client that sends
// quick requests on one connection and then leaves during a held one must
// still cancel the origin's request, whatever the timer's phase.
func TestClientLeavesAfterQuickRequests(t *testing.T) {
	arrived := make(chan struct{}, 1)
	ended := make(chan error, 1)
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hold" {
			return
		}
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(10 * time.Second):
			ended <- fmt.Errorf("origin request still running 10 s after the client left")
		}
	}))
	g := gatewayFor(t, testorigin.H1, b, "")
	for _, quick := range []int{1, 5, 40} {
		c, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		for i := range quick {
			fmt.Fprintf(c, "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("quick request %d: %v %v", i, resp, err)
			}
			resp.Body.Close()
		}
		fmt.Fprintf(c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
		<-arrived
		c.Close()
		if err := <-ended; err != context.Canceled {
			t.Fatalf("after %d quick requests: origin %v, want its request cancelled", quick, err)
		}
	}
	if h := g.handoffs(); h != 0 {
		t.Fatalf("%d hand-offs: the fast path was not used", h)
	}
}

// TestShortIdleTimeoutOnABusyConnection: between requests the fast path
// keeps an earlier idle deadline when it is only a little early, so that
// it moves about once a second rather than once a request. With
// downstream.idle_timeout under a second that slack must shrink with the
// timeout: a client sending request after request on one connection for
// longer than the timeout is never idle, and must never be disconnected.
func TestShortIdleTimeoutOnABusyConnection(t *testing.T) {
	b := startBackend(t, testorigin.H1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	g := startGateway(t, "downstream: {idle_timeout: 300ms}\n"+withEndpoints(cfgText(1, upstreamKeys("h1", b)), b.addr), nil, Options{})
	c, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	n := 0
	for start := time.Now(); time.Since(start) < 900*time.Millisecond; n++ {
		fmt.Fprintf(c, "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d, %v into a busy connection with a 300 ms idle timeout: %v", n, time.Since(start).Round(time.Millisecond), err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", n, resp.StatusCode)
		}
	}
	if h := g.handoffs(); h != 0 {
		t.Fatalf("%d hand-offs: the fast path was not used", h)
	}
}
