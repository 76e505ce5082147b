package edgetls

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/crypto/ocsp"
)

// maxStapleBytes bounds an OCSP response file (responses are a few KiB).
const maxStapleBytes = 64 << 10

// readStaple reads the DER OCSP response in file for the certificate
// pair and returns it to staple, or nil when it has expired (a stale
// staple is worse than none: a client that requires one refuses the
// handshake). A response that does not parse, is for another certificate,
// is not signed by the certificate's issuer (when the chain holds it), or
// says the certificate is revoked or unknown is an error; an expired one
// is reported as a warning.
func readStaple(f *findings, key, file string, pair *tls.Certificate, now time.Time) []byte {
	der, err := readSmall(file, maxStapleBytes)
	if err != nil {
		f.errorf(key, "%v", err)
		return nil
	}
	var issuer *x509.Certificate
	if len(pair.Certificate) > 1 {
		if issuer, err = x509.ParseCertificate(pair.Certificate[1]); err != nil {
			issuer = nil
		}
	}
	resp, err := ocsp.ParseResponseForCert(der, pair.Leaf, issuer)
	switch {
	case err != nil:
		f.errorf(key, "%s is not an OCSP response for this certificate: %v (fetch one in DER, e.g. openssl ocsp -issuer CHAIN -cert CERT -url URL -respout %s)", file, err, file)
		return nil
	case resp.SerialNumber.Cmp(pair.Leaf.SerialNumber) != 0:
		f.errorf(key, "%s answers for serial %x, not this certificate's %x; fetch the response for this certificate", file, resp.SerialNumber, pair.Leaf.SerialNumber)
		return nil
	case resp.Status == ocsp.Revoked:
		f.errorf(key, "%s says the certificate was revoked at %s; replace the certificate", file, resp.RevokedAt.UTC().Format(time.RFC3339))
		return nil
	case resp.Status != ocsp.Good:
		f.errorf(key, "%s gives the status unknown: the responder does not know this certificate; fetch the response from the certificate's issuer", file)
		return nil
	case !resp.NextUpdate.IsZero() && !now.Before(resp.NextUpdate):
		f.warnf(key, "%s expired at %s and is not stapled; fetch a fresh one (a reload or --watch staples it)", file, resp.NextUpdate.UTC().Format(time.RFC3339))
		return nil
	}
	return der
}

// readSmall reads a regular file of at most limit bytes.
func readSmall(file string, limit int64) ([]byte, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v (relative paths are resolved against the config file's directory)", file, unwrapPathError(err))
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", file)
	}
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("cannot read %s: %v", file, unwrapPathError(err))
	case int64(len(data)) > limit:
		return nil, fmt.Errorf("%s is larger than %d bytes; is it the right file?", file, limit)
	}
	return data, nil
}
