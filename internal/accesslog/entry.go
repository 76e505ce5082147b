package accesslog

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"
)

// The fields Add copies into an entry.
const (
	fClient = iota
	fMethod
	fProto
	fHost
	fTarget
	fReferer
	fUserAgent
	fRequestID
	numFields
)

// Limits are the most bytes an entry keeps of each field Add copies:
// Client, Method, Proto, Host, Target, Referer, UserAgent and RequestID. A
// longer value is cut (at a UTF-8 boundary) and written with "..." after
// it.
var Limits = [numFields]int{64, 32, 16, 256, 1024, 384, 384, 128}

// entryText is the room for the copied fields: the sum of Limits.
const entryText = 64 + 32 + 16 + 256 + 1024 + 384 + 384 + 128

// fieldAt is where each copied field starts in an entry's text.
var fieldAt = func() (at [numFields]int) {
	n := 0
	for f, size := range Limits {
		at[f] = n
		n += size
	}
	if n != entryText {
		panic("accesslog: entryText is not the sum of Limits")
	}
	return at
}()

// entry is a Record as a slot holds it: fixed size, its request fields
// copied into text.
type entry struct {
	start    time.Time
	dur      time.Duration
	bytes    int64
	status   int32
	attempts int32
	loop     int32
	cut      uint16 // bit f: field f was cut
	lens     [numFields]uint16
	origin   string
	endpoint string
	reason   string
	limit    string
	text     [entryText]byte
}

// set copies r into e.
func (e *entry) set(r *Record) {
	e.start, e.dur, e.bytes = r.Start, r.Duration, r.Bytes
	e.status, e.attempts, e.loop = int32(r.Status), int32(r.Attempts), int32(r.Loop)
	e.origin, e.endpoint, e.reason, e.limit = r.Origin, r.Endpoint, r.Reason, r.Limit
	e.cut = 0
	e.put(fClient, r.Client)
	e.put(fMethod, r.Method)
	e.put(fProto, r.Proto)
	e.put(fHost, r.Host)
	e.put(fTarget, r.Target)
	e.put(fReferer, r.Referer)
	e.put(fUserAgent, r.UserAgent)
	e.put(fRequestID, r.RequestID)
}

func (e *entry) put(f int, v string) {
	n := min(len(v), Limits[f])
	if n < len(v) {
		for n > 0 && !utf8.RuneStart(v[n]) {
			n--
		}
		e.cut |= 1 << f
	}
	copy(e.text[fieldAt[f]:], v[:n])
	e.lens[f] = uint16(n)
}

// field views field f of e's text; the view is valid while the writer
// holds the slot.
func (e *entry) field(f int) string {
	b := e.text[fieldAt[f] : fieldAt[f]+int(e.lens[f])]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// ellipsis is written after a field that was cut.
const ellipsis = "..."

// appendLine appends e's line, in format, and its newline to b.
func (e *entry) appendLine(b []byte, format Format) []byte {
	if format == Combined {
		return e.appendCombined(b)
	}
	return e.appendJSON(b)
}

// appendJSON appends e as one JSON object. The time is UTC with
// microseconds; duration is in seconds.
func (e *entry) appendJSON(b []byte) []byte {
	// A cut target's "..." goes after its query, or its path without one.
	path, query, hasQuery := strings.Cut(e.field(fTarget), "?")
	cut := e.cut&(1<<fTarget) != 0
	b = append(b, `{"time":"`...)
	b = e.start.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	b = append(b, `","client":`...)
	b = e.jsonField(b, fClient)
	b = append(b, `,"method":`...)
	b = e.jsonField(b, fMethod)
	b = append(b, `,"host":`...)
	b = e.jsonField(b, fHost)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, path, cut && !hasQuery)
	b = append(b, `,"query":`...)
	b = appendJSONString(b, query, cut && hasQuery)
	b = append(b, `,"proto":`...)
	b = e.jsonField(b, fProto)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, e.bytes, 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendFloat(b, e.dur.Seconds(), 'f', 6, 64)
	b = append(b, `,"referer":`...)
	b = e.jsonField(b, fReferer)
	b = append(b, `,"user_agent":`...)
	b = e.jsonField(b, fUserAgent)
	b = append(b, `,"origin":`...)
	b = appendJSONString(b, e.origin, false)
	b = append(b, `,"endpoint":`...)
	b = appendJSONString(b, e.endpoint, false)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(e.attempts), 10)
	b = append(b, `,"error":`...)
	b = appendJSONString(b, e.reason, false)
	b = append(b, `,"loop":`...)
	b = strconv.AppendInt(b, int64(e.loop), 10)
	b = append(b, `,"limit":`...)
	b = appendJSONString(b, e.limit, false)
	b = append(b, `,"request_id":`...)
	b = e.jsonField(b, fRequestID)
	return append(b, "}\n"...)
}

