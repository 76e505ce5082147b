package h1

import "errors"

// ErrChunked is a chunked body whose framing breaks.
var ErrChunked = errors.New("h1: malformed chunked body")

// Chunks follows a chunked body byte by byte (RFC 9112 §7.1) so the bytes
// can be passed on unchanged: chunk sizes, extensions, data and trailer
// fields. The zero value is ready at the first chunk-size line.
//
// It reads RFC 9112's grammar strictly, and it is the one grammar of a
// chunked body anywhere in corput: the fast path relays an origin's body
// with it, and the request guard (Guard) follows a client's with it, so
// net/http's server never reads a chunk line the guard let pass loosely.
// A chunk line is 1 to 15 hex digits (no size overflows int64), then
// chunk extensions — ";" BWS token [BWS "=" BWS (token / quoted-string)]
// — then CRLF. Whitespace is taken only after a ';' and around a '=': not
// after the size nor after an extension (RFC 9112 allows BWS before a
// ';', but net/http's reader refuses it after the size, and the guard
// takes nothing net/http refuses), so "a \r\n" (whitespace, then the
// line's end) is refused, as are "2;\r\n" (an extension without a name)
// and an unclosed quoted-string. A
// trailer field is a token name, ':', a value without CTLs but HTAB, and
// CRLF (no obs-fold, no bare LF). net/http's server takes every body this
// takes and ends it at the same byte (FuzzChunksSplit).
type Chunks struct {
	state  uint8
	remain uint64 // data bytes left in the current chunk
	data   uint64 // data bytes so far, without the framing
	line   int    // length of the current size or trailer line
	size   uint64 // the size being read
	digits int
	colon  bool // past the ':' of a trailer field
	trail  int  // trailer bytes so far
}

// Data is how many data bytes the chunks scanned so far carried: the
// body's length without its framing.
func (c *Chunks) Data() uint64 { return c.data }

const (
	chSize         uint8 = iota // the size's digits
	chSizeLF                    // the LF of a chunk line
	chData                      // remain data bytes
	chDataCR                    // the CR after the data
	chDataLF                    // the LF after the data
	chTrailer                   // a trailer line, or the last blank line
	chTrailerLF                 // the LF of a trailer line
	chDone                      // the body has ended
	chExtWS                     // BWS before a ';'
	chExtName0                  // after ';': BWS, then the name's first byte
	chExtName                   // the extension's name
	chExtNameWS                 // BWS after the name: '=' or ';' next
	chExtVal0                   // after '=': BWS, then a token or a quoted-string
	chExtToken                  // a token value
	chExtQuoted                 // inside a quoted-string
	chExtQuotedEsc              // after a backslash in a quoted-string
	chExtAfterQ                 // after the closing quote

	maxChunkLine = 4096
	maxTrailers  = 64 << 10
	maxDigits    = 15
)

// Scan consumes the body bytes at the start of b and returns how many
// there were: len(b) unless the body ends inside b (done) or its framing
// breaks (ErrChunked).
func (c *Chunks) Scan(b []byte) (n int, done bool, err error) {
	for n < len(b) {
		x := b[n]
		switch c.state {
		case chDone:
			return n, true, nil
		case chSize, chExtName0, chExtName, chExtNameWS, chExtVal0, chExtToken, chExtQuoted, chExtQuotedEsc, chExtAfterQ:
			n++
			if c.line++; c.line > maxChunkLine {
				return n, false, ErrChunked
			}
			if !c.sizeLine(x) {
				return n, false, ErrChunked
			}
		case chSizeLF:
			n++
			if x != '\n' {
				return n, false, ErrChunked
			}
			c.remain, c.size, c.digits, c.line = c.size, 0, 0, 0
			c.state = chData
			if c.remain == 0 {
				c.state = chTrailer
			}
		case chData:
			k := min(uint64(len(b)-n), c.remain)
			n += int(k)
			c.data += k
			if c.remain -= k; c.remain == 0 {
				c.state = chDataCR
			}
		case chDataCR:
			n++
			if x != '\r' {
				return n, false, ErrChunked
			}
			c.state = chDataLF
		case chDataLF:
			n++
			if x != '\n' {
				return n, false, ErrChunked
			}
			c.state = chSize
		case chTrailer:
			n++
			if c.trail++; c.trail > maxTrailers {
				return n, false, ErrChunked
			}
			// A trailer field is a field line, as net/http reads it:
			// a token name, ':', a value without CTLs (nor obs-fold).
			switch {
			case x == '\r':
				if c.line > 0 && !c.colon {
					return n, false, ErrChunked // no colon
				}
				c.state = chTrailerLF
			case c.colon:
				if x < ' ' && x != '\t' || x == 0x7f {
					return n, false, ErrChunked
				}
			case x == ':':
				if c.line == 0 {
					return n, false, ErrChunked // no name
				}
				c.colon = true
			case !isTchar(x):
				return n, false, ErrChunked
			}
			if x != '\r' {
				c.line++
			}
		case chTrailerLF:
			n++
			if x != '\n' {
				return n, false, ErrChunked
			}
			if c.line == 0 {
				c.state = chDone
				return n, true, nil
			}
			c.line, c.colon = 0, false
			c.state = chTrailer
		}
	}
	return n, c.state == chDone, nil
}

// sizeLine takes x, the next byte of a chunk line before its CR (or the
// CR), and reports whether the line is still well-formed.
func (c *Chunks) sizeLine(x byte) bool {
	switch c.state {
	case chSize:
		if d, ok := Unhex(x); ok {
			if c.digits == maxDigits {
				return false
			}
			c.size = c.size<<4 | uint64(d)
			c.digits++
			return true
		}
		if c.digits == 0 {
			return false
		}
		return c.afterItem(x)
	case chExtName0:
		switch {
		case isOWS(x):
		case isTchar(x):
			c.state = chExtName
		default:
			return false // an extension without a name
		}
	case chExtName:
		switch {
		case isTchar(x):
		case x == '=':
			c.state = chExtVal0
		case isOWS(x):
			c.state = chExtNameWS
		default:
			return c.afterItem(x)
		}
	case chExtNameWS:
		switch {
		case isOWS(x):
		case x == '=':
			c.state = chExtVal0
		case x == ';':
			c.state = chExtName0
		default:
			return false
		}
	case chExtVal0:
		switch {
		case isOWS(x):
		case x == '"':
			c.state = chExtQuoted
		case isTchar(x):
			c.state = chExtToken
		default:
			return false
		}
	case chExtToken:
		if !isTchar(x) {
			return c.afterItem(x)
		}
	case chExtQuoted:
		switch {
		case x == '"':
			c.state = chExtAfterQ
		case x == '\\':
			c.state = chExtQuotedEsc
		case x == '\t' || x >= ' ' && x != 0x7f:
		default:
			return false // a CTL: an unclosed quoted-string meets the CR
		}
	case chExtQuotedEsc:
		if x < ' ' && x != '\t' || x == 0x7f {
			return false
		}
		c.state = chExtQuoted
	case chExtAfterQ:
		return c.afterItem(x)
	}
	return true
}

// afterItem takes the byte after a chunk line's size or one of its
// extensions: the line's CR or the next extension's ';'.
func (c *Chunks) afterItem(x byte) bool {
	switch x {
	case '\r':
		c.state = chSizeLF
	case ';':
		c.state = chExtName0
	default:
		return false
	}
	return true
}

// Unhex is the value of the hexadecimal digit c (either case), and
// whether c is one.
func Unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
