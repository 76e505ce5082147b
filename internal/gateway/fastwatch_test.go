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