func (e *entry) jsonField(b []byte, f int) []byte {
	return appendJSONString(b, e.field(f), e.cut&(1<<f) != 0)
}

const hex = "0123456789abcdef"

// shortEscape is the letter of a byte's backslash escape in both JSON and
// Apache's log items, 0 for a byte without one.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\n': 'n', '\r': 'r', '\t': 't'}

// appendJSONString appends s as a JSON string, "..." inside its quotes
// when cut: control characters as \b \n \r \t or \u00XX, invalid UTF-8
// as U+FFFD.
func appendJSONString(b []byte, s string, cut bool) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case shortEscape[c] != 0:
				b = append(b, '\\', shortEscape[c])
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029': // valid JSON, but not in JavaScript
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	if cut {
		b = append(b, ellipsis...)
	}
	return append(b, '"')
}

// appendCombined appends e in Apache's combined format,
//
//	%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"
//
// (%h the client's address without its port, %t in the process's time
// zone), then corput's fields: host="…" origin= endpoint= attempts=
// error= loop= duration= (seconds) limit= request_id=; "-" stands for an
// empty value.
func (e *entry) appendCombined(b []byte) []byte {
	if h := clientHost(e.field(fClient)); h == "" {
		b = append(b, '-')
	} else {
		b = appendApache(b, h)
	}
	b = append(b, " - - "...)
	b = e.start.AppendFormat(b, "[02/Jan/2006:15:04:05 -0700]")
	b = append(b, ` "`...)
	b = e.apacheField(b, fMethod)
	b = append(b, ' ')
	b = e.apacheField(b, fTarget)
	b = append(b, ' ')
	b = e.apacheField(b, fProto)
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(e.status), 10)
	b = append(b, ' ')
	if e.bytes == 0 {
		b = append(b, '-')
	} else {
		b = strconv.AppendInt(b, e.bytes, 10)
	}
	b = append(b, ` "`...)
	b = e.apacheField(b, fReferer)
	b = append(b, `" "`...)
	b = e.apacheField(b, fUserAgent)
	b = append(b, `" host="`...)
	b = e.apacheField(b, fHost)
	b = append(b, `" origin=`...)
	b = appendDash(b, e.origin)
	b = append(b, " endpoint="...)
	b = appendDash(b, e.endpoint)
	b = append(b, " attempts="...)
	b = strconv.AppendInt(b, int64(e.attempts), 10)
	b = append(b, " error="...)
	b = appendDash(b, e.reason)
	b = append(b, " loop="...)
	if e.loop < 0 {
		b = append(b, '-')
	} else {
		b = strconv.AppendInt(b, int64(e.loop), 10)
	}
	b = append(b, " duration="...)
	b = strconv.AppendFloat(b, e.dur.Seconds(), 'f', 6, 64)
	b = append(b, " limit="...)
	b = appendDash(b, e.limit)
	b = append(b, " request_id="...)
	b = e.apacheField(b, fRequestID)
	return append(b, '\n')
}

// apacheField appends field f escaped as Apache escapes a log item, "-"
// when it is empty.
func (e *entry) apacheField(b []byte, f int) []byte {
	s := e.field(f)
	if s == "" {
		return append(b, '-')
	}
	b = appendApache(b, s)
	if e.cut&(1<<f) != 0 {
		b = append(b, ellipsis...)
	}
	return b
}

// appendApache escapes as Apache's ap_escape_logitem: '"' and '\' with a
// backslash, \b \n \r \t \v by name, other control and non-ASCII bytes as
// \xhh.
func appendApache(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case shortEscape[c] != 0:
			b = append(b, '\\', shortEscape[c])
		case c == '\v':
			b = append(b, '\\', 'v')
		case c < 0x20 || c >= 0x7f:
			b = append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendDash appends one of corput's own values (a name, an address, a
// reason: no spaces or quotes), "-" when empty.
func appendDash(b []byte, s string) []byte {
	if s == "" {
		return append(b, '-')
	}
	return append(b, s...)
}

// clientHost is a host:port address's host, without IPv6 brackets.
func clientHost(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i > 0 && !strings.Contains(addr[i:], "]") {
		addr = addr[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
}
