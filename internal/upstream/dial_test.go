package upstream

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/pool"
)

func TestALPNAutoPicksPerEndpoint(t *testing.T) {
	noLeaks(t)
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) })
	h2o := startOrigin(t, originOpts{tls: true, h2: true}, hello)
	h1o := startOrigin(t, originOpts{tls: true}, hello)
	d := mustDialer(t, Options{Protocol: Auto, TLS: getPKI(t).clientTLS(false)})
	for _, tc := range []struct {
		o     *origin
		proto string
		saw   string
	}{{h2o, ProtoH2, "HTTP/2.0"}, {h1o, ProtoH1, "HTTP/1.1"}} {
		c := mustDial(t, d, tc.o.addr())
		if c.Protocol() != tc.proto {
			t.Fatalf("%s: protocol %s, want %s", tc.o.addr(), c.Protocol(), tc.proto)
		}
		resp := get(t, c, tc.o.url("/"))
		if resp.TLS == nil {
			t.Errorf("%s: response has no TLS state", tc.proto)
		}
		if got := readAll(t, resp); got != tc.saw {
			t.Fatalf("origin saw %q, want %q", got, tc.saw)
		}
	}
	// Forcing h2 on an h1-only origin is a protocol error, not a silent h1.
	_, err := mustDialer(t, Options{Protocol: H2, TLS: getPKI(t).clientTLS(false)}).DialContext(context.Background(), h1o.addr())
	var de *DialError
	if !errors.As(err, &de) || de.Kind != KindProtocol || !strings.Contains(err.Error(), "protocol auto or h1") {
		t.Fatalf("h2 to an h1-only origin: %v, want a protocol DialError that says what to set", err)
	}
	// Without TLS, auto is plain HTTP/1.1.
	plain := startOrigin(t, originOpts{}, hello)
	if c := mustDial(t, mustDialer(t, Options{}), plain.addr()); c.Protocol() != ProtoH1 {
		t.Fatalf("cleartext auto: %s, want h1", c.Protocol())
	}
}

func TestMTLS(t *testing.T) {
	noLeaks(t)
	p := getPKI(t)
	for _, h2 := range []bool{true, false} {
		o := startOrigin(t, originOpts{tls: true, h2: h2, clientCert: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
		}))
		c := mustDial(t, mustDialer(t, Options{TLS: p.clientTLS(true)}), o.addr())
		if got := readAll(t, get(t, c, o.url("/"))); got != "corput test leaf" {
			t.Fatalf("h2=%v: origin saw client certificate %q", h2, got)
		}
		// Without a certificate the origin refuses. Under TLS 1.3 the
		// client learns it after its own handshake: at the HTTP/2
		// SETTINGS exchange (a dial error) or, on HTTP/1.1, at the
		// first request. Whether the alert or the reset is read first
		// is up to the kernel, so only the refusal is asserted.
		nc, err := mustDialer(t, Options{TLS: p.clientTLS(false)}).DialContext(context.Background(), o.addr())
		if h2 && !IsConnectFailure(err) {
			t.Fatalf("h2: no client certificate: %v, want a dial error", err)
		}
		if err == nil {
			req, _ := http.NewRequest(http.MethodGet, o.url("/"), nil)
			var resp *http.Response
			resp, err = roundTrip(nc, req)
			nc.Close()
			if err == nil {
				t.Fatalf("h1: no client certificate: got status %d, want a refusal", resp.StatusCode)
			}
		}
		if !strings.Contains(err.Error(), o.addr()) {
			t.Fatalf("refusal %q does not name the endpoint", err)
		}
	}
}

