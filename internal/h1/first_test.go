package h1

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"
)

func TestNotHTTP(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{"GARBAGE\r\n\r\n", true},
		{"GET /\r\n\r\n", true},
		{"GET\r\n", true},
		{"\r\n", true},
		{"G@T / HTTP/1.1\r\n", true},
		{"GET / HTTX/1.1\r\n", true},
		{"GET / HTTP/1.11\r\n", true},
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false},
		{"GET / HTTP/1.0\n\n", false},
		{"GET / HTTP/2.0\r\n\r\n", false}, // net/http's 505
		{"GET / HTTP/1.1", false},         // not complete yet
		{"GARB", false},
		{"PRI * HTTP/2.0\r\n", false},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n", false},
	} {
		if got := NotHTTP([]byte(c.in)); got != c.want {
			t.Errorf("NotHTTP(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// Whatever NotHTTP rules out, net/http's server refuses too.
func FuzzNotHTTPOnlyWhatNetHTTPRefuses(f *testing.F) {
	for _, s := range []string{"GARBAGE\r\n\r\n", "GET /\r\n", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "A B C\n", "get / http/1.1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !NotHTTP(b) {
			return
		}
		in := append(bytes.Clone(b), "\r\nHost: x\r\n\r\n"...)
		if req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(in))); err == nil {
			t.Fatalf("NotHTTP(%q) but net/http reads %s %s %s", b, req.Method, req.RequestURI, req.Proto)
		}
	})
}
