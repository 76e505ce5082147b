package live

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// Every load stream is exactly one downstream connection, so a gateway's
// round-robin assignment gives each loop one stream. Go's HTTP/2
// transport would otherwise, now and then, dial twice for two requests that
// start together and close one of the two — enough to leave a loop without
// traffic.
func TestDriveOneConnectionPerStream(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Protocols: protos,
		Handler:   http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	defer srv.Close()
	gw := []*part{{name: "stand-in", addr: ln.Addr().String()}}
	const loops, runs = 4, 10
	for i := range runs {
		before := conns.Load()
		l, err := drive(context.Background(), gw, loops, 800, 300*time.Millisecond, uint64(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := conns.Load() - before; got != loops || l.ok() != l.Requests {
			t.Fatalf("run %d: %d streams opened %d connections (%d of %d requests 2xx), want one each", i, loops, got, l.ok(), l.Requests)
		}
	}
}
