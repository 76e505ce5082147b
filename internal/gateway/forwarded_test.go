package gateway

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/waitfor"
)

// forwardedLines are the Forwarded field lines of a raw request, as the
// origin received them.
func forwardedLines(raw string) []string {
	head, _, _ := strings.Cut(raw, "\r\n\r\n")
	var out []string
	for _, l := range strings.Split(head, "\r\n")[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "forwarded") {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// TestForwardedAtTheOrigin: with downstream.forwarded the origin receives
// one Forwarded field (RFC 7239): this hop's for=, proto= and host= for a
// direct client, IPv4 or IPv6 (quoted, bracketed), whose own Forwarded
// is replaced; a trusted proxy's appended to. Without it, nothing is
// added. Both serving paths, the bytes the origin read.
func TestForwardedAtTheOrigin(t *testing.T) {
	type send struct {
		name, from, host, fields string
		want                     []string
	}
	for _, fast := range []bool{true, false} {
		for _, tc := range []struct {
			name, listen, local string
			on                  bool
			sends               []send
		}{
			{"ipv4", "127.0.0.1:0", "", true, []send{
				{"direct client", "127.0.0.1", "gw.test", "", []string{"for=127.0.0.1;proto=http;host=gw.test"}},
				{"untrusted client's replaced", "127.0.0.1", "gw.test:8080", "Forwarded: for=6.6.6.6;host=evil\r\nforwarded: for=7.7.7.7\r\n",
					[]string{`for=127.0.0.1;proto=http;host="gw.test:8080"`}},
				{"trusted proxy's appended to", "127.0.0.2", "gw.test", "Forwarded: for=192.0.2.1;proto=https\r\nForwarded: for=\"[2001:db8::7]\"\r\n",
					[]string{`for=192.0.2.1;proto=https, for="[2001:db8::7]", for=127.0.0.2;proto=http;host=gw.test`}},
			}},
			{"ipv6", "[::1]:0", "::1", true, []send{
				{"direct client", "::1", "gw.test", "Forwarded: for=6.6.6.6\r\n", []string{`for="[::1]";proto=http;host=gw.test`}},
			}},
			{"off", "127.0.0.1:0", "", false, []send{
				{"nothing added", "127.0.0.1", "gw.test", "", nil},
				{"a client's passes as before", "127.0.0.1", "gw.test", "Forwarded: for=6.6.6.6\r\n", []string{"for=6.6.6.6"}},
			}},
		} {
			t.Run(fmt.Sprintf("fast_path=%v/%s", fast, tc.name), func(t *testing.T) {
				rec := startBytesRecorder(t)
				g := startGateway(t, fmt.Sprintf(`
listen: %q
admin: 127.0.0.1:0
loops: 1
downstream: {fast_path: %v, forwarded: %v, trusted_proxies: [127.0.0.2/32]}
routes: [{path_prefix: /, origin: app}]
origins:
  - name: app
    protocol: h1
    pool: {prewarm: 0}
    endpoints: [{address: %q}]
`, tc.listen, fast, tc.on, rec.addr), nil, Options{})
				for i, s := range tc.sends {
					c := dialFrom(t, s.from, g.Addr())
					fmt.Fprintf(c, "GET /f HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", s.host, s.fields)
					c.SetDeadline(time.Now().Add(10 * time.Second))
					if b, _ := io.ReadAll(c); !strings.HasPrefix(string(b), "HTTP/1.1 200 ") {
						t.Fatalf("%s: %q", s.name, b)
					}
					waitfor.Until(t, "the origin to record the request", func() bool {
						rec.mu.Lock()
						defer rec.mu.Unlock()
						return len(rec.got) == i+1
					})
					got := forwardedLines(rec.last())
					if strings.Join(got, "\n") != strings.Join(s.want, "\n") {
						t.Errorf("%s: the origin received Forwarded %q, want %q\n%s", s.name, got, s.want, rec.last())
					}
				}
				if h := g.handoffs(); fast && h != 0 {
					t.Errorf("the fast path handed %d connections to net/http", h)
				}
			})
		}
	}
}
