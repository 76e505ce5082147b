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
	h.Fields = s.edit.AppendID(h.Fields) // downstream.request_id.return_to_client
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

// AnswerGRPC writes the gateway's own answer for reason to a gRPC client:
// 200 with no body (Content-Length: 0; over HTTP/2 one HEADERS frame that
// ends the stream, gRPC's trailers-only response) whose grpc-status and
// grpc-message carry the reason (forward.Reason.GRPCFields). It returns
// the reason's status, not 200: the request is counted, logged and traced
// as the gateway's failure it is, whichever way it was told.
func (s *Stream) AnswerGRPC(c exchange.Client, reason forward.Reason) int {
	h := &s.ans
	*h = exchange.Head{Status: http.StatusOK, Fields: s.ansFields[:0], Framing: exchange.Length}
	reason.GRPCFields(func(name, value string) {
		h.Fields = append(h.Fields, hpack.HeaderField{Name: name, Value: value})
	})
	h.Fields = s.edit.AppendID(h.Fields)
	if c.WriteHead(h) == nil {
		c.End(nil, 0)
		c.Flush()
	}
	return reason.Status()
}

// answer writes the gateway's own answer for reason to the request in: in
// gRPC's terms to a gRPC client (AnswerGRPC), else Answer's.
func (s *Stream) answer(c exchange.Client, reason forward.Reason, in *Inbound) int {
	if ct, ok := in.Head.Value("content-type", 0); ok && forward.GRPC(ct) {
		return s.AnswerGRPC(c, reason)
	}
	return s.Answer(c, reason, in.Method)
}
