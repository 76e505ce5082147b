// Package h1 parses HTTP/1.1 message heads on raw bytes, for the gateway's
// fast path (internal/fastpath).
//
// It is deliberately narrow. ParseRequest accepts only the common, simple
// shape of a request — an origin-form target, HTTP/1.1, one Host, at most
// one Content-Length, no Transfer-Encoding, Upgrade or Expect, plain header
// lines ending in CRLF — and reports anything else as NotSimple, so the
// caller can hand the connection, unread, to a general server (net/http
// behind the framing guard) that applies every rule of RFC 9112. The
// contract that keeps the two paths honest: a request this package calls
// simple is one net/http also accepts, with the same method, target, host
// and fields (FuzzRequestAgreesWithNetHTTP checks it).
//
// ParseResponse does the same for an origin's response head; its
// NotSimple sends the caller to http.ReadResponse.
//
// Guard (guard.go) is that framing guard's grammar: it follows the
// requests on a connection's raw bytes before net/http parses them and
// finds the first one a proxy must refuse (internal/gateway, framing.go).
// Both read with one grammar (grammar.go) and one chunked-body scanner
// (Chunks, strict for both).
//
// Disguised and Underscore (names.go) are the field-name rules of
// downstream.underscore_headers: ParseRequest marks a name with '_' and
// calls a disguised protected name not simple.
//
// Nothing here allocates: parsed fields are slices of the caller's buffer,
// valid until it is reused.
package h1

import "bytes"

// MaxFields bounds the header fields of a head this package parses; a
// head with more is NotSimple.
const MaxFields = 64

// maxLengthDigits bounds the digits of a simple head's Content-Length
// (net/http takes any number of leading zeros).
const maxLengthDigits = 18

// maxConnTokens bounds the extra hop-by-hop names a Connection header may
// list in a simple message.
const maxConnTokens = 8

// Result is what a parse found.
type Result uint8

const (
	Complete   Result = iota // a whole simple head: see the Head
	Incomplete               // no end of head yet: read more
	NotSimple                // valid or not, not for the fast path
)

func (r Result) String() string {
	switch r {
	case Complete:
		return "complete"
	case Incomplete:
		return "incomplete"
	}
	return "not simple"
}

// Field is one header line: its name and its value without surrounding
// whitespace.
type Field struct {
	Name, Value []byte
	Hop         bool // hop-by-hop (RFC 9110 §7.6.1), or one the caller sets itself: not forwarded
	Underscore  bool // a request field whose name has a '_' (downstream.underscore_headers)
}

// Head is a parsed request or response head.
type Head struct {
	// request
	Method, Target, Path []byte // Path is Target up to '?'
	Host                 []byte
	// response
	Status int
	Minor  int // HTTP/1.minor of a response

	Fields        []Field
	ContentLength int64 // -1 when absent
	Chunked       bool  // response: Transfer-Encoding: chunked
	Close         bool  // Connection: close, or an HTTP/1.0 response without keep-alive
	HasDate       bool  // response: a Date field is present

	// X-Forwarded-* fields of a request (indices into Fields; -1 absent)
	XFF, XFP, XFH int
	// TETrailers is set when a request's TE field is "trailers" (the one
	// TE value a proxy forwards; the field itself is marked Hop).
	TETrailers bool
	// Underscores counts a request's fields whose names have a '_'
	// (Field.Underscore). A name that disguises a protected one
	// (Disguised) makes the head NotSimple: net/http's path refuses it.
	Underscores int

	fields     [MaxFields]Field
	connTokens [maxConnTokens][]byte
	nconn      int
}

// reset readies h for a parse. It clears the scalars only: the fields
// array is overwritten as lines are parsed (zeroing its 3.5 KiB for every
// head was 2 % of the gateway's CPU under load).
func (h *Head) reset() {
	h.Method, h.Target, h.Path, h.Host = nil, nil, nil, nil
	h.Status, h.Minor = 0, 0
	h.Fields = h.fields[:0]
	h.ContentLength = -1
	h.Chunked, h.Close, h.HasDate, h.TETrailers = false, false, false, false
	h.XFF, h.XFP, h.XFH = -1, -1, -1
	h.nconn, h.Underscores = 0, 0
}

// Has reports whether the head has a field named name (lower case).
func (h *Head) Has(name string) bool {
	for i := range h.Fields {
		if EqFold(h.Fields[i].Name, name) {
			return true
		}
	}
	return false
}

// HeadEnd returns the length of the head at the start of b, through its
// blank line, or -1 when b holds no complete head. Only CRLF line ends
// count: a head with a bare LF never completes here, and the caller's
// buffer limit sends it to the general parser.
func HeadEnd(b []byte) int {
	i := bytes.Index(b, crlfcrlf)
	if i < 0 {
		return -1
	}
	return i + 4
}

var crlfcrlf = []byte("\r\n\r\n")

