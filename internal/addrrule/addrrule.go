// Package addrrule is an allow and deny list of client address prefixes
// (downstream.addresses, routes[].addresses), answered 403
// address_denied.
//
// Invariants:
//   - Deny wins: an address inside any deny prefix is refused, whatever
//     allow says. Then, when allow is not empty, an address inside none of
//     its prefixes is refused. The zero Rules refuse nobody.
//   - IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are read as IPv4, so one
//     prefix covers a client however the socket spelled it.
//   - An invalid address (none known) is refused by any rule that has an
//     allow list and let through by a deny list alone.
//   - Allows allocates nothing.
package addrrule

import "net/netip"

// Rules are an allow and a deny list.
type Rules struct {
	allow, deny []netip.Prefix
}

// New returns the rules of allow and deny.
func New(allow, deny []netip.Prefix) Rules {
	return Rules{allow: unmapAll(allow), deny: unmapAll(deny)}
}

func unmapAll(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out
}

// Empty reports whether the rules refuse nobody.
func (r Rules) Empty() bool { return len(r.allow) == 0 && len(r.deny) == 0 }

// Allows reports whether a client at a may pass.
func (r Rules) Allows(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.deny {
		if p.Contains(a) {
			return false
		}
	}
	if len(r.allow) == 0 {
		return true
	}
	for _, p := range r.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
