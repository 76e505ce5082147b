package upstream

import (
	"bufio"
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
		resp, err := readResponse(bufio.NewReader(strings.NewReader(raw)), &http.Request{Method: "GET"})
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
