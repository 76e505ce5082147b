package h1

import "errors"

// ErrChunked is a chunked body whose framing breaks.
var ErrChunked = errors.New("h1: malformed chunked body")

// Chunks follows a chunked body byte by byte (RFC 9112 §7.1) so the bytes
// can be passed on unchanged: chunk sizes, extensions, data and trailer
// fields. The zero value is ready at the first chunk-size line.
//
// It reads RFC 9112's grammar strictly, as the fast path needs to relay a
// body byte for byte. Guard's chunks are lax instead: they take every body
// net/http's server takes, so the guard refuses none that net/http serves
// and ends each where net/http does. Lax adds OWS between the size and
// the CR, a sixteenth size digit, any byte but CR and LF in an extension,
// and trailer lines as net/http's reader takes them (ending at LF, a CR
// before it dropped, anything in them but obs-fold, which stays refused).
type Chunks struct {
	state  uint8
	lax    bool
	remain uint64 // data bytes left in the current chunk
	data   uint64 // data bytes so far, without the framing
	line   int    // length of the current size or trailer line
	size   uint64 // the size being read
	digits int
	ext    bool // past the ';' of a chunk extension, or the ':' of a trailer field
	trail  int  // trailer bytes so far
}

// Data is how many data bytes the chunks scanned so far carried: the
// body's length without its framing.
func (c *Chunks) Data() uint64 { return c.data }

const (
	chSize uint8 = iota
	chSizeLF
	chData
	chDataCR
	chDataLF
	chTrailer
	chTrailerLF
	chDone
	chLaxSizeOWS   // lax: OWS after the size, to the CR
	chLaxTrailer   // lax: a trailer line
	chLaxTrailerCR // lax: after a CR in a trailer line

	maxChunkLine = 4096
	maxTrailers  = 64 << 10
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
		case chSize, chLaxSizeOWS:
			n++
			if c.line++; c.line > maxChunkLine {
				return n, false, ErrChunked
			}
			if c.state == chLaxSizeOWS {
				switch {
				case x == '\r':
					c.state = chSizeLF
				case !isOWS(x):
					return n, false, ErrChunked // net/http takes no ';' after OWS
				}
				continue
			}
			if d, ok := unhex(x); ok && !c.ext {
				if c.digits >= 15 && (c.digits == 16 || !c.lax) {
					return n, false, ErrChunked // strict: fifteen, so no size overflows int64; lax: net/http's sixteen
				}
				c.size = c.size<<4 | uint64(d)
				c.digits++
				continue
			}
			switch {
			case x == '\r':
				if c.digits == 0 {
					return n, false, ErrChunked
				}
				c.state = chSizeLF
			case c.ext:
				if (x < ' ' && x != '\t' || x == 0x7f) && (!c.lax || x == '\n') {
					return n, false, ErrChunked
				}
			case x == ';':
				if c.digits == 0 {
					return n, false, ErrChunked
				}
				c.ext = true
			case c.lax && isOWS(x) && c.digits > 0:
				c.state = chLaxSizeOWS
			default:
				return n, false, ErrChunked
			}
		case chSizeLF:
			n++
			if x != '\n' {
				return n, false, ErrChunked
			}
			c.remain, c.size, c.digits, c.ext, c.line = c.size, 0, 0, false, 0
			switch {
			case c.remain > 0:
				c.state = chData
			case c.lax:
				c.state = chLaxTrailer
			default:
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
		case chTrailer, chLaxTrailer:
			n++
			if c.trail++; c.trail > maxTrailers {
				return n, false, ErrChunked
			}
			if c.state == chLaxTrailer {
				// A line as net/http's reader takes it, but obs-fold.
				switch {
				case x == '\n':
					if c.line == 0 {
						c.state = chDone
						return n, true, nil
					}
					c.line = 0
				case x == '\r':
					c.state = chLaxTrailerCR
				case c.line == 0 && isOWS(x):
					return n, false, ErrChunked // obs-fold
				default:
					c.line++
				}
				continue
			}
			// A trailer field is a field line, as net/http reads it:
			// a token name, ':', a value without CTLs (nor obs-fold).
			switch {
			case x == '\r':
				if c.line > 0 && !c.ext {
					return n, false, ErrChunked // no colon
				}
				c.state = chTrailerLF
			case c.ext:
				if x < ' ' && x != '\t' || x == 0x7f {
					return n, false, ErrChunked
				}
			case x == ':':
				if c.line == 0 {
					return n, false, ErrChunked // no name
				}
				c.ext = true
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
			c.line, c.ext = 0, false
			c.state = chTrailer
		case chLaxTrailerCR:
			// x is read again as part of the line: a CR ends the line if
			// an LF follows it, and is part of it otherwise.
			if x != '\n' {
				c.line++
			}
			c.state = chLaxTrailer
		}
	}
	return n, c.state == chDone, nil
}

func unhex(c byte) (byte, bool) {
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
