package origin

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// TLSStats counts the TLS handshakes an origin completed: full ones (a
// key exchange and, with ClientCAFile, the client's certificate verified)
// and resumed ones (a session ticket, no certificate), and each
// negotiated version, suite and application protocol, e.g.
// "TLSv1.3 TLS_AES_128_GCM_SHA256 h2".
type TLSStats struct {
	Full       int64            `json:"handshakes_full"`
	Resumed    int64            `json:"handshakes_resumed"`
	Negotiated map[string]int64 `json:"negotiated"`
}

// handshakes are the origin's TLS counters, fed by tls.Config's
// VerifyConnection, which runs for every handshake, resumed ones included.
type handshakes struct {
	full, resumed atomic.Int64
	mu            sync.Mutex // guards negotiated
	negotiated    map[string]int64
}

func (h *handshakes) verify(cs tls.ConnectionState) error {
	if cs.DidResume {
		h.resumed.Add(1)
	} else {
		h.full.Add(1)
	}
	proto := cs.NegotiatedProtocol
	if proto == "" {
		proto = "no ALPN"
	}
	k := tlsVersionName(cs.Version) + " " + tls.CipherSuiteName(cs.CipherSuite) + " " + proto
	h.mu.Lock()
	if h.negotiated == nil {
		h.negotiated = map[string]int64{}
	}
	h.negotiated[k]++
	h.mu.Unlock()
	return nil
}

func (h *handshakes) stats() *TLSStats {
	st := &TLSStats{Full: h.full.Load(), Resumed: h.resumed.Load(), Negotiated: map[string]int64{}}
	h.mu.Lock()
	for k, v := range h.negotiated {
		st.Negotiated[k] = v
	}
	h.mu.Unlock()
	return st
}

// tlsVersionName is OpenSSL's spelling of a version: TLSv1.3.
func tlsVersionName(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLSv1.3"
	case tls.VersionTLS12:
		return "TLSv1.2"
	}
	return fmt.Sprintf("TLS 0x%04x", v)
}

// serverTLS is the origin's TLS config: its certificate, ALPN h2 and
// http/1.1, at least minVersion (0: Go's default), every handshake
// counted into h, and with clientCAFile client certificates required and
// verified against that bundle (mTLS).
func serverTLS(cert tls.Certificate, minVersion uint16, clientCAFile string, h *handshakes) (*tls.Config, error) {
	c := &tls.Config{
		Certificates:     []tls.Certificate{cert},
		NextProtos:       []string{"h2", "http/1.1"},
		MinVersion:       minVersion,
		VerifyConnection: h.verify,
	}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("origin: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("origin: client CA %s holds no PEM certificate", clientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// parseMinTLS reads --min-tls: "" or 1.2 (Go's default) or 1.3.
func parseMinTLS(s string) (uint16, error) {
	switch s {
	case "", "1.2":
		return 0, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("origin: --min-tls %q: want 1.2 or 1.3", s)
}
