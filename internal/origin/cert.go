package origin

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"github.com/corput/corput/internal/testcert"
)

// loadOrGenerateCert returns the certificate in certFile/keyFile, or a fresh
// self-signed one when both are empty, with its PEM so clients can trust it.
func loadOrGenerateCert(certFile, keyFile string) (tls.Certificate, []byte, error) {
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("origin: TLS cert %s / key %s: %w", certFile, keyFile, err)
		}
		pemBytes, err := os.ReadFile(certFile)
		return cert, pemBytes, err
	case certFile != "" || keyFile != "":
		return tls.Certificate{}, nil, errors.New("origin: give both a TLS cert and key, or neither for a generated self-signed certificate")
	}
	return selfSigned()
}

// selfSigned makes a certificate for 127.0.0.1, ::1 and localhost that is
// its own CA (see testcert for its key and validity).
func selfSigned() (tls.Certificate, []byte, error) {
	c, err := testcert.SelfSigned("corput test origin")
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("origin: %w", err)
	}
	return c.TLS(), c.CertPEM, nil
}
