package edgetls

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
)

// The words of the policy's keys and what crypto/tls calls them.

var versions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}

// parseVersion reads min_version ("" is the default).
func parseVersion(f *findings, key, v string) uint16 {
	if v == "" {
		v = DefaultMinVersion
	}
	if id, ok := versions[v]; ok {
		return id
	}
	switch v {
	case "1.0", "1", "1.1":
		f.errorf(key, "TLS %s is deprecated (RFC 8996) and not served; use 1.2 (the default) or 1.3", v)
	default:
		f.errorf(key, "%q is not a TLS version; use 1.2 (the default) or 1.3", v)
	}
	return tls.VersionTLS12
}

// curve is a key exchange by the name the curves key gives it.
type curve struct {
	name string
	id   tls.CurveID
}

// curveNames are the key exchanges the curves key may list.
var curveNames = []curve{
	{"X25519MLKEM768", tls.X25519MLKEM768},
	{"SecP256r1MLKEM768", tls.SecP256r1MLKEM768},
	{"SecP384r1MLKEM1024", tls.SecP384r1MLKEM1024},
	{"X25519", tls.X25519},
	{"P-256", tls.CurveP256},
	{"P-384", tls.CurveP384},
	{"P-521", tls.CurveP521},
}

func parseCurves(f *findings, key string, names []string) []tls.CurveID {
	names = orDefault(names, DefaultCurves)
	if len(names) == 0 {
		f.errorf(key, "an empty list; leave the key out for the default %s", strings.Join(DefaultCurves, ", "))
		return nil
	}
	var out []tls.CurveID
	for i, n := range names {
		k := index(key, i)
		j := slices.IndexFunc(curveNames, func(c curve) bool { return strings.EqualFold(c.name, n) })
		switch {
		case j < 0:
			all := make([]string, len(curveNames))
			for i, c := range curveNames {
				all[i] = c.name
			}
			f.errorf(k, "%q is not a key exchange crypto/tls offers; use some of: %s", n, strings.Join(all, ", "))
		case slices.Contains(out, curveNames[j].id):
			f.errorf(k, "%s is listed twice; list it once", curveNames[j].name)
		default:
			out = append(out, curveNames[j].id)
		}
	}
	return out
}

// parseCipherSuites reads cipher_suites: TLS 1.2 suites crypto/tls counts
// as secure. A CBC suite is accepted with a warning (it is offered only to
// a client that has no AEAD suite, and graders mark it weak).
func parseCipherSuites(f *findings, key string, names []string, minVersion uint16) []uint16 {
	if names != nil && len(names) == 0 {
		f.errorf(key, "an empty list; leave the key out for the default (the ECDHE AEAD suites)")
		return nil
	}
	if minVersion >= tls.VersionTLS13 && names != nil && !slices.Equal(names, DefaultCipherSuites) {
		f.warnf(key, "ignored: min_version is 1.3, and TLS 1.3's suites are fixed by crypto/tls (all AEAD with forward secrecy)")
	}
	names = orDefault(names, DefaultCipherSuites)
	var out []uint16
	for i, n := range names {
		k := index(key, i)
		id, ok := suiteID(n)
		switch {
		case !ok:
			f.errorf(k, "%q is not a cipher suite crypto/tls knows; use IANA names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (leave the key out for the default)", n)
			continue
		case slices.Contains(out, id):
			f.errorf(k, "%s is listed twice; list it once", n)
			continue
		}
		s := suiteByID(id)
		switch {
		case isInsecure(id):
			f.errorf(k, "%s is among crypto/tls's insecure suites (%s); remove it", n, insecureWhy(n))
			continue
		case !slices.Contains(s.SupportedVersions, tls.VersionTLS12):
			f.errorf(k, "%s is a TLS 1.3 suite: TLS 1.3's suites are always on and fixed by crypto/tls; list only TLS 1.2 suites here", n)
			continue
		case strings.Contains(n, "_CBC_"):
			f.warnf(k, "%s is a CBC suite: offered only to clients without an AEAD suite, and rated weak by TLS graders; the default offers none", n)
		}
		out = append(out, id)
	}
	return out
}

func suiteID(name string) (uint16, bool) {
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if s.Name == name {
			return s.ID, true
		}
	}
	return 0, false
}

func suiteByID(id uint16) *tls.CipherSuite {
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if s.ID == id {
			return s
		}
	}
	return nil
}

func isInsecure(id uint16) bool {
	return slices.ContainsFunc(tls.InsecureCipherSuites(), func(s *tls.CipherSuite) bool { return s.ID == id })
}

// insecureWhy says why crypto/tls counts a suite as insecure.
func insecureWhy(name string) string {
	switch {
	case strings.Contains(name, "RC4"):
		return "RC4 is broken"
	case strings.Contains(name, "3DES"):
		return "3DES has 64-bit blocks (Sweet32)"
	case strings.HasPrefix(name, "TLS_RSA_"):
		return "RSA key exchange: no forward secrecy"
	default:
		return "CBC with SHA-256 is open to Lucky13-style timing attacks in crypto/tls"
	}
}

// The application protocols a downstream connection may speak.
var alpnNames = []string{"h2", "http/1.1"}

func parseALPN(f *findings, key string, names []string) []string {
	if names != nil && len(names) == 0 {
		f.errorf(key, "an empty list; leave the key out for the default h2, http/1.1")
		return nil
	}
	names = orDefault(names, DefaultALPN)
	var out []string
	for i, n := range names {
		k := index(key, i)
		switch {
		case !slices.Contains(alpnNames, n):
			f.errorf(k, "%q is not a protocol corput serves over TLS; use h2, http/1.1 or both", n)
		case slices.Contains(out, n):
			f.errorf(k, "%s is listed twice; list it once", n)
		default:
			out = append(out, n)
		}
	}
	return out
}

// clientAuthTypes map the client_auth modes onto crypto/tls's.
var clientAuthTypes = map[ClientAuth]tls.ClientAuthType{
	ClientAuthNone:          tls.NoClientCert,
	ClientAuthRequest:       tls.RequestClientCert,
	ClientAuthRequire:       tls.RequireAndVerifyClientCert,
	ClientAuthVerifyIfGiven: tls.VerifyClientCertIfGiven,
}

// verifies reports whether mode checks a certificate against client_ca.
func (m ClientAuth) verifies() bool { return m == ClientAuthRequire || m == ClientAuthVerifyIfGiven }

func checkClientAuth(f *findings, key string, m ClientAuth) bool {
	if _, ok := clientAuthTypes[m]; ok || m == "" {
		return true
	}
	f.errorf(key, "%q is not one of: none, request, require, verify_if_given", m)
	return false
}

func index(key string, i int) string { return fmt.Sprintf("%s[%d]", key, i) }
