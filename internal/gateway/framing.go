package gateway

import (
	"bytes"
	"math"
	"net"
	"sync/atomic"
)

// The framing guard checks every HTTP/1.x request head on the raw bytes,
// before net/http parses it, for what net/http accepts but a gateway must
// refuse (request smuggling, RFC 9112 §6.3 and §11.2):
//
//   - Content-Length together with Transfer-Encoding (net/http silently
//     drops the Content-Length);
//   - more than one Content-Length, even with equal values (net/http keeps
//     one);
//   - Transfer-Encoding on an HTTP/1.0 request (net/http ignores it);
//   - obs-fold, a header line starting with a space or tab (net/http joins
//     it to the previous header);
//   - an HTTP version other than 1.0 and 1.1;
//   - chunked framing that breaks (bad size line, data overrunning its size)
//     within the bytes already received.
//
// A guarded connection follows the message framing byte by byte: heads are
// scanned line by line, bodies are skipped by their Content-Length or chunk
// sizes, so pipelined requests are each checked. The verdict is the index
// of the first request on the connection that must not be served; the
// handler counts the requests it is given and refuses that one and every
// later one with 400 and Connection: close. It never buffers more than a
// fixed array per connection and allocates nothing per request.
//
// After an HTTP/2 preface (h2c) or a request naming Upgrade the guard steps
// aside: the connection then carries frames or a tunnel, and a declined
// upgrade closes the connection (serve sets Connection: close). The guard
// runs on the cleartext listener only: under TLS net/http reads the
// plaintext itself, so CL+TE over HTTPS/1.1 is handled as net/http does
// (Content-Length dropped, the body forwarded chunked).

// guardListener wraps every accepted connection in a framingConn.
type guardListener struct{ net.Listener }

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return guard(c), nil
}

// guard puts c under the framing guard.
func guard(c net.Conn) *framingConn {
	fc := &framingConn{Conn: c}
	fc.badFrom.Store(math.MaxInt64)
	return fc
}

// framingConn is a downstream connection under the framing guard.
type framingConn struct {
	net.Conn
	fr      framer       // touched only by Read: net/http never reads a connection concurrently
	badFrom atomic.Int64 // index of the first request to refuse; MaxInt64 while none
	served  int64        // requests handed to the handler; touched only by its (sequential) calls
}

func (c *framingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.fr.state != stPass {
		if bad := c.fr.scan(p[:n]); bad >= 0 {
			c.badFrom.CompareAndSwap(math.MaxInt64, bad)
		}
	}
	return n, err
}

// CloseWrite keeps net/http's graceful half-close working.
func (c *framingConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// admit is called once per HTTP/1.x request the handler receives on c, in
// order; false means the request's framing was refused.
func (c *framingConn) admit() bool {
	i := c.served
	c.served++
	return i < c.badFrom.Load()
}

// framer states.
const (
	stLine      uint8 = iota // a head line (the request line first)
	stBody                   // remain bytes of a Content-Length body
	stChunkLine              // a chunk-size line
	stChunkData              // remain bytes of chunk data
	stChunkCR                // the CR after chunk data
	stChunkLF                // the LF after chunk data
	stTrailer                // a trailer line
	stPass                   // not HTTP/1 any more, or refused: stop looking
)

const (
	maxChunkLine       = 4096 // net/http's limit on a chunk-size line
	noRequest    int64 = -1
)

// framer follows HTTP/1.x request framing over a byte stream.
type framer struct {
	state  uint8
	buf    [96]byte // the first bytes of the current line
	tail   [10]byte // the last bytes of the current line
	n      int      // length of the current line so far (without LF)
	spill  bool     // the line has more than buf holds, not all of it whitespace
	remain uint64   // bytes left in a body or chunk
	heads  int64    // heads that reach the handler, so far
	cur    int64    // index of the request whose body is being read
	lines  int      // lines of the current head so far
	// started is set once a head was read: an HTTP/2 preface counts
	// only first.
	started bool

	// the current head
	v11, options, upgrade bool
	cl, te                int
	chunked               bool
}

// scan follows b and returns the index of the first request that must be
// refused, or noRequest.
func (f *framer) scan(b []byte) int64 {
	for len(b) > 0 {
		switch f.state {
		case stPass:
			return noRequest
		case stBody, stChunkData:
			k := min(uint64(len(b)), f.remain)
			f.remain -= k
			b = b[k:]
			if f.remain == 0 {
				if f.state == stBody {
					f.state = stLine
				} else {
					f.state = stChunkCR
				}
			}
		case stChunkCR:
			if b[0] != '\r' {
				return f.fail(f.cur)
			}
			b, f.state = b[1:], stChunkLF
		case stChunkLF:
			if b[0] != '\n' {
				return f.fail(f.cur)
			}
			b, f.state = b[1:], stChunkLine
		default:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				f.add(b)
				return noRequest
			}
			f.add(b[:i])
			b = b[i+1:]
			if bad := f.endLine(); bad != noRequest {
				return bad
			}
			f.n, f.spill = 0, false
		}
	}
	return noRequest
}

// add appends part of the current line.
func (f *framer) add(seg []byte) {
	if f.n < len(f.buf) {
		copy(f.buf[f.n:], seg)
	}
	if !f.spill && f.n+len(seg) > len(f.buf) {
		for _, c := range seg[max(len(f.buf)-f.n, 0):] {
			if c != ' ' && c != '\t' && c != '\r' {
				f.spill = true
				break
			}
		}
	}
	f.n += len(seg)
	if len(seg) >= len(f.tail) {
		copy(f.tail[:], seg[len(seg)-len(f.tail):])
	} else {
		k := copy(f.tail[:], f.tail[len(seg):])
		copy(f.tail[k:], seg)
	}
}

