package proxy

import (
	"net/http"
	"unsafe"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
)

// Answer writes the gateway's own answer for reason to c, through the
// stream's buffers, and returns its status: the reason's status and fields
// (X-Corput-Error, Retry-After), a short text body with its length, the
// length alone to a HEAD request (the length a GET would get).
func (s *Stream) Answer(c exchange.Client, reason forward.Reason, method string) int {
	h := &s.ans
	*h = exchange.Head{Status: reason.Status(), Fields: s.ansFields[:0], Framing: exchange.Length}
	reason.Fields(func(name, value string) {
		h.Fields = append(h.Fields, hpack.HeaderField{Name: name, Value: value})
	})
	body := reason.Body()
	h.Length = int64(len(body))
	if method == http.MethodHead {
		h.Framing = exchange.None
	}
	if c.WriteHead(h) != nil {
		return h.Status
	}
	n := 0
	if h.Framing == exchange.Length {
		n, _ = c.Write(unsafe.Slice(unsafe.StringData(body), len(body))) // the writer copies it
	}
	c.End(nil, int64(n))
	c.Flush()
	return h.Status
}
