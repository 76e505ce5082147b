package edgetls

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Finding is one problem with Settings, for `corput check` and a reload.
type Finding struct {
	// Key is the key path under the tls block ("min_version",
	// "certificates[1].hosts[0]"), or "" for the block itself.
	Key     string
	Message string // what is wrong and what to do
	Warning bool   // accepted all the same
}

type findings struct{ list []Finding }

func (f *findings) errorf(key, format string, args ...any) {
	f.list = append(f.list, Finding{Key: key, Message: fmt.Sprintf(format, args...)})
}

func (f *findings) warnf(key, format string, args ...any) {
	f.list = append(f.list, Finding{Key: key, Message: fmt.Sprintf(format, args...), Warning: true})
}

// err is the errors among the findings as one error, keys under "tls", or
// nil.
func (f *findings) err() error {
	var errs []error
	for _, x := range f.list {
		if !x.Warning {
			key := "tls"
			if x.Key != "" {
				key += "." + x.Key
			}
			errs = append(errs, fmt.Errorf("%s: %s", key, x.Message))
		}
	}
	return errors.Join(errs...)
}

// Check reads every file the settings name, as New does, and returns every
// problem with them; nil when New would build the policy.
func (s *Settings) Check() []Finding {
	_, f := s.load(time.Now())
	return f.list
}

// loaded is the settings read and checked: what New builds a policy of.
type loaded struct {
	def     *entry   // the default certificate
	hosts   []*entry // the certificates entries, in order
	min     uint16
	suites  []uint16
	curves  []tls.CurveID
	alpn    []string
	tickets [][TicketKeySize]byte // nil: crypto/tls's own keys
}

// entry is one certificate with its hosts and client policy.
type entry struct {
	patterns []string // lower case; "*.example.com" for a wildcard
	cert     tls.Certificate
	mode     ClientAuth
	cas      *x509.CertPool // nil unless mode asks for a certificate
	tag      []byte         // the client policy's binding (tickets.go)
}

// clientPolicy is the top-level client settings an entry inherits.
type clientPolicy struct {
	ca   string
	auth ClientAuth
	ders [][]byte // the CA bundle's certificates; nil when unread
}

func (s *Settings) load(now time.Time) (*loaded, *findings) {
	f := &findings{}
	l := &loaded{min: parseVersion(f, "min_version", s.MinVersion)}
	l.suites = parseCipherSuites(f, "cipher_suites", s.CipherSuites, l.min)
	l.curves = parseCurves(f, "curves", s.Curves)
	l.alpn = parseALPN(f, "alpn", s.ALPN)

	top := clientPolicy{ca: s.ClientCA, auth: s.ClientAuth}
	checkClientAuth(f, "client_auth", s.ClientAuth)
	if s.ClientCA != "" {
		top.ders = readCA(f, "client_ca", s.ClientCA)
	}
	if s.Cert == "" || s.Key == "" {
		f.errorf("", "HTTPS needs both cert and key (PEM files): the default certificate; set both, or remove tls to serve plaintext")
	}
	l.def = loadEntry(f, "", Host{Cert: s.Cert, Key: s.Key, OCSP: s.OCSP}, top, now)
	if s.ClientAuth == ClientAuthNone && s.ClientCA != "" {
		f.warnf("client_ca", "not used: client_auth is none")
	}

	seen := map[string]string{}
	for i, h := range s.Certificates {
		p := index("certificates", i)
		checkClientAuth(f, p+".client_auth", h.ClientAuth)
		if h.Cert == "" && h.Key == "" {
			f.errorf(p, "no certificate: set cert and key (PEM files)")
		}
		hp := top
		if h.ClientCA != "" {
			hp.ca, hp.ders = h.ClientCA, readCA(f, p+".client_ca", h.ClientCA)
		}
		if h.ClientAuth != "" {
			hp.auth = h.ClientAuth
		}
		if hp.auth == ClientAuthNone && h.ClientCA != "" {
			f.warnf(p+".client_ca", "not used: client_auth is none")
		}
		e := loadEntry(f, p, h, hp, now)
		e.patterns = checkHosts(f, p+".hosts", h.Hosts, seen, e.cert.Leaf)
		l.hosts = append(l.hosts, e)
	}

	switch {
	case s.ForwardClientCert && !l.def.mode.verifies() && !slices.ContainsFunc(l.hosts, func(e *entry) bool { return e.mode.verifies() }):
		f.warnf("forward_client_cert", "no certificate verifies client certificates (client_auth require or verify_if_given), so none is forwarded")
	case s.ForwardClientCert:
		f.warnf("forward_client_cert", "%s", pendingForward)
	}
	for i, e := range l.hosts {
		if _, valid := clientAuthTypes[e.mode]; valid && !bytes.Equal(e.tag, l.def.tag) {
			f.warnf(index("certificates", i)+".client_auth", "%s", pendingMisdirected)
		}
	}
	checkSuitesServe(f, l)
	if s.SessionTicketKeys != "" {
		l.tickets = checkTicketKeys(f, "session_ticket_keys", s.SessionTicketKeys)
	}
	return l, f
}