// line returns the stored start of the current line without a trailing
// CR, and whether it is the whole line: a line whose overflow is only
// whitespace is whole once trimmed.
func (f *framer) line() ([]byte, bool) {
	if f.n <= len(f.buf) {
		l := f.buf[:f.n]
		if len(l) > 0 && l[len(l)-1] == '\r' {
			l = l[:len(l)-1]
		}
		return l, true
	}
	if !f.spill {
		return bytes.TrimRight(f.buf[:], " \t\r"), true
	}
	return f.buf[:], false
}

func (f *framer) fail(idx int64) int64 {
	f.state = stPass
	return idx
}

func (f *framer) endLine() int64 {
	switch f.state {
	case stChunkLine:
		return f.chunkLine()
	case stTrailer:
		l, _ := f.line()
		if len(l) == 0 {
			f.state = stLine
		} else if l[0] == ' ' || l[0] == '\t' {
			return f.fail(f.cur)
		}
		return noRequest
	}
	f.lines++
	if f.lines == 1 {
		return f.requestLine()
	}
	return f.headerLine()
}

var (
	h2Preface = []byte("PRI * HTTP/2.0")
	optionsAt = []byte("OPTIONS * ")
	http11    = []byte(" HTTP/1.1")
	http10    = []byte(" HTTP/1.0")
)

func (f *framer) requestLine() int64 {
	f.v11, f.options, f.upgrade = false, false, false
	f.cl, f.te, f.chunked = 0, 0, false
	l, whole := f.line()
	if whole && !f.started && bytes.Equal(l, h2Preface) {
		f.state = stPass // h2c prior knowledge: net/http serves HTTP/2
		return noRequest
	}
	// The version is the last nine bytes, without a trailing CR.
	end := f.tail[:]
	if f.tail[len(f.tail)-1] == '\r' {
		end = end[:len(end)-1]
	}
	end = end[len(end)-len(http11):]
	switch {
	case f.n < len("M / HTTP/1.1"):
		return f.fail(f.heads)
	case bytes.Equal(end, http11):
		f.v11 = true
	case bytes.Equal(end, http10):
	default:
		return f.fail(f.heads)
	}
	f.options = bytes.HasPrefix(l, optionsAt)
	return noRequest
}

func (f *framer) headerLine() int64 {
	l, whole := f.line()
	if len(l) == 0 && whole {
		return f.endHead()
	}
	if l[0] == ' ' || l[0] == '\t' {
		return f.fail(f.heads) // obs-fold
	}
	colon := bytes.IndexByte(l, ':')
	if colon < 0 {
		return noRequest // net/http refuses it
	}
	name := l[:colon]
	switch {
	case asciiEqualFold(name, "content-length"):
		v := trimOWS(l[colon+1:])
		n, ok := parseDecimal(v)
		if !whole || !ok {
			return f.fail(f.heads)
		}
		f.cl++
		f.remain = n
	case asciiEqualFold(name, "transfer-encoding"):
		f.te++
		f.chunked = whole && asciiEqualFold(trimOWS(l[colon+1:]), "chunked")
	case asciiEqualFold(name, "upgrade"):
		f.upgrade = true
	}
	return noRequest
}

// endHead decides the head's fate and the framing of its body.
func (f *framer) endHead() int64 {
	idx := f.heads
	if f.cl > 1 || (f.te > 0 && (f.cl > 0 || !f.v11 || f.te > 1 || !f.chunked)) {
		return f.fail(idx)
	}
	f.lines, f.started, f.cur = 0, true, idx
	if !f.options { // net/http answers OPTIONS * itself, without the handler
		f.heads++
	}
	switch {
	case f.upgrade:
		f.state = stPass // a tunnel may follow; a declined upgrade closes the connection
	case f.te > 0:
		f.state = stChunkLine
	case f.cl > 0 && f.remain > 0:
		f.state = stBody
	default:
		f.state = stLine
	}
	return noRequest
}

// chunkLine reads a chunk-size line as net/http does: CRLF-terminated, no
// other CR, under 4 KiB, trailing whitespace and extensions dropped, then
// one to sixteen hex digits.
func (f *framer) chunkLine() int64 {
	if f.n == 0 || f.tail[len(f.tail)-1] != '\r' || f.n-1 >= maxChunkLine {
		return f.fail(f.cur)
	}
	l, whole := f.line()
	if bytes.IndexByte(l, '\r') >= 0 {
		return f.fail(f.cur)
	}
	if !whole { // only an extension can make a valid size line this long
		semi := bytes.IndexByte(l, ';')
		if semi < 0 {
			return f.fail(f.cur)
		}
		l = l[:semi+1] // trailing whitespace before the extension is not trimmed
	}
	l = bytes.TrimRight(l, " \t")
	if semi := bytes.IndexByte(l, ';'); semi >= 0 {
		l = l[:semi]
	}
	n, ok := parseHex(l)
	if !ok {
		return f.fail(f.cur)
	}
	if n == 0 {
		f.state = stTrailer
	} else {
		f.state, f.remain = stChunkData, n
	}
	return noRequest
}

// parseDecimal parses what strconv.ParseUint(v, 10, 63) accepts.
func parseDecimal(v []byte) (uint64, bool) {
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
	return n, n <= math.MaxInt64
}

func parseHex(v []byte) (uint64, bool) {
	if len(v) == 0 || len(v) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range v {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(c)
	}
	return n, true
}

// trimOWS trims what textproto trims around a header value.
func trimOWS(v []byte) []byte {
	return bytes.Trim(v, " \t\r\n")
}

// asciiEqualFold compares b with lower, which is lower case ASCII.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
