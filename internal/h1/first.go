package h1

import "bytes"

// h2Preface is the start of an HTTP/2 connection with prior knowledge
// (RFC 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// NotHTTP reports whether b, the bytes a connection (or the rest of one,
// after the requests served on it) starts with, already rule out a request:
// its first line is complete and is neither an HTTP/1.x request line —
// method SP target SP HTTP/d.d — nor the start of the HTTP/2 preface. Such
// input is answered 400 at once, however short: net/http's server, which
// also accepts h2c, would wait for the preface's 14 bytes before judging
// a shorter one, holding the connection until read_header_timeout. A line
// of that shape with a version corput does not speak is not ruled out
// here: net/http answers it 505.
func NotHTTP(b []byte) bool {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return false // the line is not complete: wait for it
	}
	if len(b) <= len(h2Preface) && string(b) == h2Preface[:len(b)] {
		return false
	}
	line := bytes.TrimSuffix(b[:i], []byte("\r"))
	sp := bytes.IndexByte(line, ' ')
	last := bytes.LastIndexByte(line, ' ')
	if sp <= 0 || last <= sp {
		return true
	}
	for _, c := range line[:sp] {
		if !isTchar(c) {
			return true
		}
	}
	v := line[last+1:]
	return len(v) != len("HTTP/1.1") || string(v[:5]) != "HTTP/" || !isDigit(v[5]) || v[6] != '.' || !isDigit(v[7])
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
