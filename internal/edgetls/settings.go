package edgetls

import (
	"slices"
)

// Settings is the configuration's top-level tls block: the keys of
// docs/configuration.md ("TLS at the edge"). internal/config decodes it
// strictly and resolves its file paths (Paths); Check says what is wrong
// with it; New turns it into a Policy.
type Settings struct {
	// The default certificate: served when no certificates[].hosts entry
	// matches the client's server name (SNI), and to clients that send
	// none (a connection by address).
	Cert string `yaml:"cert"` // PEM certificate chain
	Key  string `yaml:"key"`  // PEM private key
	OCSP string `yaml:"ocsp"` // optional: a DER OCSP response to staple

	// ClientCA and ClientAuth are the client-certificate policy of the
	// default certificate, and of every certificates entry that sets none
	// of its own. Without a ClientAuth, a ClientCA means require.
	ClientCA   string     `yaml:"client_ca"`
	ClientAuth ClientAuth `yaml:"client_auth"`

	// Certificates are served by server name, each to the hosts it lists
	// ("api.example.com", "*.example.com").
	Certificates []Host `yaml:"certificates"`

	MinVersion   string   `yaml:"min_version"`   // "1.2" or "1.3"
	CipherSuites []string `yaml:"cipher_suites"` // TLS 1.2 suites by their IANA names, as crypto/tls spells them
	Curves       []string `yaml:"curves"`        // key exchanges, in the client's choice
	ALPN         []string `yaml:"alpn"`          // h2, http/1.1, in the server's order of preference

	// SessionTicketKeys is a file of 32-byte keys, base64, one a line:
	// the first encrypts tickets, every one decrypts. The same file on
	// every gateway of a fleet lets a client resume on any of them.
	SessionTicketKeys string `yaml:"session_ticket_keys"`

	// ForwardClientCert sends a verified client certificate to the origin
	// in ClientCertHeader (a client's own copy is never trusted).
	ForwardClientCert bool `yaml:"forward_client_cert"`
}

// Host is one certificate served by server name, with its hosts'
// client-certificate policy.
type Host struct {
	Hosts      []string   `yaml:"hosts"` // exact names, or "*.example.com" (one label)
	Cert       string     `yaml:"cert"`
	Key        string     `yaml:"key"`
	OCSP       string     `yaml:"ocsp"`
	ClientCA   string     `yaml:"client_ca"`   // "": the top-level client_ca
	ClientAuth ClientAuth `yaml:"client_auth"` // "": the top-level client_auth
}

// ClientAuth is what a handshake asks of the client's certificate.
type ClientAuth string

// The client-certificate modes.
const (
	ClientAuthNone          ClientAuth = "none"            // none is asked for
	ClientAuthRequest       ClientAuth = "request"         // asked for, not verified, never forwarded
	ClientAuthRequire       ClientAuth = "require"         // required, and verified against client_ca
	ClientAuthVerifyIfGiven ClientAuth = "verify_if_given" // optional; verified against client_ca when given
)

// The policy's defaults (docs/decisions.md, "TLS at the edge"): Mozilla's
// "intermediate" server profile as Go can serve it.
var (
	// DefaultMinVersion: TLS 1.0 and 1.1 are deprecated (RFC 8996).
	DefaultMinVersion = "1.2"
	// DefaultCipherSuites are the TLS 1.2 suites offered: AEAD with
	// forward secrecy (ECDHE) only, so no CBC suite and no RSA key
	// exchange. TLS 1.3's suites are all AEAD and not configurable.
	DefaultCipherSuites = []string{
		"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
		"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
		"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
		"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
		"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	}
	// DefaultCurves: the hybrid post-quantum key exchange first, then
	// the intermediate profile's three curves.
	DefaultCurves = []string{"X25519MLKEM768", "X25519", "P-256", "P-384"}
	// DefaultALPN: HTTP/2 preferred, HTTP/1.1 for the rest.
	DefaultALPN = []string{"h2", "http/1.1"}
)

// SetDefaults fills a block the file is about to be decoded onto with the
// defaults, so that the configuration in force (GET /admin/config) shows
// the whole policy. A Settings built in Go may leave them out: New and
// Check read an empty value as its default.
func (s *Settings) SetDefaults() {
	*s = Settings{
		MinVersion:   DefaultMinVersion,
		CipherSuites: slices.Clone(DefaultCipherSuites),
		Curves:       slices.Clone(DefaultCurves),
		ALPN:         slices.Clone(DefaultALPN),
	}
}

// Paths are the settings' file names, to be resolved in place (relative
// ones against the configuration file's directory).
func (s *Settings) Paths() []*string {
	out := []*string{&s.Cert, &s.Key, &s.OCSP, &s.ClientCA, &s.SessionTicketKeys}
	for i := range s.Certificates {
		h := &s.Certificates[i]
		out = append(out, &h.Cert, &h.Key, &h.OCSP, &h.ClientCA)
	}
	return out
}

// Files are the files the settings name: what `corput serve --watch`
// watches, so that a renewed certificate, OCSP response or ticket key
// file is a reload.
func (s *Settings) Files() []string {
	var out []string
	for _, p := range s.Paths() {
		if *p != "" {
			out = append(out, *p)
		}
	}
	return out
}

// orDefault is list, or def when list was left out (nil).
func orDefault(list, def []string) []string {
	if list == nil {
		return def
	}
	return list
}
