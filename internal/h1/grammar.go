package h1

// The byte grammar every parser here shares (RFC 9110 §5, RFC 9112 §5):
// character classes, whitespace, case folding, Content-Length digits and
// comma-separated lists. ParseRequest, ParseResponse, Chunks and Guard use
// these and nothing else of their own, so the fast path and the request
// guard read the same bytes the same way. Case folding here is ASCII only
// and folds letters only: not c|0x20, which folds CR onto '-' and CTLs
// onto digits, and not strings.EqualFold, which folds the Kelvin sign
// onto 'k'. Nothing here allocates.

import (
	"bytes"
	"iter"
	"math"
)

// tchar and path character tables.
var tchars, pathChars [256]bool

func init() {
	for c := 'a'; c <= 'z'; c++ {
		tchars[c], pathChars[c] = true, true
		tchars[c-'a'+'A'], pathChars[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		tchars[c], pathChars[c] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		tchars[c] = true
	}
	// unreserved, sub-delims, ':', '@', '/': path bytes net/url keeps as
	// they are, so forwarding them unchanged is what the general path does.
	for _, c := range "-._~!$&'()*+,;=:@/" {
		pathChars[c] = true
	}
}

func isTchar(c byte) bool    { return tchars[c] }
func isPathChar(c byte) bool { return pathChars[c] }

// isOWS reports whether c is optional whitespace: SP or HTAB.
func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// trimOWS drops the OWS around a field value or list element. CR and LF
// are not whitespace here: a CR inside a line is a byte net/http refuses in
// a value, and trimming it would hide it.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && isOWS(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isOWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// parseLength parses a Content-Length value as net/http does
// (strconv.ParseUint(v, 10, 63)): decimal digits only, leading zeros
// allowed, at most math.MaxInt64.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for len(v) > 1 && v[0] == '0' {
		v = v[1:]
	}
	if len(v) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// lower folds an ASCII upper-case letter, and only that.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	return c
}

// EqFold reports whether b equals the lower-case ASCII s, ignoring case.
// It is the check of a field name or token against a known one.
func EqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if lower(b[i]) != s[i] {
			return false
		}
	}
	return true
}

// EqualFold reports whether a and b are equal ignoring ASCII case, for
// wire tokens (field names, Upgrade protocols) where strings.EqualFold's
// Unicode folding is not meant. Either may be a string or a byte slice.
func EqualFold[A, B ~string | ~[]byte](a A, b B) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// ConnectionTokens returns the elements of v, a comma-separated field
// value such as Connection's (RFC 9110 §5.6.1, §7.6.1): each without the
// OWS around it, empty ones skipped, in order. They are slices of v. A
// parameter (";q=1", as in TE) is part of its element.
func ConnectionTokens(v []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for rest := v; len(rest) > 0; {
			var tok []byte
			if i := bytes.IndexByte(rest, ','); i >= 0 {
				tok, rest = rest[:i], rest[i+1:]
			} else {
				tok, rest = rest, nil
			}
			if tok = trimOWS(tok); len(tok) > 0 && !yield(tok) {
				return
			}
		}
	}
}

// hasToken reports whether the comma-separated list v holds tok (lower
// case), ignoring case and parameters ("trailers, deflate;q=0.5").
func hasToken(v []byte, tok string) bool {
	for item := range ConnectionTokens(v) {
		if i := bytes.IndexByte(item, ';'); i >= 0 {
			item = trimOWS(item[:i])
		}
		if EqFold(item, tok) {
			return true
		}
	}
	return false
}

// HeadFields returns the field lines of head, a whole message head (start
// line first, as HeadEnd measures it), the way net/http's reader takes
// them, whatever ParseRequest or ParseResponse would say: a line ends at
// LF, a CR before it dropped; the start line, lines without a colon and
// the blank line are skipped; an obs-fold line (one starting with SP or
// HTAB) gives its content as a further value of the field it continues.
// Names are as written, values without the OWS around them; both are
// slices of head.
func HeadFields(head []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(name, value []byte) bool) {
		var name []byte
		for rest, first := head, true; len(rest) > 0; first = false {
			line := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			}
			switch {
			case first:
			case len(line) == 0:
				return
			case isOWS(line[0]):
				if name != nil && !yield(name, trimOWS(line)) {
					return
				}
			default:
				colon := bytes.IndexByte(line, ':')
				if colon < 0 {
					name = nil
					continue
				}
				name = line[:colon]
				if !yield(name, trimOWS(line[colon+1:])) {
					return
				}
			}
		}
	}
}

// HopFields are the hop-by-hop fields of RFC 9110 §7.6.1, in canonical
// form: never forwarded across the gateway. It is the one list: the
// net/http path deletes these from a header map (forward.RemoveHop), and
// the head parsers here mark them Hop (TestHopFieldsAreMarked).
var HopFields = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}
