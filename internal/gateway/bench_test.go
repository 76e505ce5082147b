package gateway

// End-to-end benchmarks over loopback: a Go client, the gateway and a raw
// origin (a tiny immediate 200) all run in this process, so ns/op and
// allocs/op count all three; BenchmarkDirect is the client and origin
// alone, the share to subtract. docs/gateway.md has wrk figures against
// `corput serve` and how to profile.

import (
	"io"
	"net/http"
	"testing"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/forward"

	testorigin "github.com/corput/corput/internal/origin"
)

// benchClient is a client of kind with room for many concurrent requests
// (h2c multiplexes them on one connection, so one loop).
func benchClient(b *testing.B, kind string) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256, Protocols: new(http.Protocols)}
	switch kind {
	case dsH1:
		tr.Protocols.SetHTTP1(true)
	case dsH2C:
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// benchGets sends GET url from 8 goroutines per CPU until b is done.
func benchGets(b *testing.B, c *http.Client, url string) {
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkGateway is one proxied GET: client → gateway (loops =
// GOMAXPROCS, default policy and pool) → raw HTTP/1.1 origin.
func BenchmarkGateway(b *testing.B) {
	for _, kind := range []string{dsH1, dsH2C} {
		b.Run(kind, func(b *testing.B) {
			origins := startOrigins(b, 1, testorigin.Options{})
			g := startGateway(b, cfgText(0, ""), origins, Options{})
			benchGets(b, benchClient(b, kind), "http://"+g.Addr()+"/")
		})
	}
}

// BenchmarkGatewayH2Origin is BenchmarkGateway/h1 to an h2c origin: the
// net/http path with x/net/http2 upstream (the fast path serves h1
// origins only), as bench/peers h2_cpu measures it with TLS.
func BenchmarkGatewayH2Origin(b *testing.B) {
	origins := startOrigins(b, 1, testorigin.Options{Proto: testorigin.H2C})
	g := startGateway(b, cfgText(0, "    protocol: h2c\n"), origins, Options{})
	benchGets(b, benchClient(b, dsH1), "http://"+g.Addr()+"/")
}

// BenchmarkDirect is the same GET straight to the origin: the client's
// and origin's share of BenchmarkGateway/h1.
func BenchmarkDirect(b *testing.B) {
	origins := startOrigins(b, 1, testorigin.Options{})
	benchGets(b, benchClient(b, dsH1), origins[0].URL()+"/")
}

// BenchmarkLoopChoice is the per-request loop choice (cluster.Origin.Place:
// the less busy of the rotation's next loop and a random other, and the
// in-flight count Begin and Finish keep), from every P at once.
func BenchmarkLoopChoice(b *testing.B) {
	origins := startOrigins(b, 1, testorigin.Options{})
	g := startGateway(b, cfgText(16, ""), origins, Options{})
	o := g.st().list[0]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var a forward.Attempt
		for pb.Next() {
			ol := o.Place()
			if l := ol.Index(); l < 0 || l >= 16 {
				b.Fatal(l)
			}
			o.Begin(&a, ol, o.Policy(), forward.Replay{Resend: true}, 1, balance.Key{})
			o.Finish(&a, ol)
		}
	})
}
