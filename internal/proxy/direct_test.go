package proxy

import (
	"testing"

	"github.com/corput/corput/internal/route"
)

// TestLocation: each part a redirect leaves out keeps the request's; a
// port that is its scheme's own is not written; building it in a kept
// buffer allocates nothing.
func TestLocation(t *testing.T) {
	for _, c := range []struct {
		name               string
		rd                 route.Redirect
		prefix, host, path string
		target             string
		tls                bool
		want               string
	}{
		{"all kept", route.Redirect{}, "/", "gw.test:8080", "/a", "/a?x=1", false, "http://gw.test:8080/a?x=1"},
		{"over TLS", route.Redirect{Path: "/b"}, "/", "gw.test", "/a", "/a", true, "https://gw.test/b"},
		{"scheme drops the request's port", route.Redirect{Scheme: "https"}, "/", "gw.test:8080", "/a", "/a", false, "https://gw.test/a"},
		{"the scheme's own port is not written", route.Redirect{Scheme: "https", Port: 443}, "/", "gw.test:8080", "/a", "/a", false, "https://gw.test/a"},
		{"http's own port is not written", route.Redirect{Port: 80}, "/", "gw.test:8080", "/a", "/a", false, "http://gw.test/a"},
		{"another port is", route.Redirect{Scheme: "https", Port: 80}, "/", "gw.test", "/a", "/a", false, "https://gw.test:80/a"},
		{"host replaced, port kept", route.Redirect{Host: "b.example"}, "/", "gw.test:8080", "/a", "/a", false, "http://b.example:8080/a"},
		{"IPv6 literal host", route.Redirect{}, "/", "[::1]:8080", "/a", "/a", false, "http://[::1]:8080/a"},
		{"IPv6 literal host, no port", route.Redirect{Path: "/b"}, "/", "[::1]", "/a", "/a", false, "http://[::1]/b"},
		{"prefix replaced", route.Redirect{Prefix: "/new/", PrefixSet: true}, "/old/", "gw.test", "/old/a/b", "/old/a/b?q", false, "http://gw.test/new/a/b?q"},
		{"prefix replaced by the root", route.Redirect{Prefix: "/", PrefixSet: true}, "/old/", "gw.test", "/old/a", "/old/a", false, "http://gw.test/a"},
		{"query stripped", route.Redirect{StripQuery: true}, "/", "gw.test", "/a", "/a?x=1", false, "http://gw.test/a"},
		{"empty query", route.Redirect{}, "/", "gw.test", "/a", "/a?", false, "http://gw.test/a"},
		{"absolute-form target's query", route.Redirect{}, "/", "gw.test", "/a", "http://gw.test/a?x=1", false, "http://gw.test/a?x=1"},
		{"no host: relative", route.Redirect{Path: "/b"}, "/", "", "/a", "/a?x", false, "/b?x"},
	} {
		got := string(Location(nil, &c.rd, c.prefix, c.host, c.path, c.target, c.tls))
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	rd := route.Redirect{Scheme: "https", Port: 8443, Prefix: "/new/", PrefixSet: true}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		buf = Location(buf[:0], &rd, "/old/", "gw.test:8080", "/old/a", "/old/a?x=1", false)
	}); n != 0 {
		t.Errorf("Location allocates %v times a call, want 0", n)
	}
}