// ParseRequest parses the request head at the start of b. On Complete, n
// is the head's length and h describes it; the body (Content-Length
// bytes) follows at b[n:].
func ParseRequest(b []byte, h *Head) (n int, res Result) {
	end := HeadEnd(b)
	if end < 0 {
		if bytes.IndexByte(b, '\n') >= 0 && !validPrefix(b) {
			return 0, NotSimple // a bare LF or a broken first line: no need to wait
		}
		return 0, Incomplete
	}
	h.reset()
	line, rest := cutLine(b[:end])
	if !h.requestLine(line) {
		return 0, NotSimple
	}
	if !h.fieldLines(rest, true) {
		return 0, NotSimple
	}
	if h.Host == nil {
		return 0, NotSimple // HTTP/1.1 requires exactly one Host
	}
	return end, Complete
}

// validPrefix reports whether b, an incomplete head holding at least one
// LF, has only CRLF line ends so far.
func validPrefix(b []byte) bool {
	for i, c := range b {
		if c == '\n' && (i == 0 || b[i-1] != '\r') {
			return false
		}
	}
	return true
}

// cutLine splits b at its first CRLF.
func cutLine(b []byte) (line, rest []byte) {
	i := bytes.Index(b, crlf)
	return b[:i], b[i+2:]
}

var crlf = []byte("\r\n")

