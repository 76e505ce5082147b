package edgetls

import (
	"crypto/tls"
	"encoding/base64"
	"os"
	"strings"
	"testing"
)

// resumes connects with cache and reports whether the session resumed.
// The request reads the response, so a TLS 1.3 ticket sent after the
// handshake reaches the cache.
func resumes(t *testing.T, addr string, cfg *tls.Config) bool {
	t.Helper()
	st, _, err := get(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st.DidResume
}

// TestTicketKeysRotateInPlace: policies with the same key file resume each
// other's tickets; a rotation to a new key keeps the replaced key for
// decryption, until the next rotation drops it; a policy built afresh
// holds only the file's keys. Without a file, a reload keeps crypto/tls's
// own keys, and a new process does not.
func TestTicketKeysRotateInPlace(t *testing.T) {
	p := newPKI(t, "tickets")
	_, certFile, keyFile := p.server(t, "gw", "gw.test")
	k1 := ticketFile(t, p, "k1", key(1))
	k2 := ticketFile(t, p, "k2", key(2))
	k3 := ticketFile(t, p, "k3", key(3), key(4))
	settings := func(file string) *Settings {
		return &Settings{Cert: certFile, Key: keyFile, SessionTicketKeys: file}
	}
	var cur current
	addr := serve(t, &cur, nil)
	for _, version := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			client := func() *tls.Config {
				return &tls.Config{ServerName: "gw.test", RootCAs: p.ca.Pool(), MaxVersion: version, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
			}
			// A ticket sealed under k1, presented to policies built from k2.
			p1 := mustNew(t, settings(k1), nil)
			cur.Store(p1)
			c1 := client()
			if resumes(t, addr, c1) {
				t.Fatal("the first connection resumed")
			}
			cur.Store(mustNew(t, settings(k1), nil)) // another gateway, the same file
			if !resumes(t, addr, c1) {
				t.Fatal("a policy with the same key file did not resume")
			}
			c2 := client()
			cur.Store(p1)
			resumes(t, addr, c2)
			cur.Store(mustNew(t, settings(k2), nil))
			if resumes(t, addr, c2) {
				t.Fatal("a policy without the ticket's key resumed it")
			}

			c3 := client()
			cur.Store(p1)
			resumes(t, addr, c3)
			p2 := mustNew(t, settings(k2), p1) // rotated in place
			cur.Store(p2)
			c4 := client()
			resumes(t, addr, c4) // a ticket sealed under k2
			cur.Store(mustNew(t, settings(k2), p2))
			if !resumes(t, addr, c3) {
				t.Fatal("after a rotation in place, a ticket of the replaced key did not resume")
			}
			c5 := client()
			cur.Store(p1)
			resumes(t, addr, c5)
			cur.Store(mustNew(t, settings(k3), mustNew(t, settings(k2), p1)))
			if resumes(t, addr, c5) {
				t.Fatal("after a second rotation, a ticket of the key two files back resumed")
			}
			if !resumes(t, addr, c4) {
				t.Fatal("after a second rotation, a ticket of the key one file back did not resume")
			}

			a1 := mustNew(t, settings(""), nil)
			cur.Store(a1)
			c6 := client()
			resumes(t, addr, c6)
			cur.Store(mustNew(t, settings(""), a1))
			if !resumes(t, addr, c6) {
				t.Fatal("without a key file, a reload lost the tickets")
			}
			cur.Store(mustNew(t, settings(""), nil))
			if resumes(t, addr, c6) {
				t.Fatal("without a key file, another process resumed a ticket")
			}
		})
	}
}

// oneSession is a client session cache that offers its one session to
// every server name: the tests present a ticket issued for one host to
// another.
type oneSession struct{ s *tls.ClientSessionState }

func (o *oneSession) Get(string) (*tls.ClientSessionState, bool) { return o.s, o.s != nil }
func (o *oneSession) Put(_ string, s *tls.ClientSessionState) {
	if s != nil {
		o.s = s
	}
}

