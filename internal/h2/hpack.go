package h2

import "github.com/corput/corput/internal/h1"

// Request header blocks (RFC 7541). The encoder never adds to the dynamic
// table and never Huffman-codes: a field is the static table's entry when
// name and value match one, else a literal without indexing whose name is
// the static table's index when the name is in it. That costs a few bytes
// on the wire per field and saves the table's bookkeeping and the Huffman
// pass; and since nothing is kept, the caller's bytes may be reused as soon
// as Open returns. The origin's decoder needs no table-size update: its
// table stays empty.

// staticNames is the static table's first index of each name (RFC 7541
// Appendix A).
var staticNames = map[string]uint8{
	":authority": 1, ":method": 2, ":path": 4, ":scheme": 6, ":status": 8,
	"accept-charset": 15, "accept-encoding": 16, "accept-language": 17, "accept-ranges": 18,
	"accept": 19, "access-control-allow-origin": 20, "age": 21, "allow": 22, "authorization": 23,
	"cache-control": 24, "content-disposition": 25, "content-encoding": 26, "content-language": 27,
	"content-length": 28, "content-location": 29, "content-range": 30, "content-type": 31,
	"cookie": 32, "date": 33, "etag": 34, "expect": 35, "expires": 36, "from": 37, "host": 38,
	"if-match": 39, "if-modified-since": 40, "if-none-match": 41, "if-range": 42,
	"if-unmodified-since": 43, "last-modified": 44, "link": 45, "location": 46, "max-forwards": 47,
	"proxy-authenticate": 48, "proxy-authorization": 49, "range": 50, "referer": 51, "refresh": 52,
	"retry-after": 53, "server": 54, "set-cookie": 55, "strict-transport-security": 56,
	"transfer-encoding": 57, "user-agent": 58, "vary": 59, "via": 60, "www-authenticate": 61,
}

// Fields builds one request's header block. Add fields after Pseudo;
// Open encodes nothing else.
type Fields struct {
	b    []byte
	name [64]byte // a name lowered for the static table's lookup
}

// Reset empties f for the next request.
func (f *Fields) Reset() { f.b = f.b[:0] }

// Pseudo adds the request's pseudo-header fields. authority is the Host
// the client asked for; path the request target (with its query).
func (f *Fields) Pseudo(method, scheme, authority, path string) {
	switch method {
	case "GET":
		f.b = append(f.b, 0x80|2)
	case "POST":
		f.b = append(f.b, 0x80|3)
	default:
		f.literal(2, "", method)
	}
	switch scheme {
	case "https":
		f.b = append(f.b, 0x80|7)
	default:
		f.b = append(f.b, 0x80|6)
	}
	f.literal(1, "", authority)
	if path == "/" {
		f.b = append(f.b, 0x80|4)
	} else {
		f.literal(4, "", path)
	}
}

// Add adds a field, its name lowered. The fields HTTP/2 forbids in a
// request (connection-specific ones and Host, which is :authority) are
// left out, and TE is kept only as "trailers" (RFC 9113 §8.2.2).
func (f *Fields) Add(name, value string) {
	if len(name) == 0 {
		return
	}
	var lower []byte
	if len(name) <= len(f.name) {
		lower = f.name[:len(name)]
	} else {
		lower = make([]byte, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	switch {
	case connectionSpecific(h1.View(lower)), string(lower) == "host":
		return
	case string(lower) == "te" && value != "trailers":
		return
	}
	if idx, ok := staticNames[string(lower)]; ok {
		f.literal(idx, "", value)
		return
	}
	f.b = append(f.b, 0)
	f.str(h1.View(lower))
	f.str(value)
}

// connectionSpecific reports whether a lower-case field name is one HTTP/2
// forbids in either direction (RFC 9113 §8.2.2): neither a request nor a
// response carries it.
func connectionSpecific(name string) bool {
	switch name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	}
	return false
}

// literal appends a literal field without indexing: the name the static
// table's idx, or name when idx is 0.
func (f *Fields) literal(idx uint8, name, value string) {
	if idx == 0 {
		f.b = append(f.b, 0)
		f.str(name)
	} else {
		f.b = appendInt(f.b, 4, 0, uint64(idx))
	}
	f.str(value)
}

func (f *Fields) str(s string) {
	f.b = appendInt(f.b, 7, 0, uint64(len(s)))
	f.b = append(f.b, s...)
}

// appendInt appends v as an HPACK integer with an n-bit prefix, the byte's
// other bits being first (RFC 7541 §5.1).
func appendInt(b []byte, n uint, first byte, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	for v -= max; v >= 128; v >>= 7 {
		b = append(b, byte(v&0x7f)|0x80)
	}
	return append(b, byte(v))
}
