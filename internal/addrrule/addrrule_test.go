package addrrule

import (
	"net/netip"
	"testing"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestAllows(t *testing.T) {
	r := New(prefixes("10.0.0.0/8", "2001:db8::/32", "::ffff:192.0.2.0/120"), prefixes("10.6.6.0/24"))
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"10.1.2.3", true},
		{"10.6.6.6", false},        // deny wins over allow
		{"::ffff:10.6.6.6", false}, // mapped: the same client
		{"::ffff:10.1.2.3", true},
		{"192.0.2.9", true},  // allow written mapped, matched as IPv4
		{"192.0.3.9", false}, // outside allow
		{"2001:db8::1", true},
		{"2001:db9::1", false},
	} {
		if got := r.Allows(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Allows(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	if !(Rules{}).Allows(netip.MustParseAddr("6.6.6.6")) || !(Rules{}).Empty() {
		t.Error("the zero Rules refuse someone")
	}
	denyOnly := New(nil, prefixes("6.6.6.0/24"))
	if !denyOnly.Allows(netip.Addr{}) || denyOnly.Allows(netip.MustParseAddr("6.6.6.1")) {
		t.Error("a deny list alone: an unknown address passes, a denied one does not")
	}
	if r.Allows(netip.Addr{}) {
		t.Error("an unknown address passes an allow list")
	}
}

func BenchmarkAllows(b *testing.B) {
	r := New(prefixes("10.0.0.0/8", "172.16.0.0/12"), prefixes("10.6.6.0/24"))
	a := netip.MustParseAddr("172.16.1.1")
	b.ReportAllocs()
	for b.Loop() {
		if !r.Allows(a) {
			b.Fatal("refused")
		}
	}
}