// TestTicketsBoundToTheClientPolicy: a ticket resumes on a host under the
// same client-certificate policy; a ticket without a certificate does not
// resume where one would be asked for (crypto/tls alone would resume it),
// nor does a ticket verified under a CA a reload replaced.
func TestTicketsBoundToTheClientPolicy(t *testing.T) {
	p := newPKI(t, "binding")
	other := newPKI(t, "binding-other")
	_, certFile, keyFile := p.server(t, "gw", "*.test")
	keys := ticketFile(t, p, "keys", key(7))
	alice := p.client(t, "alice")
	hosts := func(mtlsCA string) *Settings {
		return &Settings{Cert: certFile, Key: keyFile, SessionTicketKeys: keys, Certificates: []Host{
			{Hosts: []string{"open.test", "open2.test"}, Cert: certFile, Key: keyFile},
			{Hosts: []string{"mtls.test"}, Cert: certFile, Key: keyFile, ClientCA: mtlsCA, ClientAuth: ClientAuthVerifyIfGiven},
		}}
	}
	var cur current
	cur.Store(mustNew(t, hosts(p.caFile), nil))
	addr := serve(t, &cur, nil)
	// InsecureSkipVerify: the client's own check of a resumed session's
	// server name is not what is tested here.
	client := func(name string, cache tls.ClientSessionCache) *tls.Config {
		return &tls.Config{ServerName: name, InsecureSkipVerify: true, ClientSessionCache: cache, Certificates: []tls.Certificate{alice}}
	}
	open := &oneSession{}
	resumes(t, addr, client("open.test", open))
	if resumes(t, addr, client("mtls.test", open)) {
		t.Fatal("a ticket of a host that asks for no certificate resumed on one that verifies them")
	}
	open = &oneSession{}
	resumes(t, addr, client("open.test", open))
	if !resumes(t, addr, client("open2.test", open)) {
		t.Fatal("a ticket did not resume on another host under the same policy")
	}
	mtls := &oneSession{}
	resumes(t, addr, client("mtls.test", mtls))
	if !resumes(t, addr, client("mtls.test", mtls)) {
		t.Fatal("a ticket did not resume on its own host")
	}
	cur.Store(mustNew(t, hosts(other.caFile), cur.Load()))
	if resumes(t, addr, client("mtls.test", mtls)) {
		t.Fatal("after client_ca changed, a ticket verified under the old CA resumed")
	}
}

func TestReadTicketKeys(t *testing.T) {
	p := newPKI(t, "keyfile")
	good := base64.StdEncoding.EncodeToString(make([]byte, 32))
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	for _, c := range []struct {
		name, content, err string
		keys               int
	}{
		{"two keys, comments and blank lines", "# rotated daily\n\n" + good + "\n" + strings.Replace(good, "A", "B", 1) + "\n", "", 2},
		{"empty", "# nothing\n", "holds no key", 0},
		{"not base64", "!!!\n", "line 1 is not base64", 0},
		{"16 bytes", "\n" + short + "\n", "line 2 holds 16 bytes", 0},
		{"repeated", good + "\n" + good + "\n", "line 2 repeats", 0},
		{"too many", manyKeys(17), "more than 16 keys", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := p.write(t, "keys", []byte(c.content))
			keys, err := ReadTicketKeys(file)
			if c.err == "" {
				if err != nil || len(keys) != c.keys {
					t.Fatalf("%d keys, %v; want %d", len(keys), err, c.keys)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want …%s…", err, c.err)
			}
			if strings.Contains(err.Error(), good) {
				t.Fatalf("the error quotes a key: %v", err)
			}
		})
	}
	file := ticketFile(t, p, "open-keys", key(1))
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	_, certFile, keyFile := p.server(t, "gw", "gw.test")
	fs := (&Settings{Cert: certFile, Key: keyFile, SessionTicketKeys: file}).Check()
	if len(fs) != 1 || !fs[0].Warning || fs[0].Key != "session_ticket_keys" || !strings.Contains(fs[0].Message, "chmod 600") {
		t.Fatalf("a ticket key file others can read: %+v, want one warning", fs)
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		k := key(byte(i + 1))
		b.WriteString(base64.StdEncoding.EncodeToString(k[:]) + "\n")
	}
	return b.String()
}
