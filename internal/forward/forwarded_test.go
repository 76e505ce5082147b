package forward

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestForwardedField: Apply (net/http's path; the fast path calls the
// same Write) sets Forwarded when asked: for= (IPv4 bare, IPv6 and an
// IPv4-mapped one unmapped, unknown without an address), proto=, host=
// quoted when not a token; a trusted peer's kept and appended to (blank
// lines skipped), anyone else's replaced; none added when off.
func TestForwardedField(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, c := range []struct {
		name, remote, host string
		tls                bool
		prior              []string
		off                bool
		want               []string
	}{
		{"IPv4", "192.0.2.7:5555", "api.example", false, nil, false, []string{"for=192.0.2.7;proto=http;host=api.example"}},
		{"IPv6 over TLS", "[2001:db8::1]:443", "api.example", true, nil, false, []string{`for="[2001:db8::1]";proto=https;host=api.example`}},
		{"IPv4-mapped", "[::ffff:192.0.2.7]:1", "api.example", false, nil, false, []string{"for=192.0.2.7;proto=http;host=api.example"}},
		{"no address", "@", "api.example", false, nil, false, []string{"for=unknown;proto=http;host=api.example"}},
		{"host with a port", "192.0.2.7:5555", "api.example:8443", false, nil, false, []string{`for=192.0.2.7;proto=http;host="api.example:8443"`}},
		{"host with a quote", "192.0.2.7:5555", `a"b\c`, false, nil, false, []string{`for=192.0.2.7;proto=http;host="a\"b\\c"`}},
		{"no host", "192.0.2.7:5555", "", false, nil, false, []string{"for=192.0.2.7;proto=http"}},
		{"untrusted replaced", "192.0.2.7:5555", "h", false, []string{"for=6.6.6.6", "for=7.7.7.7"}, false, []string{"for=192.0.2.7;proto=http;host=h"}},
		{"trusted appended to", "10.1.2.3:5555", "h", false, []string{"for=198.51.100.1;proto=https", " ", "for=\"[2001:db8::9]\""}, false,
			[]string{`for=198.51.100.1;proto=https, for="[2001:db8::9]", for=10.1.2.3;proto=http;host=h`}},
		{"off: nothing added", "192.0.2.7:5555", "h", false, nil, true, nil},
		{"off: a client's left as it is", "192.0.2.7:5555", "h", false, []string{"for=6.6.6.6"}, true, []string{"for=6.6.6.6"}},
	} {
		h := http.Header{}
		if c.prior != nil {
			h["Forwarded"] = c.prior
		}
		Forwarding{Trusted: trusted, Forwarded: !c.off}.Apply(h, c.remote, c.host, c.tls)
		if got := h["Forwarded"]; strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: Forwarded %q, want %q", c.name, got, c.want)
		}
		if h.Get("X-Forwarded-Proto") == "" {
			t.Errorf("%s: X-Forwarded-* must stay beside it", c.name)
		}
	}
}

// TestForwardedWriteAllocatesNothing: with a scratch buffer grown once,
// Write with Forwarded on allocates nothing (the fast path's Request).
func TestForwardedWriteAllocatesNothing(t *testing.T) {
	p := Forwarding{Forwarded: true}.Peer("[2001:db8::1]:443", true)
	host := []byte("api.example:8443")
	scratch := make([]byte, 0, 256)
	var sink int
	set := func(name string, value []byte) { sink += len(value) }
	prior := headerPrior(http.Header{"Forwarded": {"for=6.6.6.6"}})
	if n := testing.AllocsPerRun(100, func() { scratch = p.Write(host, prior, scratch, set) }); n != 0 {
		t.Errorf("Write allocates %v times a call, want 0", n)
	}
}
