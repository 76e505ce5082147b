package upstream

import (
	"bufio"
	"fmt"
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
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	names := connectionNames(br)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
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
