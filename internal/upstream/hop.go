package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"

	"github.com/corput/corput/internal/h1"
)

// readResponse is http.ReadResponse for a proxy. A status outside
// 100–999 is an error. And ReadResponse deletes a
// "Connection: close" header as it reads it, and with it the list of
// fields the origin declared hop-by-hop ("Connection: X-Secret, close"),
// which the gateway must then not forward. So the head is looked at first,
// while it is still in br, and the fields the Connection header named are
// removed from the response.
//
// bound limits the head to limit bytes (headBound): a larger one fails with
// ErrHeadTooLarge having read at most limit + br.Size() bytes of it.
func readResponse(br *bufio.Reader, bound *headBound, limit int, req *http.Request) (*http.Response, error) {
	before := br.Buffered()
	bound.arm(int64(limit + br.Size() - before))
	names := connectionNames(br)
	resp, err := http.ReadResponse(br, req)
	read := bound.disarm()
	if err != nil {
		if errors.Is(err, ErrHeadTooLarge) || bound.exceeded {
			return nil, ErrHeadTooLarge
		}
		return nil, err
	}
	if head := before + int(read) - br.Buffered(); head > limit {
		resp.Body.Close()
		return nil, ErrHeadTooLarge
	}
	if resp.StatusCode < 100 || resp.StatusCode > 999 {
		// ReadResponse takes any three digits; net/http's server would
		// panic writing such a status on.
		resp.Body.Close()
		return nil, fmt.Errorf("malformed HTTP status code %d", resp.StatusCode)
	}
	for _, n := range names {
		if textproto.CanonicalMIMEHeaderKey(n) != "Upgrade" || resp.StatusCode != http.StatusSwitchingProtocols {
			resp.Header.Del(n)
		}
	}
	return resp, nil
}

// connectionNames waits until br holds a whole head (or its buffer is
// full, or the read fails: ReadResponse reports that) and returns the
// field names its Connection headers list, but close and keep-alive.
func connectionNames(br *bufio.Reader) []string {
	for {
		b, _ := br.Peek(br.Buffered())
		if end := h1.HeadEnd(b); end >= 0 {
			var names []string
			for name, value := range h1.HeadFields(b[:end]) {
				if !h1.EqFold(name, "connection") {
					continue
				}
				for tok := range h1.ConnectionTokens(value) {
					if !h1.EqFold(tok, "close") && !h1.EqFold(tok, "keep-alive") {
						names = append(names, string(tok))
					}
				}
			}
			return names
		}
		if len(b) == br.Size() {
			return nil
		}
		if _, err := br.Peek(len(b) + 1); err != nil {
			return nil
		}
	}
}

// headBound sits between a connection and its bufio.Reader and bounds what
// a response head may read: armed with a budget while the head is read, a
// read past it fails with ErrHeadTooLarge. Disarmed (the body), it passes
// reads through. Only the connection's read side uses it.
type headBound struct {
	r        io.Reader
	armed    bool
	left     int64
	read     int64 // bytes read while armed
	exceeded bool
}

func (b *headBound) arm(budget int64) {
	b.armed, b.left, b.read, b.exceeded = true, budget, 0, false
}

// disarm ends the head and returns the bytes read while it was armed.
func (b *headBound) disarm() int64 {
	b.armed = false
	return b.read
}

func (b *headBound) Read(p []byte) (int, error) {
	if !b.armed {
		return b.r.Read(p)
	}
	if b.left <= 0 {
		b.exceeded = true
		return 0, ErrHeadTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	b.read += int64(n)
	return n, err
}
