// Package edgetls owns the downstream TLS policy: what corput's HTTPS
// listener offers and accepts, built from the configuration's tls block
// (Settings) in one place an auditor can read (docs/gateway.md, "TLS at the
// edge"; the defaults and why in docs/decisions.md, "TLS at the edge").
//
// Invariants:
//   - A Policy is immutable. A reload builds a new one from the files as
//     they are then and the gateway swaps it in: new handshakes take it,
//     connections already open keep what their handshake agreed.
//   - Every handshake gets the same versions, TLS 1.2 suites, key exchanges
//     and ALPN protocols; only the certificate and the client-certificate
//     policy depend on the server name the client sends (SNI). An exact
//     name beats a wildcard ("*.example.com", one label), which beats the
//     default certificate; no name, or an unknown one, gets the default.
//   - Nothing below TLS 1.2 is offered. The default TLS 1.2 suites are AEAD
//     with forward secrecy (ECDHE) only; a suite crypto/tls counts as
//     insecure is never accepted in the configuration.
//   - A session ticket resumes only under the client-certificate policy it
//     was issued under (mode and CA certificates). crypto/tls checks a
//     resumed certificate's chain against the CAs in force, but it resumes
//     a session without a certificate where one would now be asked for
//     (verify_if_given), and a session verified under one host's CAs where
//     another host only requests one; a ticket from another policy is
//     refused instead, and the full handshake asks again. Refusing a
//     ticket is a full handshake, never a failure.
//   - With session_ticket_keys, gateways configured alike seal and open each
//     other's tickets; a rotation keeps the keys it replaces for decryption
//     until the file changes again (tickets.go).
//   - A client certificate is forwarded to the origin only when the
//     handshake verified it (ClientCertValue); the value is built from the
//     connection's state, never from anything the client sent.
package edgetls

import (
	"bytes"
	"crypto/tls"
	"strings"
	"time"
)

// Policy is the downstream TLS in force.
type Policy struct {
	def     *hostConfig
	exact   map[string]*hostConfig // by lower-case server name
	wild    map[string]*hostConfig // "*.example.com" by "example.com"
	tickets *ticketer
}

// hostConfig is what a handshake for one certificate uses.
type hostConfig struct {
	cfg *tls.Config
	tag []byte // the client-certificate policy (binding)
}

// New builds the policy of s, reading every file it names. prev is the
// policy in force (nil at start): ticket keys that did not change carry
// over from it, and a rotation keeps its keys for decryption.
func New(s *Settings, prev *Policy) (*Policy, error) {
	l, f := s.load(time.Now())
	if err := f.err(); err != nil {
		return nil, err
	}
	var before *ticketer
	if prev != nil {
		before = prev.tickets
	}
	p := &Policy{exact: map[string]*hostConfig{}, wild: map[string]*hostConfig{}, tickets: newTicketer(l.tickets, before)}
	p.def = p.host(l, l.def)
	for _, e := range l.hosts {
		hc := p.host(l, e)
		for _, pat := range e.patterns {
			if suffix, ok := strings.CutPrefix(pat, "*."); ok {
				p.wild[suffix] = hc
			} else {
				p.exact[pat] = hc
			}
		}
	}
	return p, nil
}

func (p *Policy) host(l *loaded, e *entry) *hostConfig {
	cfg := &tls.Config{
		Certificates:     []tls.Certificate{e.cert},
		MinVersion:       l.min,
		CipherSuites:     l.suites,
		CurvePreferences: l.curves,
		NextProtos:       l.alpn,
		ClientAuth:       clientAuthTypes[e.mode],
		ClientCAs:        e.cas,
		WrapSession:      p.tickets.seal(e.tag),
		UnwrapSession:    p.tickets.open(e.tag),
	}
	return &hostConfig{cfg: cfg, tag: e.tag}
}

// Config is the TLS configuration of a handshake for serverName (the
// client's SNI; "" for none). It must not be modified.
func (p *Policy) Config(serverName string) *tls.Config { return p.lookup(serverName).cfg }

func (p *Policy) lookup(name string) *hostConfig {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if hc, ok := p.exact[name]; ok {
		return hc
	}
	if _, suffix, ok := strings.Cut(name, "."); ok {
		if hc, ok := p.wild[suffix]; ok {
			return hc
		}
	}
	return p.def
}

// Listener is the TLS configuration of the HTTPS listener: each handshake
// takes the policy current returns then, so that a reload applies to the
// next handshake.
func Listener(current func() *Policy) *tls.Config {
	return &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		return current().Config(h.ServerName), nil
	}}
}

// Misdirected reports whether a request for host (the Host header or
// :authority, a port allowed) arrived on a connection whose handshake was
// for serverName under another client-certificate policy. Answer it 421
// Misdirected Request (RFC 9110 §15.5.20): otherwise a client could
// handshake as a host that asks for no certificate and then send requests
// to one that requires it. A browser that coalesced the connection opens a
// new one on a 421.
func (p *Policy) Misdirected(serverName, host string) bool {
	return !bytes.Equal(p.lookup(serverName).tag, p.lookup(hostOnly(host)).tag)
}

// hostOnly is host without its port and an IPv6 literal's brackets.
func hostOnly(host string) string {
	if i := strings.LastIndexByte(host, ':'); i > strings.LastIndexByte(host, ']') {
		host = host[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}
