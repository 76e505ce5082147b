package edgetls

import (
	"bytes"
	"crypto/tls"
	"math/big"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/corput/corput/internal/testcert"
)

// response is a DER OCSP response the CA signs for leaf.
func (p *pki) response(t *testing.T, leaf *testcert.Cert, status int, this, next time.Time) []byte {
	t.Helper()
	der, err := ocsp.CreateResponse(p.ca.Leaf, p.ca.Leaf, ocsp.Response{
		Status: status, SerialNumber: leaf.Leaf.SerialNumber, ThisUpdate: this, NextUpdate: next,
		RevokedAt: this, RevocationReason: ocsp.KeyCompromise,
	}, p.ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestOCSPStapledAndRefreshedOnReload: the response in the file is stapled;
// a policy built after the file changed staples the new one; an expired
// response is not stapled (a warning), and a revoked, foreign or broken
// one is an error.
func TestOCSPStapledAndRefreshedOnReload(t *testing.T) {
	p := newPKI(t, "ocsp")
	leaf, certFile, keyFile := p.server(t, "gw", "gw.test")
	now := time.Now()
	first := p.response(t, leaf, ocsp.Good, now.Add(-time.Hour), now.Add(time.Hour))
	file := p.write(t, "gw.ocsp", first)
	s := &Settings{Cert: certFile, Key: keyFile, OCSP: file}
	var cur current
	cur.Store(mustNew(t, s, nil))
	addr := serve(t, &cur, nil)
	client := &tls.Config{ServerName: "gw.test", RootCAs: p.ca.Pool()}
	staple := func() []byte {
		st, err := handshake(addr, client)
		if err != nil {
			t.Fatal(err)
		}
		return st.OCSPResponse
	}
	if !bytes.Equal(staple(), first) {
		t.Fatal("the response in the file is not stapled")
	}
	second := p.response(t, leaf, ocsp.Good, now.Add(-time.Minute), now.Add(2*time.Hour))
	p.write(t, "gw.ocsp", second)
	if !bytes.Equal(staple(), first) {
		t.Fatal("the staple changed before a reload")
	}
	cur.Store(mustNew(t, s, cur.Load()))
	if !bytes.Equal(staple(), second) {
		t.Fatal("after a reload, the new response is not stapled")
	}

	p.write(t, "gw.ocsp", p.response(t, leaf, ocsp.Good, now.Add(-2*time.Hour), now.Add(-time.Minute)))
	fs := s.Check()
	if len(fs) != 1 || !fs[0].Warning || fs[0].Key != "ocsp" || !strings.Contains(fs[0].Message, "expired") {
		t.Fatalf("an expired response: %+v, want one warning", fs)
	}
	cur.Store(mustNew(t, s, cur.Load()))
	if got := staple(); got != nil {
		t.Fatal("an expired response was stapled")
	}

	other, _, _ := p.server(t, "other", "other.test")
	notOurs := p.response(t, other, ocsp.Good, now.Add(-time.Hour), now.Add(time.Hour))
	elsewhere := newPKI(t, "ocsp-elsewhere")
	forged, err := ocsp.CreateResponse(p.ca.Leaf, elsewhere.ca.Leaf, ocsp.Response{
		Status: ocsp.Good, SerialNumber: new(big.Int).Set(leaf.Leaf.SerialNumber), ThisUpdate: now, NextUpdate: now.Add(time.Hour),
	}, elsewhere.ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		der  []byte
		want string
	}{
		{"revoked", p.response(t, leaf, ocsp.Revoked, now.Add(-time.Hour), now.Add(time.Hour)), "revoked"},
		{"unknown", p.response(t, leaf, ocsp.Unknown, now.Add(-time.Hour), now.Add(time.Hour)), "unknown"},
		{"another certificate's", notOurs, "not an OCSP response for this certificate"},
		{"signed by another CA", forged, "not an OCSP response for this certificate"},
		{"not DER", []byte("garbage"), "not an OCSP response"},
	} {
		p.write(t, "gw.ocsp", c.der)
		fs := s.Check()
		if len(fs) != 1 || fs[0].Warning || fs[0].Key != "ocsp" || !strings.Contains(fs[0].Message, c.want) {
			t.Errorf("%s: %+v, want one error …%s…", c.name, fs, c.want)
		}
		if _, err := New(s, nil); err == nil || !strings.Contains(err.Error(), "tls.ocsp: ") {
			t.Errorf("%s: New: %v, want the error", c.name, err)
		}
	}
}
