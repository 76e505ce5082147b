package forward

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/h1"
)

func keySource(t *testing.T, spec string) KeySource {
	t.Helper()
	h, err := config.ParseHashOn(spec)
	if err != nil {
		t.Fatal(err)
	}
	return NewKeySource(h, nil)
}

// TestKeySource: each hash_on finds the same key on both paths' fields (an
// http.Header and a raw head), and source_ip takes X-Forwarded-For's last
// address only from a trusted peer.
func TestKeySource(t *testing.T) {
	fwd := Forwarding{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	trusted, stranger := fwd.Peer("10.1.2.3:5000", false), fwd.Peer("192.0.2.7:5000", false)
	for _, tc := range []struct {
		name, spec string
		fields     [][2]string
		peer       Peer
		want       string // the value hashed; "" for no key
	}{
		{"header", "header X-Merchant", [][2]string{{"X-Merchant", " m-42 "}}, stranger, "m-42"},
		{"header absent", "header X-Merchant", [][2]string{{"X-Other", "1"}}, stranger, ""},
		{"header empty", "header X-Merchant", [][2]string{{"X-Merchant", ""}}, stranger, ""},
		{"cookie", "cookie sid", [][2]string{{"Cookie", "a=1; sid=abc; b=2"}}, stranger, "abc"},
		{"cookie quoted, second field", "cookie sid", [][2]string{{"Cookie", "a=1"}, {"Cookie", `sid="q"`}}, stranger, "q"},
		{"cookie name is exact", "cookie sid", [][2]string{{"Cookie", "SID=no; xsid=no"}}, stranger, ""},
		{"source_ip", "source_ip", nil, stranger, "192.0.2.7"},
		{"source_ip ignores a stranger's X-Forwarded-For", "source_ip", [][2]string{{"X-Forwarded-For", "203.0.113.9"}}, stranger, "192.0.2.7"},
		{"source_ip from a trusted proxy", "source_ip", [][2]string{{"X-Forwarded-For", "1.1.1.1"}, {"X-Forwarded-For", "198.51.100.1, 203.0.113.9 ,"}}, trusted, "203.0.113.9"},
		{"source_ip, trusted proxy without X-Forwarded-For", "source_ip", nil, trusted, "10.1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks := keySource(t, tc.spec)
			want := balance.KeyOfString(tc.want)
			hdr := http.Header{}
			raw := "GET / HTTP/1.1\r\nHost: x\r\n"
			for _, f := range tc.fields {
				hdr.Add(f[0], f[1])
				raw += f[0] + ": " + f[1] + "\r\n"
			}
			var head h1.Head
			if _, res := h1.ParseRequest([]byte(raw+"\r\n"), &head); res != h1.Complete {
				t.Fatalf("head did not parse: %v", res)
			}
			if got := ks.Key(HeaderFields(hdr), tc.peer); got != want {
				t.Errorf("net/http fields: key %v, want the key of %q", got, tc.want)
			}
			if got := ks.Key(&head, tc.peer); got != want {
				t.Errorf("raw head: key %v, want the key of %q", got, tc.want)
			}
			if allocs := testing.AllocsPerRun(100, func() { ks.Key(&head, tc.peer) }); allocs != 0 {
				t.Errorf("%.0f allocs on the raw head, want 0", allocs)
			}
		})
	}
}

func TestParseHashOn(t *testing.T) {
	for _, bad := range []string{"", "header", "cookie a b", "ip", "header bad:name", "source_ip x"} {
		if _, err := config.ParseHashOn(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if h, err := config.ParseHashOn("header X-Merchant-ID"); err != nil || h.Kind != config.HashHeader || h.Name != "x-merchant-id" {
		t.Errorf("header: %+v %v", h, err)
	}
}

// TestNewCookie: a source with balancer.cookie makes a random value, the
// field with its attributes, and the key of that value — the key a later
// request carrying the cookie has; without balancer.cookie it makes none.
func TestNewCookie(t *testing.T) {
	h, _ := config.ParseHashOn("cookie sid")
	ks := NewKeySource(h, &config.StickyCookie{TTL: 90 * time.Second})
	field, k, ok := ks.NewCookie(nil)
	value, attrs, _ := strings.Cut(string(field), "; ")
	if !ok || len(value) != len("sid=")+16 || attrs != "Path=/; Max-Age=90; HttpOnly" {
		t.Fatalf("field %q, ok %v", field, ok)
	}
	var head h1.Head
	h1.ParseRequest([]byte("GET / HTTP/1.1\r\nHost: x\r\nCookie: "+value+"\r\n\r\n"), &head)
	if got := ks.Key(&head, Peer{}); got != k || !k.Valid() {
		t.Errorf("the cookie's key %v, NewCookie's %v", got, k)
	}
	if other, _, _ := ks.NewCookie(nil); string(other) == string(field) {
		t.Error("two new cookies are equal")
	}
	buf := make([]byte, 0, 128)
	if allocs := testing.AllocsPerRun(100, func() { ks.NewCookie(buf[:0]) }); allocs != 0 {
		t.Errorf("%.0f allocs with room in dst, want 0", allocs)
	}
	if _, _, ok := NewKeySource(h, nil).NewCookie(nil); ok {
		t.Error("a source without balancer.cookie made a cookie")
	}
}