// What the request path does not do yet with the policy: each is said by
// `corput check` as a warning until the request path sets ClientCertHeader
// and answers Misdirected requests 421 (docs/gateway.md, "TLS at the
// edge"); remove the warning with the wiring.
const (
	pendingForward     = "accepted, but this version's request path does not send " + ClientCertHeader + " yet: origins receive no client certificate (docs/gateway.md, \"TLS at the edge\")"
	pendingMisdirected = "this host's client-certificate policy differs from the default certificate's, and this version's request path does not yet refuse (421) a request whose Host is under another policy than its connection's server name: a client can reach this host over a connection made for another one (docs/gateway.md, \"TLS at the edge\")"
)

// loadEntry reads one certificate, its OCSP response and its client
// policy; p is its key path ("" for the default).
func loadEntry(f *findings, p string, h Host, cp clientPolicy, now time.Time) *entry {
	e := &entry{mode: cp.auth}
	if e.mode == "" {
		e.mode = ClientAuthNone
		if cp.ca != "" {
			e.mode = ClientAuthRequire // client_ca alone has always meant require
		}
	}
	switch {
	case e.mode.verifies() && cp.ca == "":
		f.errorf(join(p, "client_auth"), "%s verifies client certificates against client_ca, which is not set; set client_ca (here or at the top level), or use request", e.mode)
	case e.mode != ClientAuthNone && cp.ders != nil:
		e.cas = x509.NewCertPool()
		for _, der := range cp.ders {
			c, _ := x509.ParseCertificate(der) // readCA parsed it
			e.cas.AddCert(c)
		}
	}
	if e.mode == ClientAuthNone {
		e.tag = binding(e.mode, nil)
	} else {
		e.tag = binding(e.mode, cp.ders)
	}

	if loadPair(f, p, h.Cert, h.Key, &e.cert) {
		if e.cert.Leaf.NotAfter.Before(now) {
			f.warnf(join(p, "cert"), "%s expired at %s; clients refuse it: renew it", h.Cert, e.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		if h.OCSP != "" {
			e.cert.OCSPStaple = readStaple(f, join(p, "ocsp"), h.OCSP, &e.cert, now)
		}
	} else if h.OCSP != "" {
		if _, err := readSmall(h.OCSP, maxStapleBytes); err != nil {
			f.errorf(join(p, "ocsp"), "%v", err)
		}
	}
	return e
}

// maxPEMBytes bounds a certificate, key or CA bundle file.
const maxPEMBytes = 16 << 20

// loadPair reads a certificate chain and its key into out.
func loadPair(f *findings, p, cert, key string, out *tls.Certificate) bool {
	switch {
	case cert == "" && key == "":
		return false
	case key == "":
		f.errorf(join(p, "key"), "missing: cert is set, so key must name its private key file")
		return false
	case cert == "":
		f.errorf(join(p, "cert"), "missing: key is set, so cert must name its certificate file")
		return false
	}
	certPEM, certErr := readSmall(cert, maxPEMBytes)
	if certErr != nil {
		f.errorf(join(p, "cert"), "%v", certErr)
	}
	keyPEM, keyErr := readSmall(key, maxPEMBytes)
	if keyErr != nil {
		f.errorf(join(p, "key"), "%v", keyErr)
	}
	if certErr != nil || keyErr != nil {
		return false
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		f.errorf(join(p, "cert"), "%s and %s do not load as a certificate and its key: %v", cert, key, err)
		return false
	}
	*out = pair
	return true
}

// readCA reads a PEM bundle of CA certificates and returns their DER.
func readCA(f *findings, p, file string) [][]byte {
	data, err := readSmall(file, maxPEMBytes)
	if err != nil {
		f.errorf(p, "%v", err)
		return nil
	}
	var ders [][]byte
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			f.errorf(p, "%s holds a certificate that does not parse: %v", file, err)
			return nil
		}
		ders = append(ders, block.Bytes)
	}
	if len(ders) == 0 {
		f.errorf(p, "%s holds no PEM certificate; give a file with one or more CERTIFICATE blocks", file)
		return nil
	}
	return ders
}

