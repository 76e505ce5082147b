package upstream

import (
	"crypto/tls"
	"io"
	"net/http"
	"testing"
)

func benchRoundTrip(b *testing.B, o originOpts, d Options) {
	noLeaks(b)
	srv := startOrigin(b, o, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello, corput")
	}))
	c := mustDial(b, mustDialer(b, d), srv.addr())
	req, _ := http.NewRequest(http.MethodGet, srv.url("/bench"), nil)
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := roundTrip(c, req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		resp.Body.Close()
		if !c.Usable() {
			b.Fatal("connection not reusable")
		}
	}
}

// BenchmarkH1RoundTrip is one GET + small response over a kept-alive
// loopback HTTP/1.1 connection, including the idle probe done at release.
func BenchmarkH1RoundTrip(b *testing.B) { benchRoundTrip(b, originOpts{}, Options{}) }

// BenchmarkH2RoundTrip is the same over cleartext HTTP/2 (h2c).
func BenchmarkH2RoundTrip(b *testing.B) {
	benchRoundTrip(b, originOpts{h2: true}, Options{Protocol: H2C})
}

// BenchmarkH1UsableIdle is the pool's hand-out check on an idle HTTP/1.1
// connection: one non-blocking read syscall, no allocation.
func BenchmarkH1UsableIdle(b *testing.B) {
	noLeaks(b)
	srv := startOrigin(b, originOpts{}, http.NotFoundHandler())
	c := mustDial(b, mustDialer(b, Options{}), srv.addr())
	b.ReportAllocs()
	for b.Loop() {
		if !c.Usable() {
			b.Fatal("idle connection reported unusable")
		}
	}
}

// BenchmarkH2UsableStreams is the pool's hand-out check on HTTP/2: atomics.
func BenchmarkH2UsableStreams(b *testing.B) {
	noLeaks(b)
	srv := startOrigin(b, originOpts{h2: true}, http.NotFoundHandler())
	c := mustDial(b, mustDialer(b, Options{Protocol: H2C}), srv.addr())
	b.ReportAllocs()
	for b.Loop() {
		if !c.Usable() || c.Streams() == 0 {
			b.Fatal("idle connection reported unusable")
		}
	}
}

// BenchmarkDialMTLS is one new upstream connection to an mTLS origin on
// loopback: TCP connect, a TLS 1.3 handshake with client and server
// certificates (ECDSA P-256), ALPN h2 and the first SETTINGS, then close;
// full: no session to resume; resumed: the Dialer's per-endpoint session
// cache (a ticket, no certificates). It is the cost a borrowed stream
// (pool's BenchmarkBorrowFromHomeLoop) saves; ns/op is wall time on
// loopback, both ends' CPU in it.
func BenchmarkDialMTLS(b *testing.B) {
	for _, full := range []bool{true, false} {
		b.Run(map[bool]string{true: "full", false: "resumed"}[full], func(b *testing.B) {
			noLeaks(b)
			o := startOrigin(b, originOpts{tls: true, h2: true, clientCert: true}, http.NotFoundHandler())
			tc := getPKI(b).clientTLS(true)
			if full {
				tc.ClientSessionCache = noSessions{}
			}
			d := mustDialer(b, Options{Protocol: H2, TLS: tc})
			b.ReportAllocs()
			for b.Loop() {
				c := mustDial(b, d, o.addr())
				c.Close()
			}
		})
	}
}

// noSessions is a session cache that keeps nothing: every handshake full.
type noSessions struct{}

func (noSessions) Get(string) (*tls.ClientSessionState, bool) { return nil, false }
func (noSessions) Put(string, *tls.ClientSessionState)        {}
