package h1

// Guard is the request guard: it reads the bytes a client sends on an
// HTTP/1.x connection before net/http's server parses them, follows the
// framing of every request as net/http will, and finds the first request a
// proxy must not serve though net/http would (request smuggling, RFC 9112
// §6.3 and §11.2): Content-Length with Transfer-Encoding, more than one
// Content-Length or Transfer-Encoding, a Transfer-Encoding other than
// chunked or on HTTP/1.0, obs-fold, a version other than HTTP/1.0 and 1.1,
// and chunked framing that breaks.
//
// Heads are read line by line (a line ends at LF, as net/http's reader
// ends it, a CR before it dropped), bodies skipped by their Content-Length
// or followed by a lax Chunks, so pipelined requests are each checked.
// Requests are counted as the handler sees them: net/http answers
// "OPTIONS *" itself. After an HTTP/2 preface or a request naming Upgrade
// the guard steps aside, for frames or a tunnel may follow.
//
// The contract: wherever net/http's server ends a request, a Guard fed the
// same bytes, however split, is at the start of the next head with the
// same count, unless it refused a request at or before that point
// (FuzzGuardFollowsNetHTTP, on the bytes Filter passes on); and it
// refuses nothing net/http's client writes (FuzzGuardAcceptsWellFormedRequests). It keeps the first 96 and
// the last 10 bytes of a line, which is all the rules look at, and
// allocates nothing.

import "bytes"

// Guard follows the requests of one connection. The zero value is ready at
// its first byte.
type Guard struct {
	state   uint8
	buf     [96]byte // the first bytes of the current line
	tail    [10]byte // the last bytes of the current line
	n       int      // length of the current line so far (without LF)
	spill   bool     // the line has more than buf holds, not all of it OWS and its final CR
	cr      bool     // the last byte past buf was a CR
	remain  uint64   // bytes left of a Content-Length body
	chunks  Chunks   // a chunked body
	heads   int64    // heads that reach the handler, so far
	cur     int64    // index of the request whose body is being read
	lines   int      // lines of the current head so far
	started bool     // a head was read: an HTTP/2 preface counts only first
	endCR   bool     // the current line's last byte so far is a CR
	bareCR  bool     // the current line has a CR that another byte follows
	blank   bool     // the empty line before the current request was taken
	leadCR  bool     // the CR of that empty line was taken, its LF is due

	// the current head
	v11, options, upgrade bool
	cl, te                int
	chunked               bool
}

// Guard states.
const (
	gLine    uint8 = iota // a head line (the request line first)
	gBody                 // remain bytes of a Content-Length body
	gChunked              // a chunked body
	gOff                  // stepped aside, or refused: look no more
)

// Scan follows b, the next bytes read from the connection. When they show
// a request that must not be served it returns its index (counted from 0,
// as the handler is given requests) and true; the verdict also covers every
// later request, and from then on Scan looks at nothing. So it does once
// the guard has stepped aside. The bytes of an ignored empty line before a
// request line are followed but left in b: Filter takes them out.
func (g *Guard) Scan(b []byte) (bad int64, refused bool) {
	_, bad, refused = g.scan(b, false)
	return bad, refused
}

// Filter is Scan for the bytes handed on to net/http: it also takes the
// one empty line it ignores before a request line out of b, in place, and
// returns how many bytes of b are left to pass on.
func (g *Guard) Filter(b []byte) (n int, bad int64, refused bool) {
	return g.scan(b, true)
}

func (g *Guard) scan(b []byte, strip bool) (kept int, bad int64, refused bool) {
	kept = len(b)
	for len(b) > 0 {
		switch g.state {
		case gOff:
			return kept, 0, false
		case gBody:
			k := min(uint64(len(b)), g.remain)
			g.remain -= k
			b = b[k:]
			if g.remain == 0 {
				g.state = gLine
			}
		case gChunked:
			n, done, err := g.chunks.Scan(b)
			if err != nil {
				bad, refused = g.refuse(g.cur)
				return kept, bad, refused
			}
			b = b[n:]
			if done {
				g.state = gLine
			}
		default:
			if g.lines == 0 && g.n == 0 {
				// The start of a request line: an empty line before it?
				switch c := b[0]; {
				case g.leadCR && c == '\n', !g.leadCR && !g.blank && c == '\r':
					g.leadCR = c == '\r'
					g.blank = true
					if strip {
						copy(b, b[1:])
						kept--
						b = b[:len(b)-1]
					} else {
						b = b[1:]
					}
					continue
				case g.leadCR, c == '\n', c == '\r':
					// a CR without its LF, a bare LF, a second empty line
					bad, refused = g.refuse(g.heads)
					return kept, bad, refused
				}
			}
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				g.add(b)
				return kept, 0, false
			}
			g.add(b[:i])
			b = b[i+1:]
			if bad, refused := g.endLine(); refused {
				return kept, bad, true
			}
			g.n, g.spill, g.cr, g.endCR, g.bareCR = 0, false, false, false, false
		}
	}
	return kept, 0, false
}