// hostLabel is one label of a host name.
var hostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// checkHosts checks an entry's hosts, each served by one entry only (seen
// maps a pattern to the key that listed it first), and warns of a host its
// certificate does not name. It returns them in lower case.
func checkHosts(f *findings, p string, hosts []string, seen map[string]string, leaf *x509.Certificate) []string {
	if len(hosts) == 0 {
		f.errorf(p, "missing; list the server names this certificate serves, e.g. [api.example.com, \"*.example.com\"]")
		return nil
	}
	var out []string
	for i, h := range hosts {
		k := index(p, i)
		pat := strings.ToLower(strings.TrimSuffix(h, "."))
		name, wild := strings.CutPrefix(pat, "*.")
		if !validHost(name) {
			f.errorf(k, "%q is not a server name; write api.example.com or *.example.com (a wildcard is one whole label, on the left)", h)
			continue
		}
		if !wild && looksLikeIP(name) {
			f.errorf(k, "%q is an address, and clients never send one as the server name (RFC 6066); clients that connect by address get the default certificate", h)
			continue
		}
		if first, dup := seen[pat]; dup {
			f.errorf(k, "%q is also listed at %s; a server name is served by one certificate", h, first)
			continue
		}
		seen[pat] = k
		if leaf != nil {
			probe := name
			if wild {
				probe = "corput-sni-probe." + name
			}
			if leaf.VerifyHostname(probe) != nil {
				f.warnf(k, "the certificate does not name %s (it names %s); clients will refuse it for that host", h, strings.Join(leaf.DNSNames, ", "))
			}
		}
		out = append(out, pat)
	}
	return out
}

func validHost(name string) bool {
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if !hostLabel.MatchString(l) {
			return false
		}
	}
	return true
}

// looksLikeIP: every label a number.
func looksLikeIP(name string) bool {
	return strings.Trim(name, "0123456789.") == ""
}

// h2Required are the suites one of which RFC 9113 §9.2.2 requires of
// HTTP/2 over TLS 1.2 (net/http's HTTP/2 server refuses to start without).
var h2Required = []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}

// checkSuitesServe: under TLS 1.2 every certificate has a suite for its
// key, and h2 has the suite it requires.
func checkSuitesServe(f *findings, l *loaded) {
	if l.min >= tls.VersionTLS13 || l.suites == nil {
		return
	}
	if slices.Contains(l.alpn, "h2") && !slices.ContainsFunc(l.suites, func(id uint16) bool { return slices.Contains(h2Required, id) }) {
		f.errorf("cipher_suites", "HTTP/2 over TLS 1.2 requires TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 (RFC 9113 §9.2.2); add one, or remove h2 from alpn")
	}
	for i, e := range append([]*entry{l.def}, l.hosts...) {
		kind := keyKind(e.cert.PrivateKey)
		if kind == "" || slices.ContainsFunc(l.suites, func(id uint16) bool { return strings.Contains(tls.CipherSuiteName(id), "_"+kind+"_") }) {
			continue
		}
		where := "cert"
		if i > 0 {
			where = index("certificates", i-1) + ".cert"
		}
		f.errorf("cipher_suites", "no suite listed signs with the %s key of %s, so a TLS 1.2 client cannot connect; add a TLS_ECDHE_%s_WITH_… suite", kind, where, kind)
	}
}

// keyKind is the TLS 1.2 suites' name for a private key's type.
func keyKind(k any) string {
	switch k.(type) {
	case *rsa.PrivateKey:
		return "RSA"
	case *ecdsa.PrivateKey, ed25519.PrivateKey:
		return "ECDSA"
	}
	return ""
}

func join(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}
