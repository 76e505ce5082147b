package upstream

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReadResponseDropsConnectionNames checks the fields a response's
// Connection header names go with it, though http.ReadResponse deletes a
// Connection header that says close, wherever the field lines end.
func TestReadResponseDropsConnectionNames(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		gone, kept []string
	}{
		{"close and a name", "Connection: X-A, close\r\nX-A: 1\r\nX-B: 2\r\n", []string{"X-A"}, []string{"X-B"}},
		{"two fields", "Connection: close\r\nconnection: keep-alive , x-a,,\r\nX-A: 1\r\nKeep-Alive: 5\r\n", []string{"X-A"}, []string{"Keep-Alive"}},
		{"bare LF before it", "X-B: 2\nConnection: close, X-A\r\nX-A: 1\r\n", []string{"X-A"}, []string{"X-B"}},
		{"in a reason phrase only", "X-A: 1\r\n", nil, []string{"X-A"}},
	} {
		raw := "HTTP/1.1 200 Connection: X-A\r\n" + tc.head + "Content-Length: 0\r\n\r\n"
		b := &headBound{r: strings.NewReader(raw)}
		resp, err := readResponse(bufio.NewReader(b), b, DefaultMaxResponseHeaderBytes, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, k := range tc.gone {
			if v, ok := resp.Header[k]; ok {
				t.Errorf("%s: %s: %q survived", tc.name, k, v)
			}
		}
		for _, k := range tc.kept {
			if _, ok := resp.Header[k]; !ok {
				t.Errorf("%s: %s was dropped: %v", tc.name, k, resp.Header)
			}
		}
	}
}

// A response head is bounded exactly: a head of limit bytes is read, one
// byte more fails with ErrHeadTooLarge whatever follows it, and a huge one
// fails having read at most limit + the buffer's size.
func TestReadResponseBoundsTheHead(t *testing.T) {
	const limit = 8 << 10
	head := func(size int) string {
		h := "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Pad: "
		return h + strings.Repeat("p", size-len(h)-4) + "\r\n\r\n"
	}
	for _, c := range []struct {
		name string
		raw  string
		ok   bool
	}{
		{"at the limit", head(limit) + "hello", true},
		{"a byte over", head(limit+1) + "hello", false},
		{"far under, a body after", head(100) + "hello" + strings.Repeat("x", 64<<10), true},
		{"a megabyte", head(1 << 20), false},
	} {
		counted := &countingReader{r: strings.NewReader(c.raw)}
		b := &headBound{r: counted}
		resp, err := readResponse(bufio.NewReaderSize(b, 4096), b, limit, &http.Request{Method: "GET"})
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || string(body) != "hello" {
				t.Errorf("%s: body %q, %v", c.name, body, err)
			}
			continue
		}
		if !errors.Is(err, ErrHeadTooLarge) {
			t.Errorf("%s: %v, want ErrHeadTooLarge", c.name, err)
		}
		if counted.n > limit+4096 {
			t.Errorf("%s: read %d bytes of the head, want at most %d", c.name, counted.n, limit+4096)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
