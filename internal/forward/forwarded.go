package forward

// The Forwarded field (RFC 7239), beside X-Forwarded-*, when
// downstream.forwarded is on: one element per hop, "for=" the peer's
// address (an IPv6 one quoted and bracketed, "unknown" without one),
// "proto=" the connection's scheme, "host=" the request's Host (quoted
// when it is not a token, e.g. with a port). A trusted peer's Forwarded
// lines are kept, joined, and this hop's element appended; anyone else's
// are replaced, exactly as X-Forwarded-For.

// writeForwarded appends the Forwarded value to b (after the bytes the
// caller's other fields hold) and calls set with it.
func (p Peer) writeForwarded(host []byte, prior Prior, b []byte, set func(name string, value []byte)) []byte {
	from := len(b)
	if p.Trusted {
		b = appendPrior(b, prior, "forwarded")
	}
	b = append(b, "for="...)
	switch {
	case p.Addr.Is4():
		b = p.Addr.AppendTo(b)
	case p.Addr.IsValid():
		b = append(p.Addr.AppendTo(append(b, `"[`...)), `]"`...)
	default:
		b = append(b, "unknown"...)
	}
	b = append(append(b, ";proto="...), p.Proto...)
	if len(host) > 0 {
		b = appendTokenOrQuoted(append(b, ";host="...), host)
	}
	set("Forwarded", b[from:])
	return b
}

// appendTokenOrQuoted appends v as an RFC 7230 token when it is one, else
// as a quoted-string ('"' and '\' escaped).
func appendTokenOrQuoted(b, v []byte) []byte {
	token := true
	for _, c := range v {
		if !tchar(c) {
			token = false
			break
		}
	}
	if token {
		return append(b, v...)
	}
	b = append(b, '"')
	for _, c := range v {
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return append(b, '"')
}

func tchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
