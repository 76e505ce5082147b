package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// bytesRecorder is an origin that records the bytes of every request it
// reads (the head, and the body by its framing) and answers each with a
// fixed response; a request that asks to upgrade gets 101 and its tunnel is
// echoed.
type bytesRecorder struct {
	addr string
	mu   sync.Mutex
	got  []string
	wire []byte // every byte read, on every connection, as it came
}

// Write records bytes as they are read (a tee of every connection).
func (rec *bytesRecorder) Write(p []byte) (int, error) {
	rec.mu.Lock()
	rec.wire = append(rec.wire, p...)
	rec.mu.Unlock()
	return len(p), nil
}

// wireSince returns the bytes read since the wire held n, and its length
// now.
func (rec *bytesRecorder) wireSince(n int) (string, int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return string(rec.wire[n:]), len(rec.wire)
}

func startBytesRecorder(t *testing.T) *bytesRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &bytesRecorder{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); rec.serve(c) })
		}
	})
	return rec
}

func (rec *bytesRecorder) serve(c net.Conn) {
	br := bufio.NewReader(io.TeeReader(c, rec))
	for {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var raw bytes.Buffer // the request's bytes as they came
		head := map[string]string{}
		for {
			line, err := br.ReadString('\n')
			raw.WriteString(line)
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
			if k, v, ok := strings.Cut(line, ":"); ok {
				head[strings.ToLower(k)] = strings.TrimSpace(v)
			}
		}
		switch {
		case head["transfer-encoding"] == "chunked":
			for {
				line, err := br.ReadString('\n')
				raw.WriteString(line)
				if err != nil {
					return
				}
				size, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
				if size == 0 {
					for { // trailers
						l, err := br.ReadString('\n')
						raw.WriteString(l)
						if err != nil || l == "\r\n" {
							break
						}
					}
					break
				}
				chunk := make([]byte, size+2)
				if _, err := io.ReadFull(br, chunk); err != nil {
					return
				}
				raw.Write(chunk)
			}
		case head["content-length"] != "":
			n, _ := strconv.ParseInt(head["content-length"], 10, 64)
			if _, err := io.CopyN(&raw, br, n); err != nil {
				return
			}
		}
		rec.mu.Lock()
		rec.got = append(rec.got, raw.String())
		rec.mu.Unlock()
		if strings.EqualFold(head["upgrade"], "echo") {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			io.Copy(c, br)
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}
}

func (rec *bytesRecorder) last() string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) == 0 {
		return ""
	}
	return rec.got[len(rec.got)-1]
}

// sameBytesCorpus are requests whose bytes at the origin must not depend
// on the serving path.
var sameBytesCorpus = []struct{ name, raw string }{
	{"get", "GET /a/b?c=d&e HTTP/1.1\r\nHost: gw.test\r\nAccept: */*\r\nX-Many: 1\r\nX-Many: 2\r\n\r\n"},
	{"head", "HEAD /h HTTP/1.1\r\nHost: gw.test\r\n\r\n"},
	{"post with a body", "POST /p HTTP/1.1\r\nHost: gw.test\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world"},
	{"empty post", "POST /e HTTP/1.1\r\nHost: gw.test\r\n\r\n"},
	{"long header", "GET /long HTTP/1.1\r\nHost: gw.test\r\nX-Long: " + strings.Repeat("v", 6000) + "\r\n\r\n"},
	{"hop-by-hop fields", "GET /hop HTTP/1.1\r\nHost: gw.test\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nX-End: 2\r\n\r\n"},
	{"forged forwarding", "GET /xff HTTP/1.1\r\nHost: gw.test\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: gopher\r\n\r\n"},
	{"chunked body", "POST /c HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"},
	{"chunked body with a trailer", "POST /t HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 3\r\n\r\n"},
	{"upgrade", "GET /ws HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"},
}

// TestBothPathsSendTheSameBytes sends one corpus through the fast path
// and through net/http's path (downstream.fast_path: false): the origin
// receives the same request from each, up to the differences that remain
// by design (docs/decisions.md, "One exchange, one driver"): net/http's
// path sends the fields sorted by name and in canonical case, where the
// fast path keeps the client's order and case; it sends a chunked body's
// first byte as its own chunk. Requests the fast path hands to net/http
// (a chunked body, an upgrade) go through net/http on both.
func TestBothPathsSendTheSameBytes(t *testing.T) {
	got := map[string][2]string{}
	for i, p := range requestPaths {
		rec := startBytesRecorder(t)
		g := gatewayTo(t, 1, p.top, "    pool: {prewarm: 0}\n", rec.addr)
		for _, c := range sameBytesCorpus {
			conn, err := net.Dial("tcp", g.Addr())
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(conn, c.raw)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", p.name, c.name, err)
			}
			if resp.StatusCode == http.StatusSwitchingProtocols {
				io.WriteString(conn, "ping")
				buf := make([]byte, 4)
				if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
					t.Fatalf("%s %s: tunnel echo %q %v", p.name, c.name, buf, err)
				}
			} else if resp.StatusCode != 200 {
				t.Fatalf("%s %s: status %d", p.name, c.name, resp.StatusCode)
			}
			conn.Close()
			v := got[c.name]
			v[i] = rec.last()
			got[c.name] = v
		}
	}
	for _, c := range sameBytesCorpus {
		fast, slow := got[c.name][0], got[c.name][1]
		if fast == "" || slow == "" {
			t.Fatalf("%s: the origin saw nothing (fast %q, net/http %q)", c.name, fast, slow)
		}
		if nf, ns := normalize(fast), normalize(slow); nf != ns {
			t.Errorf("%s: the origin received different requests\nfast path:\n%s\nnet/http:\n%s", c.name, nf, ns)
		}
	}
}

// normalize takes out the differences by design: the field lines sorted
// by name (each name's lines in order) in canonical case, and a chunked
// body de-chunked (its data, then its trailer lines).
func normalize(raw string) string {
	head, body, _ := strings.Cut(raw, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	fields := lines[1:]
	chunked := false
	for i, f := range fields {
		k, v, _ := strings.Cut(f, ":")
		k = textproto.CanonicalMIMEHeaderKey(k)
		fields[i] = k + ":" + v
		if k == "Transfer-Encoding" && strings.TrimSpace(v) == "chunked" {
			chunked = true
		}
	}
	slices.SortStableFunc(fields, func(a, b string) int {
		ka, _, _ := strings.Cut(a, ":")
		kb, _, _ := strings.Cut(b, ":")
		return strings.Compare(ka, kb)
	})
	if chunked {
		var data, trailer strings.Builder
		rest := body
		for {
			line, after, _ := strings.Cut(rest, "\r\n")
			size, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
			if size == 0 {
				trailer.WriteString(after)
				break
			}
			data.WriteString(after[:size])
			rest = after[size+2:]
		}
		body = fmt.Sprintf("<data %q><trailer %q>", data.String(), trailer.String())
	}
	return lines[0] + "\n" + strings.Join(fields, "\n") + "\n\n" + body
}