func TestDialErrorsAreClassified(t *testing.T) {
	noLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()

	// A listener that accepts TCP but never speaks: the TLS handshake
	// runs into the connect timeout.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()

	untrusted := startOrigin(t, originOpts{tls: true}, http.NotFoundHandler())

	for _, tc := range []struct {
		name string
		o    Options
		addr string
		kind DialErrorKind
	}{
		{"refused", Options{}, closedAddr, KindRefused},
		{"timeout", Options{TLS: getPKI(t).clientTLS(false), ConnectTimeout: 50 * time.Millisecond}, mute.Addr().String(), KindTimeout},
		{"unknown CA", Options{TLS: &tls.Config{}}, untrusted.addr(), KindTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustDialer(t, tc.o)
			done := make(chan error, 1)
			d.Dial(tc.addr, func(c pool.Conn, err error) {
				if c != nil {
					c.Close()
				}
				done <- err
			})
			err := <-done
			var de *DialError
			if !errors.As(err, &de) || de.Kind != tc.kind {
				t.Fatalf("got %v, want a DialError of kind %q", err, tc.kind)
			}
			if !IsConnectFailure(err) || !strings.Contains(err.Error(), tc.addr) {
				t.Fatalf("%v: want a connect failure naming %s", err, tc.addr)
			}
		})
	}
}

func TestOptionsRejectContradictions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Protocol: H2}, "h2c"},
		{Options{Protocol: H2C, TLS: &tls.Config{}}, "tls"},
		{Options{Protocol: "spdy"}, "auto, h1, h2 or h2c"},
	} {
		if _, err := NewDialer(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error mentioning %q", tc.o.Protocol, err, tc.want)
		}
	}
}

func TestTLSFilesConfig(t *testing.T) {
	noLeaks(t)
	p := getPKI(t)
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ca := write("ca.pem", "CERTIFICATE", p.caDER)
	cert := write("client.pem", "CERTIFICATE", p.client.Certificate[0])
	key := write("client.key", "PRIVATE KEY", p.clientKeyDER)

	conf, err := TLSFiles{CA: ca, Cert: cert, Key: key}.Config()
	if err != nil {
		t.Fatal(err)
	}
	o := startOrigin(t, originOpts{tls: true, h2: true, clientCert: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "mtls ok")
	}))
	c := mustDial(t, mustDialer(t, Options{TLS: conf}), o.addr())
	if got := readAll(t, get(t, c, o.url("/"))); got != "mtls ok" {
		t.Fatalf("got %q", got)
	}

	for _, tc := range []struct {
		f    TLSFiles
		want string
	}{
		{TLSFiles{CA: filepath.Join(dir, "missing.pem")}, "tls.ca"},
		{TLSFiles{CA: key}, "no PEM certificate"},
		{TLSFiles{Cert: cert}, "tls.cert and tls.key go together"},
		{TLSFiles{Cert: cert, Key: ca}, "tls.cert/tls.key"},
	} {
		if _, err := tc.f.Config(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error mentioning %q", tc.f, err, tc.want)
		}
	}
}

// A redial resumes the endpoint's TLS session: the second connection to
// an endpoint skips the full handshake (its certificates), and an endpoint
// never dialled before starts with a full one, not another's ticket.
func TestRedialResumesTheEndpointsSession(t *testing.T) {
	noLeaks(t)
	p := getPKI(t)
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	a := startOrigin(t, originOpts{tls: true, clientCert: true}, hello)
	b := startOrigin(t, originOpts{tls: true, clientCert: true}, hello)
	d := mustDialer(t, Options{Protocol: H1, TLS: p.clientTLS(true)})
	for i, tc := range []struct {
		o       *origin
		resumed bool
	}{{a, false}, {a, true}, {b, false}, {a, true}} {
		c := mustDial(t, d, tc.o.addr())
		resp := get(t, c, tc.o.url("/")) // reads the origin's tickets too
		readAll(t, resp)
		if resp.TLS == nil || resp.TLS.DidResume != tc.resumed {
			t.Fatalf("dial %d to %s: resumed %v, want %v", i+1, tc.o.addr(), resp.TLS != nil && resp.TLS.DidResume, tc.resumed)
		}
		c.Close()
	}
}