func (h *Head) requestLine(l []byte) bool {
	sp := bytes.IndexByte(l, ' ')
	if sp <= 0 || sp > 20 {
		return false
	}
	h.Method = l[:sp]
	for _, c := range h.Method {
		if !isTchar(c) {
			return false
		}
	}
	l = l[sp+1:]
	sp = bytes.IndexByte(l, ' ')
	if sp <= 0 || string(l[sp+1:]) != "HTTP/1.1" {
		return false
	}
	h.Target = l[:sp]
	if h.Target[0] != '/' {
		return false // origin-form only: asterisk, absolute and authority forms go to the general server
	}
	q := bytes.IndexByte(h.Target, '?')
	h.Path = h.Target
	if q >= 0 {
		h.Path = h.Target[:q]
	}
	for i, c := range h.Target {
		if i < len(h.Path) {
			if !isPathChar(c) {
				return false
			}
		} else if c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// fieldLines parses the header lines (each ending in CRLF, the last one
// blank).
func (h *Head) fieldLines(b []byte, request bool) bool {
	for {
		var line []byte
		line, b = cutLine(b)
		if len(line) == 0 {
			return h.connection(request)
		}
		if len(h.Fields) == MaxFields {
			return false
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return false // no name, or obs-fold (a line starting with whitespace has no tchar name)
		}
		name := line[:colon]
		odd, sep := false, false // a '_' or a run of '-'
		for _, c := range name {
			if !isTchar(c) {
				return false
			}
			if c == '_' || c == '-' {
				odd, sep = odd || sep || c == '_', true
			} else {
				sep = false
			}
		}
		value := trimOWS(line[colon+1:])
		for _, c := range value {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return false
			}
		}
		f := Field{Name: name, Value: value}
		if odd && request {
			if Disguised(name) {
				return false
			}
			if f.Underscore = Underscore(name); f.Underscore {
				h.Underscores++
			}
		}
		if !h.special(&f, request) {
			return false
		}
		h.Fields = append(h.Fields, f)
	}
}

// special applies the meaning of the fields the fast path must understand
// and marks the hop-by-hop ones; false means the head is not simple.
func (h *Head) special(f *Field, request bool) bool {
	n := f.Name
	switch len(n) {
	case 2:
		if EqFold(n, "te") {
			f.Hop = true
			h.TETrailers = h.TETrailers || hasToken(f.Value, "trailers")
		}
	case 4:
		if request && EqFold(n, "host") {
			if h.Host != nil || !validHost(f.Value) {
				return false
			}
			h.Host = f.Value
			f.Hop = true // the caller writes Host first, itself
		} else if !request && EqFold(n, "date") {
			h.HasDate = true
		}
	case 6:
		if request && EqFold(n, "expect") {
			return false
		}
	case 7:
		if EqFold(n, "upgrade") {
			if request {
				return false
			}
			f.Hop = true
		} else if EqFold(n, "trailer") {
			f.Hop = request // a response's Trailer declaration goes with its chunked body
		}
	case 10:
		switch {
		case EqFold(n, "connection"):
			f.Hop = true
			return h.connTokensOf(f.Value)
		case EqFold(n, "keep-alive"):
			f.Hop = true
		}
	case 14:
		if EqFold(n, "content-length") {
			if h.ContentLength >= 0 {
				return false
			}
			v, ok := parseLength(f.Value)
			if !ok || len(f.Value) > maxLengthDigits {
				return false
			}
			h.ContentLength = v
			f.Hop = true // the caller writes the framing itself
		}
	case 15:
		if request && EqFold(n, "x-forwarded-for") {
			h.XFF = h.firstOf(h.XFF)
			f.Hop = true
		}
	case 16:
		switch {
		case request && EqFold(n, "x-forwarded-host"):
			h.XFH = h.firstOf(h.XFH)
			f.Hop = true
		case EqFold(n, "proxy-connection"):
			f.Hop = true
		}
	case 17:
		if request && EqFold(n, "x-forwarded-proto") {
			h.XFP = h.firstOf(h.XFP)
			f.Hop = true
		} else if EqFold(n, "transfer-encoding") {
			if request || h.Chunked || !EqFold(f.Value, "chunked") {
				return false
			}
			h.Chunked = true
			f.Hop = true
		}
	case 18:
		if EqFold(n, "proxy-authenticate") {
			f.Hop = true
		}
	case 19:
		if EqFold(n, "proxy-authorization") {
			f.Hop = true
		}
	}
	return true
}

// firstOf returns the index the next field will have when prev is -1 (the
// first of its name), else prev.
func (h *Head) firstOf(prev int) int {
	if prev >= 0 {
		return prev
	}
	return len(h.Fields)
}

// connTokensOf reads a Connection value: close, keep-alive, and names of
// further hop-by-hop fields. An upgrade token is not simple.
func (h *Head) connTokensOf(v []byte) bool {
	for tok := range ConnectionTokens(v) {
		switch {
		case EqFold(tok, "close"):
			h.Close = true
		case EqFold(tok, "keep-alive"):
		case EqFold(tok, "upgrade"):
			return false
		default:
			for _, c := range tok {
				if !isTchar(c) {
					return false
				}
			}
			if h.nconn == maxConnTokens {
				return false
			}
			h.connTokens[h.nconn] = tok
			h.nconn++
		}
	}
	return true
}

// connection marks the fields a Connection header named as hop-by-hop,
// once all fields are known.
func (h *Head) connection(request bool) bool {
	if !request && !h.Chunked {
		// A Trailer declaration means something only with a chunked body
		// passed on as it is; other bodies go without it (as net/http's
		// path does).
		for i := range h.Fields {
			if EqFold(h.Fields[i].Name, "trailer") {
				h.Fields[i].Hop = true
			}
		}
	}
	for i := range h.Fields {
		if len(h.Fields[i].Value) == 0 && EqFold(h.Fields[i].Name, "trailer") {
			h.Fields[i].Hop = true // declares nothing
		}
	}
	for i := range h.Fields {
		for _, tok := range h.connTokens[:h.nconn] {
			if EqualFold(h.Fields[i].Name, tok) {
				if request && EqFold(tok, "host") {
					return false
				}
				h.Fields[i].Hop = true
			}
		}
	}
	return true
}

// ParseResponse parses the response head at the start of b (the same
// rules for fields; a status line of HTTP/1.0 or HTTP/1.1). On Complete, n
// is the head's length. A 1xx response is NotSimple.
func ParseResponse(b []byte, h *Head) (n int, res Result) {
	end := HeadEnd(b)
	if end < 0 {
		if bytes.IndexByte(b, '\n') >= 0 && !validPrefix(b) {
			return 0, NotSimple // a bare LF: http.ReadResponse's rules, not a wait for a CRLF that may never come
		}
		return 0, Incomplete
	}
	h.reset()
	line, rest := cutLine(b[:end])
	// HTTP/1.x SP 3DIGIT [SP reason]
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return 0, NotSimple
	}
	switch line[7] {
	case '0':
		h.Minor = 0
	case '1':
		h.Minor = 1
	default:
		return 0, NotSimple
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, NotSimple
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code > 999 {
		return 0, NotSimple
	}
	for _, c := range line[12:] {
		// reason-phrase: no CTL but HTAB. A bare LF would end the status
		// line for http.ReadResponse, which then reads other fields.
		if (c < ' ' && c != '\t') || c == 0x7f {
			return 0, NotSimple
		}
	}
	h.Status = code
	if !h.fieldLines(rest, false) {
		return 0, NotSimple
	}
	if h.Minor == 0 {
		if h.Chunked {
			// Transfer-Encoding in HTTP/1.0 is faulty framing (RFC 9112
			// §6.1); http.ReadResponse ignores it and reads to the close.
			return 0, NotSimple
		}
		h.Close = true // HTTP/1.0 keep-alive is not worth the rules: one response per connection
	}
	if h.Chunked && h.ContentLength >= 0 {
		return 0, NotSimple // both framings: http.ReadResponse's rules apply
	}
	return end, Complete
}

// BodyLess reports whether a response to method with status has no body
// whatever its framing fields say (RFC 9112 §6.3).
func BodyLess(method []byte, status int) bool {
	return status == 204 || status == 304 || (status >= 100 && status < 200) || string(method) == "HEAD"
}

// validHost accepts a reg-name or IPv4 host with an optional port, or a
// bracketed IPv6 literal: a strict subset of what net/http accepts.
func validHost(v []byte) bool {
	if len(v) == 0 || len(v) > 255 {
		return false
	}
	for _, c := range v {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']', c == '_':
		default:
			return false
		}
	}
	return true
}
