package edgetls

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/pem"
	"net/url"
	"strconv"
	"strings"
)

// ClientCertHeader is the request header that carries a verified client
// certificate to the origin (tls.forward_client_cert), in Envoy's
// x-forwarded-client-cert format (docs/decisions.md, "TLS at the edge").
// The gateway removes every copy a client sends, forwarding or not, and
// sets it only from the connection's own verified state.
const ClientCertHeader = "X-Forwarded-Client-Cert"

// ClientCertValue is ClientCertHeader's value for a connection: one
// element of Envoy's format,
//
//	Hash=<hex SHA-256 of the leaf's DER>;Cert="<URL-encoded PEM of the leaf>";Subject="<subject DN>";URI=<URI SAN>;DNS=<DNS SAN>
//
// with a URI= and a DNS= pair for each such name, in the certificate's
// order. ok is false, and nothing must be sent, unless the handshake
// verified the client's certificate (client_auth require or
// verify_if_given, with one given); a certificate requested but not
// verified (client_auth request) is never forwarded.
func ClientCertValue(cs *tls.ConnectionState) (value string, ok bool) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return "", false
	}
	leaf := cs.PeerCertificates[0]
	sum := sha256.Sum256(leaf.Raw)
	var b strings.Builder
	b.WriteString("Hash=")
	b.WriteString(hex.EncodeToString(sum[:]))
	b.WriteString(`;Cert="`)
	b.WriteString(strings.ReplaceAll(url.QueryEscape(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}))), "+", "%20"))
	b.WriteString(`";Subject=`)
	b.WriteString(quoted(leaf.Subject.String()))
	for _, u := range leaf.URIs {
		b.WriteString(";URI=")
		b.WriteString(quoteIfNeeded(u.String()))
	}
	for _, d := range leaf.DNSNames {
		b.WriteString(";DNS=")
		b.WriteString(quoteIfNeeded(d))
	}
	return b.String(), true
}

// quoted is s in double quotes, as visible ASCII: a quote or backslash
// escaped with a backslash, a control or non-ASCII character as Go's
// strconv.QuoteToASCII writes it, so that no certificate name can end the
// header or the pair.
func quoted(s string) string { return strconv.QuoteToASCII(s) }

// quoteIfNeeded quotes s when it holds a character that separates the
// format's pairs or elements (Envoy's rule), or one that is not visible
// ASCII.
func quoteIfNeeded(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || strings.ContainsRune(`,;="\`, r) }) >= 0 {
		return quoted(s)
	}
	return s
}
