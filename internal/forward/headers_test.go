package forward

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"testing"

	"github.com/corput/corput/internal/h1"
)

func TestRemoveHopHeaders(t *testing.T) {
	h := http.Header{
		"Connection":        {"keep-alive, X-Secret"},
		"X-Secret":          {"1"},
		"Keep-Alive":        {"timeout=5"},
		"Transfer-Encoding": {"chunked"},
		"Te":                {"trailers"},
		"Proxy-Connection":  {"keep-alive"},
		"X-Keep":            {"yes"},
	}
	RemoveHop(h, "")
	for _, k := range []string{"Connection", "X-Secret", "Keep-Alive", "Transfer-Encoding", "Proxy-Connection"} {
		if _, ok := h[k]; ok {
			t.Errorf("%s survived", k)
		}
	}
	if h.Get("Te") != "trailers" || h.Get("X-Keep") != "yes" {
		t.Errorf("end-to-end headers lost: %v", h)
	}
	h = http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}
	up := UpgradeType(h)
	RemoveHop(h, up)
	if up != "websocket" || h.Get("Upgrade") != "websocket" || h.Get("Connection") != "Upgrade" {
		t.Errorf("upgrade headers: %q %v", up, h)
	}
}

func TestForwardingTrust(t *testing.T) {
	f := Forwarding{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	h := http.Header{"X-Forwarded-For": {"1.2.3.4"}, "X-Forwarded-Proto": {"https"}}
	f.Apply(h, "192.0.2.7:5555", "shop.example", false)
	if got := h.Get("X-Forwarded-For"); got != "192.0.2.7" {
		t.Errorf("untrusted peer: XFF %q, want only the peer", got)
	}
	if h.Get("X-Forwarded-Proto") != "http" || h.Get("X-Forwarded-Host") != "shop.example" {
		t.Errorf("untrusted peer: %v", h)
	}
	h = http.Header{"X-Forwarded-For": {"1.2.3.4"}, "X-Forwarded-Proto": {"https"}}
	f.Apply(h, "10.1.2.3:5555", "shop.example", false)
	if got := h.Get("X-Forwarded-For"); got != "1.2.3.4, 10.1.2.3" {
		t.Errorf("trusted peer: XFF %q", got)
	}
	if h.Get("X-Forwarded-Proto") != "https" {
		t.Errorf("trusted peer's proto replaced: %v", h)
	}
}

// FuzzHeaderHygiene checks the forwarding rules on arbitrary header
// values: no hop-by-hop header and nothing named in Connection survives
// (but TE: trailers, and the upgrade pair when upgrading), and an
// untrusted client never sets X-Forwarded-*.
func FuzzHeaderHygiene(f *testing.F) {
	f.Add("keep-alive, X-Secret", "trailers", "1.2.3.4", "X-Secret", "websocket", "shop.test")
	f.Add("Upgrade", "gzip", "", "Upgrade", "h2c", "")
	f.Add(",,close ,  Te", "trailers, deflate", "a, b", "Te", "", "x")
	f.Fuzz(func(t *testing.T, connection, te, xff, extra, upgrade, host string) {
		h := http.Header{
			"Connection": {connection}, "Te": {te}, "Keep-Alive": {"timeout=5"},
			"Transfer-Encoding": {"chunked"}, "Proxy-Connection": {"keep-alive"},
			"X-Forwarded-For": {xff}, "X-Forwarded-Host": {"evil.test"}, "X-Forwarded-Proto": {"https"},
		}
		if upgrade != "" {
			h["Upgrade"] = []string{upgrade}
		}
		h.Add(extra, "v")
		up := UpgradeType(h)
		named := strings.Split(connection, ",")
		RemoveHop(h, up)
		for _, k := range h1.HopFields {
			v, ok := h[k]
			switch {
			case !ok:
			case k == "Te" && len(v) == 1 && v[0] == "trailers":
			case up != "" && k == "Connection" && len(v) == 1 && v[0] == "Upgrade":
			case up != "" && k == "Upgrade" && len(v) == 1 && v[0] == up:
			default:
				t.Fatalf("hop-by-hop %s: %q survived (upgrade %q)", k, v, up)
			}
		}
		for _, n := range named {
			n = strings.TrimSpace(n)
			if n == "" || strings.EqualFold(n, "upgrade") || (up != "" && strings.EqualFold(n, "connection")) || strings.EqualFold(n, "te") {
				continue
			}
			if _, ok := h[textproto.CanonicalMIMEHeaderKey(n)]; ok && validToken(n) {
				t.Fatalf("%q named in Connection survived: %v", n, h)
			}
		}

		untrusted := h.Clone()
		Forwarding{}.Apply(untrusted, "192.0.2.7:5555", host, false)
		if got := untrusted["X-Forwarded-For"]; len(got) != 1 || got[0] != "192.0.2.7" {
			t.Fatalf("untrusted client set X-Forwarded-For: %q", got)
		}
		if untrusted.Get("X-Forwarded-Proto") != "http" || untrusted.Get("X-Forwarded-Host") != host {
			t.Fatalf("untrusted client set X-Forwarded-Proto/Host: %v", untrusted)
		}
		trusted := h.Clone()
		Forwarding{Trusted: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}.Apply(trusted, "192.0.2.7:5555", host, false)
		got := trusted.Get("X-Forwarded-For")
		if !strings.HasSuffix(got, "192.0.2.7") {
			t.Fatalf("trusted proxy: X-Forwarded-For %q does not end with the peer", got)
		}
		// Blank is optional white space only (SP, HTAB), as the writer
		// trims it; a CR is no white space in a field value (it never
		// passes either parser), so "\r" is a value, kept.
		if strings.Trim(xff, " \t") == "" && got != "192.0.2.7" {
			t.Fatalf("trusted proxy sent an empty X-Forwarded-For %q: got %q, want only the peer", xff, got)
		}
	})
}

// validToken reports whether s is an HTTP token (a header name that can be
// named in Connection).
func validToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return s != ""
}

// BenchmarkRemoveHop is the hop-by-hop cleanup of a typical proxied
// request's header map (run for each request and each response on the
// net/http path).
func BenchmarkRemoveHop(b *testing.B) {
	h := http.Header{"Accept": {"*/*"}, "User-Agent": {"wrk"}, "Host": {"example"}, "Accept-Encoding": {"gzip"},
		"X-Request-Id": {"1"}, "Cookie": {"a=b"}, "Content-Type": {"text/plain"}, "Authorization": {"Bearer x"}}
	b.ReportAllocs()
	for b.Loop() {
		RemoveHop(h, "")
	}
}

// BenchmarkForwardingApply is the net/http path's X-Forwarded-* on a
// request's header map, from an untrusted and from a trusted peer.
func BenchmarkForwardingApply(b *testing.B) {
	f := Forwarding{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for _, peer := range []string{"192.0.2.7:5555", "10.1.2.3:5555"} {
		b.Run(peer, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h := http.Header{"X-Forwarded-For": {"1.2.3.4"}, "Accept": {"*/*"}}
				f.Apply(h, peer, "shop.example", false)
			}
		})
	}
}