// add appends part of the current line.
func (g *Guard) add(seg []byte) {
	if len(seg) > 0 {
		if g.endCR || bytes.IndexByte(seg[:len(seg)-1], '\r') >= 0 {
			g.bareCR = true
		}
		g.endCR = seg[len(seg)-1] == '\r'
	}
	if g.n < len(g.buf) {
		copy(g.buf[g.n:], seg)
	}
	if past := len(g.buf) - g.n; !g.spill && len(seg) > past {
		for _, c := range seg[max(past, 0):] {
			// A CR is the line's end if nothing follows it.
			if g.cr || !isOWS(c) && c != '\r' {
				g.spill = true
				break
			}
			g.cr = c == '\r'
		}
	}
	g.n += len(seg)
	if len(seg) >= len(g.tail) {
		copy(g.tail[:], seg[len(seg)-len(g.tail):])
	} else {
		k := copy(g.tail[:], g.tail[len(seg):])
		copy(g.tail[k:], seg)
	}
}

// line returns the stored start of the current line without a final CR,
// and whether it is the whole line: a line whose overflow is only OWS is
// whole once its value is trimmed.
func (g *Guard) line() ([]byte, bool) {
	if g.n > len(g.buf) {
		return g.buf[:], !g.spill
	}
	l := g.buf[:g.n]
	if len(l) > 0 && l[len(l)-1] == '\r' {
		l = l[:len(l)-1]
	}
	return l, true
}

func (g *Guard) refuse(idx int64) (int64, bool) {
	g.state = gOff
	return idx, true
}

func (g *Guard) endLine() (int64, bool) {
	if !g.endCR || g.bareCR {
		return g.refuse(g.heads) // a bare LF ends the line, or a bare CR is in it
	}
	g.lines++
	if g.lines == 1 {
		return g.requestLine()
	}
	return g.headerLine()
}

var (
	h2PrefaceLine = []byte(h2Preface[:14]) // "PRI * HTTP/2.0"
	optionsAt     = []byte("OPTIONS * ")
	http11        = []byte(" HTTP/1.1")
	http10        = []byte(" HTTP/1.0")
)

func (g *Guard) requestLine() (int64, bool) {
	g.v11, g.options, g.upgrade = false, false, false
	g.cl, g.te, g.chunked = 0, 0, false
	l, whole := g.line()
	if whole && !g.started && bytes.Equal(l, h2PrefaceLine) {
		g.state = gOff // h2c prior knowledge: net/http serves HTTP/2
		return 0, false
	}
	if g.n < len("M / HTTP/1.1") {
		return g.refuse(g.heads)
	}
	// The version is the last nine bytes, without a final CR.
	end := g.tail[:]
	if end[len(end)-1] == '\r' {
		end = end[:len(end)-1]
	}
	switch end = end[len(end)-len(http11):]; {
	case bytes.Equal(end, http11):
		g.v11 = true
	case bytes.Equal(end, http10):
	default:
		return g.refuse(g.heads)
	}
	g.options = bytes.HasPrefix(l, optionsAt)
	return 0, false
}

func (g *Guard) headerLine() (int64, bool) {
	l, whole := g.line()
	if len(l) == 0 {
		return g.endHead()
	}
	if isOWS(l[0]) {
		return g.refuse(g.heads) // obs-fold
	}
	colon := bytes.IndexByte(l, ':')
	if colon < 0 {
		return 0, false // net/http refuses it
	}
	name, value := l[:colon], trimOWS(l[colon+1:])
	switch {
	case EqFold(name, "content-length"):
		n, ok := parseLength(value)
		if !whole || !ok {
			return g.refuse(g.heads)
		}
		g.cl++
		g.remain = uint64(n)
	case EqFold(name, "transfer-encoding"):
		g.te++
		g.chunked = whole && EqFold(value, "chunked")
	case EqFold(name, "upgrade"):
		g.upgrade = true
	}
	return 0, false
}

// endHead decides the head's fate and the framing of its body.
func (g *Guard) endHead() (int64, bool) {
	idx := g.heads
	if g.cl > 1 || (g.te > 0 && (g.cl > 0 || !g.v11 || g.te > 1 || !g.chunked)) {
		return g.refuse(idx)
	}
	g.lines, g.started, g.cur, g.blank = 0, true, idx, false
	if !g.options { // net/http answers OPTIONS * itself, without the handler
		g.heads++
	}
	switch {
	case g.upgrade:
		g.state = gOff // a tunnel may follow; a declined upgrade closes the connection
	case g.te > 0:
		g.state, g.chunks = gChunked, Chunks{}
	case g.cl > 0 && g.remain > 0:
		g.state = gBody
	default:
		g.state = gLine
	}
	return 0, false
}
