package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// head joins lines with CRLF and ends the head with a blank line.
func head(lines ...string) string {
	return strings.Join(lines, "\r\n") + "\r\n\r\n"
}

// simpleCase is a request head ParseRequest must call Complete.
type simpleCase struct {
	name    string
	in      string
	method  string
	target  string
	path    string
	host    string
	cl      int64 // -1 when absent
	close   bool
	te      bool     // TETrailers
	hop     []string // names (lower case) of the fields marked Hop
	kept    []string // names (lower case) of the fields forwarded
	xff     int
	xfp     int
	xfh     int
	nfields int
}

var simpleRequests = []simpleCase{
	{
		name: "minimal", in: head("GET / HTTP/1.1", "Host: example.com"),
		method: "GET", target: "/", path: "/", host: "example.com", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: 1,
	},
	{
		name: "fields", in: head("GET /a/b HTTP/1.1", "Host: example.com:8080", "Accept: */*", "User-Agent:  curl/8.0 \t", "X-Empty:", "Cookie: a=b; c=d"),
		method: "GET", target: "/a/b", path: "/a/b", host: "example.com:8080", cl: -1,
		hop: []string{"host"}, kept: []string{"accept", "user-agent", "x-empty", "cookie"}, xff: -1, xfp: -1, xfh: -1, nfields: 5,
	},
	{
		name: "query", in: head("GET /search?q=a%20b&x=1/2?3 HTTP/1.1", "Host: h"),
		method: "GET", target: "/search?q=a%20b&x=1/2?3", path: "/search", host: "h", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: 1,
	},
	{
		name: "empty query", in: head("GET /p? HTTP/1.1", "Host: h"),
		method: "GET", target: "/p?", path: "/p", host: "h", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: 1,
	},
	{
		name: "path sub-delims", in: head("GET /a;b=c,d/@x:y/~_.-!$&'()*+ HTTP/1.1", "Host: h"),
		method: "GET", target: "/a;b=c,d/@x:y/~_.-!$&'()*+", path: "/a;b=c,d/@x:y/~_.-!$&'()*+", host: "h", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: 1,
	},
	{
		name: "double slash path", in: head("GET //x/y HTTP/1.1", "Host: h"),
		method: "GET", target: "//x/y", path: "//x/y", host: "h", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: 1,
	},
	{
		name: "content-length", in: head("POST /upload HTTP/1.1", "host: h", "Content-Type: text/plain", "Content-Length: 11"),
		method: "POST", target: "/upload", path: "/upload", host: "h", cl: 11,
		hop: []string{"host", "content-length"}, kept: []string{"content-type"}, xff: -1, xfp: -1, xfh: -1, nfields: 3,
	},
	{
		name: "content-length zero, leading zeros, OWS", in: head("PUT /x HTTP/1.1", "Host: h", "CONTENT-LENGTH:\t007 "),
		method: "PUT", target: "/x", path: "/x", host: "h", cl: 7,
		hop: []string{"host", "content-length"}, xff: -1, xfp: -1, xfh: -1, nfields: 2,
	},
	{
		name: "content-length 0", in: head("POST / HTTP/1.1", "Host: h", "Content-Length: 0"),
		method: "POST", target: "/", path: "/", host: "h", cl: 0,
		hop: []string{"host", "content-length"}, xff: -1, xfp: -1, xfh: -1, nfields: 2,
	},
	{
		name: "connection close", in: head("GET / HTTP/1.1", "Host: h", "Connection: close"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1, close: true,
		hop: []string{"host", "connection"}, xff: -1, xfp: -1, xfh: -1, nfields: 2,
	},
	{
		name: "connection Close, keep-alive, mixed case", in: head("GET / HTTP/1.1", "Host: h", "Connection: Keep-Alive ,  CLOSE"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1, close: true,
		hop: []string{"host", "connection"}, xff: -1, xfp: -1, xfh: -1, nfields: 2,
	},
	{
		name: "connection keep-alive", in: head("GET / HTTP/1.1", "Host: h", "Connection: keep-alive", "Keep-Alive: timeout=5"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1,
		hop: []string{"host", "connection", "keep-alive"}, xff: -1, xfp: -1, xfh: -1, nfields: 3,
	},
	{
		name: "connection names fields", in: head("GET / HTTP/1.1", "X-A: 1", "Host: h", "Connection: x-a, X-B,,", "x-b: 2", "X-C: 3"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1,
		hop: []string{"x-a", "host", "connection", "x-b"}, kept: []string{"x-c"}, xff: -1, xfp: -1, xfh: -1, nfields: 5,
	},
	{
		name: "two connection fields", in: head("GET / HTTP/1.1", "Host: h", "Connection: x-a", "Connection: close", "X-A: 1"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1, close: true,
		hop: []string{"host", "connection", "connection", "x-a"}, xff: -1, xfp: -1, xfh: -1, nfields: 4,
	},
	{
		name: "te trailers", in: head("GET / HTTP/1.1", "Host: h", "TE: trailers", "Connection: TE"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1, te: true,
		hop: []string{"host", "te", "connection"}, xff: -1, xfp: -1, xfh: -1, nfields: 3,
	},
	{
		name: "te other", in: head("GET / HTTP/1.1", "Host: h", "te: gzip"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1,
		hop: []string{"host", "te"}, xff: -1, xfp: -1, xfh: -1, nfields: 2,
	},
	{
		name: "hop-by-hop names", in: head("GET / HTTP/1.1", "Host: h", "Proxy-Connection: keep-alive", "Proxy-Authorization: Basic x", "Trailer: X-T", "Keep-Alive: 1"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1,
		hop: []string{"host", "proxy-connection", "proxy-authorization", "trailer", "keep-alive"}, xff: -1, xfp: -1, xfh: -1, nfields: 5,
	},
	{
		name: "x-forwarded", in: head("GET / HTTP/1.1", "Host: h", "X-Other: 0", "X-Forwarded-For: 1.2.3.4", "x-forwarded-proto: https", "X-Forwarded-For: 5.6.7.8", "X-Forwarded-Host: front", "X-Forwarded-Proto: http"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1,
		hop:  []string{"host", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"},
		kept: []string{"x-other"}, xff: 2, xfp: 3, xfh: 5, nfields: 7,
	},
	{
		name: "host ipv4 port", in: head("DELETE /r/1 HTTP/1.1", "Host: 10.0.0.1:80"),
		method: "DELETE", target: "/r/1", path: "/r/1", host: "10.0.0.1:80", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: 1,
	},
	{
		name: "host ipv6", in: head("OPTIONS /x HTTP/1.1", "Host: [::1]:8080"),
		method: "OPTIONS", target: "/x", path: "/x", host: "[::1]:8080", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: 1,
	},
	{
		name: "extension method", in: head("PURGE-IT! /x HTTP/1.1", "Host: h_1.example"),
		method: "PURGE-IT!", target: "/x", path: "/x", host: "h_1.example", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: 1,
	},
	{
		name: "obs-text and tab in value", in: head("GET / HTTP/1.1", "Host: h", "X-Bin: a\tb\x80\xff c"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1,
		hop: []string{"host"}, kept: []string{"x-bin"}, xff: -1, xfp: -1, xfh: -1, nfields: 2,
	},
	{
		name: "date and upgrade-like names are plain in requests", in: head("GET / HTTP/1.1", "Host: h", "Date: x", "Upgrade-Insecure-Requests: 1"),
		method: "GET", target: "/", path: "/", host: "h", cl: -1,
		hop: []string{"host"}, kept: []string{"date", "upgrade-insecure-requests"}, xff: -1, xfp: -1, xfh: -1, nfields: 3,
	},
	{
		name: "max fields", in: head(append([]string{"GET / HTTP/1.1", "Host: h"}, manyFields(MaxFields-1)...)...),
		method: "GET", target: "/", path: "/", host: "h", cl: -1,
		hop: []string{"host"}, xff: -1, xfp: -1, xfh: -1, nfields: MaxFields,
	},
}

func manyFields(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("X-F%d: %d", i, i)
	}
	return out
}

func TestParseRequestSimple(t *testing.T) {
	for _, tc := range simpleRequests {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.in + "BODY")
			var h Head
			n, res := ParseRequest(b, &h)
			if res != Complete || n != len(tc.in) {
				t.Fatalf("ParseRequest = %d, %v; want %d, complete", n, res, len(tc.in))
			}
			eq := func(what string, got []byte, want string) {
				t.Helper()
				if string(got) != want {
					t.Errorf("%s = %q, want %q", what, got, want)
				}
			}
			eq("Method", h.Method, tc.method)
			eq("Target", h.Target, tc.target)
			eq("Path", h.Path, tc.path)
			eq("Host", h.Host, tc.host)
			if h.ContentLength != tc.cl {
				t.Errorf("ContentLength = %d, want %d", h.ContentLength, tc.cl)
			}
			if h.Close != tc.close {
				t.Errorf("Close = %v, want %v", h.Close, tc.close)
			}
			if h.TETrailers != tc.te {
				t.Errorf("TETrailers = %v, want %v", h.TETrailers, tc.te)
			}
			if h.Chunked || h.HasDate || h.Status != 0 {
				t.Errorf("response fields set: Chunked %v HasDate %v Status %d", h.Chunked, h.HasDate, h.Status)
			}
			if h.XFF != tc.xff || h.XFP != tc.xfp || h.XFH != tc.xfh {
				t.Errorf("XFF, XFP, XFH = %d, %d, %d; want %d, %d, %d", h.XFF, h.XFP, h.XFH, tc.xff, tc.xfp, tc.xfh)
			}
			if len(h.Fields) != tc.nfields {
				t.Errorf("%d fields, want %d", len(h.Fields), tc.nfields)
			}
			var hop, kept []string
			for _, f := range h.Fields {
				if f.Hop {
					hop = append(hop, strings.ToLower(string(f.Name)))
				} else if !strings.HasPrefix(strings.ToLower(string(f.Name)), "x-f") || tc.name != "max fields" {
					kept = append(kept, strings.ToLower(string(f.Name)))
				}
			}
			if fmt.Sprint(hop) != fmt.Sprint(tc.hop) {
				t.Errorf("hop fields %q, want %q", hop, tc.hop)
			}
			if fmt.Sprint(kept) != fmt.Sprint(tc.kept) {
				t.Errorf("kept fields %q, want %q", kept, tc.kept)
			}
			// Fields are slices of b, values trimmed.
			for _, f := range h.Fields {
				if len(f.Value) > 0 && (f.Value[0] == ' ' || f.Value[0] == '\t' || f.Value[len(f.Value)-1] == ' ' || f.Value[len(f.Value)-1] == '\t') {
					t.Errorf("value %q not trimmed", f.Value)
				}
			}
			if string(b[n:]) != "BODY" {
				t.Errorf("body at n = %q", b[n:])
			}
		})
	}
}

func TestParseRequestFieldValues(t *testing.T) {
	in := head("GET / HTTP/1.1", "Host:h", "User-Agent:  curl/8.0 \t", "X-Empty:", "X-Inner: a  b")
	var h Head
	if _, res := ParseRequest([]byte(in), &h); res != Complete {
		t.Fatal(res)
	}
	want := [][2]string{{"Host", "h"}, {"User-Agent", "curl/8.0"}, {"X-Empty", ""}, {"X-Inner", "a  b"}}
	if len(h.Fields) != len(want) {
		t.Fatalf("%d fields", len(h.Fields))
	}
	for i, w := range want {
		if string(h.Fields[i].Name) != w[0] || string(h.Fields[i].Value) != w[1] {
			t.Errorf("field %d = %q: %q, want %q: %q", i, h.Fields[i].Name, h.Fields[i].Value, w[0], w[1])
		}
	}
	if !h.Has("user-agent") || h.Has("accept") {
		t.Error("Has")
	}
}

// TestParseRequestReuse checks a Head parsed twice carries nothing over.
// TestParseRequestMarksUnderscores checks a name with '_' is marked and
// counted, and one with only single '-' or a run of them is not.
func TestParseRequestMarksUnderscores(t *testing.T) {
	var h Head
	in := head("GET / HTTP/1.1", "Host: h", "X_Api_Key: k", "Accept--Language: en", "X-A: 1", "_: 2")
	if _, res := ParseRequest([]byte(in), &h); res != Complete {
		t.Fatalf("ParseRequest = %v", res)
	}
	var marked []string
	for _, f := range h.Fields {
		if f.Underscore {
			marked = append(marked, string(f.Name))
		}
	}
	if h.Underscores != 2 || len(marked) != 2 || marked[0] != "X_Api_Key" || marked[1] != "_" {
		t.Errorf("Underscores = %d, marked %q; want 2: X_Api_Key, _", h.Underscores, marked)
	}
	if _, res := ParseRequest([]byte(head("GET / HTTP/1.1", "Host: h")), &h); res != Complete || h.Underscores != 0 {
		t.Errorf("a reused Head keeps %d underscores", h.Underscores)
	}
}

func TestParseRequestReuse(t *testing.T) {
	var h Head
	first := head("POST / HTTP/1.1", "Host: a", "Content-Length: 3", "Connection: close, x-a", "TE: trailers", "X-Forwarded-For: 1", "X-A: 1")
	if _, res := ParseRequest([]byte(first), &h); res != Complete {
		t.Fatal(res)
	}
	second := head("GET / HTTP/1.1", "Host: b", "X-A: 2")
	if _, res := ParseRequest([]byte(second), &h); res != Complete {
		t.Fatal(res)
	}
	if h.ContentLength != -1 || h.Close || h.TETrailers || h.XFF != -1 || len(h.Fields) != 2 || h.Fields[1].Hop || string(h.Host) != "b" {
		t.Errorf("state carried over: %+v", h)
	}
	// A NotSimple parse followed by a simple one.
	if _, res := ParseRequest([]byte(head("GET / HTTP/1.1", "Host: a", "Connection: x-b", "Expect: 100-continue")), &h); res != NotSimple {
		t.Fatal(res)
	}
	if _, res := ParseRequest([]byte(head("GET / HTTP/1.1", "Host: b", "X-B: 2")), &h); res != Complete || h.Fields[1].Hop {
		t.Errorf("connection tokens carried over: %v %+v", res, h.Fields)
	}
}

var notSimpleRequests = []struct{ name, in string }{
	// a protected name disguised: net/http's path answers it 400
	{"Transfer_Encoding", head("POST / HTTP/1.1", "Host: h", "Transfer_Encoding: chunked")},
	{"Content_Length", head("POST / HTTP/1.1", "Host: h", "Content_Length: 1000")},
	{"Transfer---Encoding", head("POST / HTTP/1.1", "Host: h", "Transfer---Encoding: chunked")},
	{"X_Forwarded_For", head("GET / HTTP/1.1", "Host: h", "X_Forwarded_For: 6.6.6.6")},
	{"x-forwarded--host", head("GET / HTTP/1.1", "Host: h", "HOST_: x", "x-forwarded--host: e")},
	// framing
	{"CL and TE", head("POST / HTTP/1.1", "Host: h", "Content-Length: 5", "Transfer-Encoding: chunked")},
	{"TE and CL", head("POST / HTTP/1.1", "Host: h", "Transfer-Encoding: chunked", "Content-Length: 5")},
	{"TE chunked", head("POST / HTTP/1.1", "Host: h", "Transfer-Encoding: chunked")},
	{"TE identity", head("POST / HTTP/1.1", "Host: h", "Transfer-Encoding: identity")},
	{"TE gzip chunked", head("POST / HTTP/1.1", "Host: h", "transfer-encoding: gzip, chunked")},
	{"TE empty", head("POST / HTTP/1.1", "Host: h", "Transfer-Encoding:")},
	{"duplicate CL", head("POST / HTTP/1.1", "Host: h", "Content-Length: 5", "Content-Length: 5")},
	{"conflicting CL", head("POST / HTTP/1.1", "Host: h", "Content-Length: 5", "content-length: 6")},
	{"CL list", head("POST / HTTP/1.1", "Host: h", "Content-Length: 5, 5")},
	{"CL sign", head("POST / HTTP/1.1", "Host: h", "Content-Length: +5")},
	{"CL negative", head("POST / HTTP/1.1", "Host: h", "Content-Length: -1")},
	{"CL hex", head("POST / HTTP/1.1", "Host: h", "Content-Length: 0x5")},
	{"CL empty", head("POST / HTTP/1.1", "Host: h", "Content-Length:")},
	{"CL inner space", head("POST / HTTP/1.1", "Host: h", "Content-Length: 1 2")},
	{"CL too long", head("POST / HTTP/1.1", "Host: h", "Content-Length: 1234567890123456789")},
	{"CL overflow", head("POST / HTTP/1.1", "Host: h", "Content-Length: 99999999999999999999999")},
	// line structure
	{"obs-fold", head("GET / HTTP/1.1", "Host: h", "X-A: 1", " folded")},
	{"obs-fold tab", head("GET / HTTP/1.1", "Host: h", "X-A: 1", "\tfolded")},
	{"obs-fold first", head("GET / HTTP/1.1", " Host: h")},
	{"bare LF in field", "GET / HTTP/1.1\r\nHost: h\nX-A: 1\r\n\r\n"},
	{"bare LF after request line", "GET / HTTP/1.1\nHost: h\r\n\r\n"},
	{"bare LF head end", "GET / HTTP/1.1\r\nHost: h\n\n"},
	{"bare LF everywhere", "GET / HTTP/1.1\nHost: h\n\n"},
	{"bare CR in value", head("GET / HTTP/1.1", "Host: h", "X-A: 1\r2")},
	{"bare CR end of value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\r\n\r\n"},
	{"leading blank line", "\r\n" + head("GET / HTTP/1.1", "Host: h")},
	{"no fields", "GET / HTTP/1.1\r\n\r\n"},
	// request line
	{"HTTP/1.0", head("GET / HTTP/1.0", "Host: h")},
	{"HTTP/2.0", head("GET / HTTP/2.0", "Host: h")},
	{"HTTP/1.2", head("GET / HTTP/1.2", "Host: h")},
	{"HTTP/0.9 style", head("GET /", "Host: h")},
	{"lower-case version", head("GET / http/1.1", "Host: h")},
	{"version trailing space", head("GET / HTTP/1.1 ", "Host: h")},
	{"double space", head("GET  / HTTP/1.1", "Host: h")},
	{"double space before version", head("GET /  HTTP/1.1", "Host: h")},
	{"tab separator", head("GET\t/ HTTP/1.1", "Host: h")},
	{"empty method", head(" / HTTP/1.1", "Host: h")},
	{"method non-token", head("G(T / HTTP/1.1", "Host: h")},
	{"method too long", head(strings.Repeat("A", 21)+" / HTTP/1.1", "Host: h")},
	{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
	{"absolute target", head("GET http://h/ HTTP/1.1", "Host: h")},
	{"asterisk target", head("OPTIONS * HTTP/1.1", "Host: h")},
	{"authority target", head("CONNECT h:443 HTTP/1.1", "Host: h:443")},
	{"empty target", head("GET  HTTP/1.1", "Host: h")},
	{"percent in path", head("GET /a%2fb HTTP/1.1", "Host: h")},
	{"percent-encoded dot", head("GET /%2e%2e/x HTTP/1.1", "Host: h")},
	{"backslash in path", head("GET /a\\b HTTP/1.1", "Host: h")},
	{"fragment", head("GET /a#b HTTP/1.1", "Host: h")},
	{"fragment in query", head("GET /a?x#b HTTP/1.1", "Host: h")},
	{"quote in path", head("GET /a\"b HTTP/1.1", "Host: h")},
	{"brackets in path", head("GET /a[1] HTTP/1.1", "Host: h")},
	{"braces in path", head("GET /a{b} HTTP/1.1", "Host: h")},
	{"pipe caret backtick in path", head("GET /a|b^c`d HTTP/1.1", "Host: h")},
	{"angle brackets in path", head("GET /<a> HTTP/1.1", "Host: h")},
	{"non-ASCII in path", head("GET /caf\xc3\xa9 HTTP/1.1", "Host: h")},
	{"non-ASCII in query", head("GET /?q=\xc3\xa9 HTTP/1.1", "Host: h")},
	{"DEL in query", head("GET /?q=\x7f HTTP/1.1", "Host: h")},
	{"CTL in target", head("GET /a\x01b HTTP/1.1", "Host: h")},
	{"NUL in target", head("GET /a\x00 HTTP/1.1", "Host: h")},
	// special fields
	{"Expect", head("POST / HTTP/1.1", "Host: h", "Content-Length: 1", "Expect: 100-continue")},
	{"Upgrade", head("GET / HTTP/1.1", "Host: h", "Upgrade: websocket")},
	{"Connection upgrade", head("GET / HTTP/1.1", "Host: h", "Connection: Upgrade")},
	{"Connection upgrade in list", head("GET / HTTP/1.1", "Host: h", "Connection: keep-alive, upgrade")},
	{"h2c upgrade", head("GET / HTTP/1.1", "Host: h", "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA")},
	{"Connection non-token", head("GET / HTTP/1.1", "Host: h", "Connection: \"close\"")},
	{"Connection slash", head("GET / HTTP/1.1", "Host: h", "Connection: a/b")},
	{"Connection too many names", head("GET / HTTP/1.1", "Host: h", "Connection: a, b, c, d, e, f, g, h, i")},
	{"Connection names Host", head("GET / HTTP/1.1", "Host: h", "Connection: host")},
	{"Connection names HOST", head("GET / HTTP/1.1", "Connection: close, HOST", "Host: h")},
	// Host
	{"missing Host", head("GET / HTTP/1.1", "Accept: */*")},
	{"duplicate Host", head("GET / HTTP/1.1", "Host: h", "Host: h")},
	{"conflicting Host", head("GET / HTTP/1.1", "Host: a", "host: b")},
	{"empty Host", head("GET / HTTP/1.1", "Host:")},
	{"blank Host", head("GET / HTTP/1.1", "Host:   ")},
	{"Host with space", head("GET / HTTP/1.1", "Host: a b")},
	{"Host with slash", head("GET / HTTP/1.1", "Host: a/b")},
	{"Host with userinfo", head("GET / HTTP/1.1", "Host: u@a")},
	{"Host with percent", head("GET / HTTP/1.1", "Host: a%20b")},
	{"Host with comma", head("GET / HTTP/1.1", "Host: a,b")},
	{"Host non-ASCII", head("GET / HTTP/1.1", "Host: caf\xc3\xa9")},
	{"Host too long", head("GET / HTTP/1.1", "Host: "+strings.Repeat("a", 256))},
	// field syntax
	{"space before colon", head("GET / HTTP/1.1", "Host: h", "X-A : 1")},
	{"space before colon on Host", head("GET / HTTP/1.1", "Host : h")},
	{"tab before colon", head("GET / HTTP/1.1", "Host: h", "X-A\t: 1")},
	{"space in name", head("GET / HTTP/1.1", "Host: h", "X A: 1")},
	{"empty name", head("GET / HTTP/1.1", "Host: h", ": 1")},
	{"no colon", head("GET / HTTP/1.1", "Host: h", "X-A")},
	{"non-token name", head("GET / HTTP/1.1", "Host: h", "X(A): 1")},
	{"non-ASCII name", head("GET / HTTP/1.1", "Host: h", "X-\xc3\xa9: 1")},
	{"NUL in value", head("GET / HTTP/1.1", "Host: h", "X-A: a\x00b")},
	{"CTL in value", head("GET / HTTP/1.1", "Host: h", "X-A: a\x1bb")},
	{"DEL in value", head("GET / HTTP/1.1", "Host: h", "X-A: a\x7f")},
	{"vertical tab in value", head("GET / HTTP/1.1", "Host: h", "X-A: \va")},
	{"form feed in value", head("GET / HTTP/1.1", "Host: h", "X-A: a\f")},
	{"too many fields", head(append([]string{"GET / HTTP/1.1", "Host: h"}, manyFields(MaxFields)...)...)},
}

func TestParseRequestNotSimple(t *testing.T) {
	for _, tc := range notSimpleRequests {
		t.Run(tc.name, func(t *testing.T) {
			var h Head
			if n, res := ParseRequest([]byte(tc.in), &h); res != NotSimple {
				t.Errorf("ParseRequest(%q) = %d, %v; want not simple", tc.in, n, res)
			}
		})
	}
}

func TestParseRequestIncomplete(t *testing.T) {
	for _, tc := range simpleRequests {
		for i := range len(tc.in) {
			var h Head
			if n, res := ParseRequest([]byte(tc.in[:i]), &h); res != Incomplete || n != 0 {
				t.Fatalf("%s: ParseRequest(%q) = %d, %v; want incomplete", tc.name, tc.in[:i], n, res)
			}
		}
	}
	// A bare LF is reported at once, without waiting for the head's end.
	for _, in := range []string{"\n", "GET / HTTP/1.1\n", "GET / HTTP/1.1\r\nHost: h\n", "GET / HTTP/1.1\r\nHost: h\r\n\n"} {
		var h Head
		if _, res := ParseRequest([]byte(in), &h); res != NotSimple {
			t.Errorf("ParseRequest(%q) = %v; want not simple", in, res)
		}
	}
	// Partial heads that are not (yet) wrong are incomplete, even odd ones.
	for _, in := range []string{"", "G", "\r", "\r\n", "GET / HTTP/1.1\r", "GET / HTTP/1.1\r\nHost: h\r\n\r", "GARBAGE \x00\r\n"} {
		var h Head
		if _, res := ParseRequest([]byte(in), &h); res != Incomplete {
			t.Errorf("ParseRequest(%q) = %v; want incomplete", in, res)
		}
	}
}

func TestHeadEnd(t *testing.T) {
	for in, want := range map[string]int{
		"":                 -1,
		"\r\n\r\n":         4,
		"a\r\n\r\nb":       5,
		"a\n\nb":           -1,
		"a\r\n\nb\r\n\r\n": 9,
	} {
		if got := HeadEnd([]byte(in)); got != want {
			t.Errorf("HeadEnd(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestSimpleRequestsServedByNetHTTP checks the contract end to end: a
// net/http server (over an in-memory pipe) serves every simple request
// with the method, target, host and fields ParseRequest found.
func TestSimpleRequestsServedByNetHTTP(t *testing.T) {
	type seen struct {
		method, uri, host string
		header            http.Header
		body              string
	}
	got := make(chan seen, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			got <- seen{r.Method, r.RequestURI, r.Host, r.Header, string(body)}
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	go srv.Serve(ln)
	defer srv.Close()

	for _, tc := range simpleRequests {
		if tc.method == "CONNECT" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			var h Head
			n, res := ParseRequest([]byte(tc.in), &h)
			if res != Complete {
				t.Fatal(res)
			}
			body := strings.Repeat("b", int(max(h.ContentLength, 0)))
			client, server := net.Pipe()
			defer client.Close()
			ln.conns <- server
			client.SetDeadline(time.Now().Add(5 * time.Second))
			go client.Write([]byte(tc.in[:n] + body))
			resp, err := http.ReadResponse(bufio.NewReader(client), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("net/http answered %s", resp.Status)
			}
			s := <-got
			if s.method != string(h.Method) || s.uri != string(h.Target) || s.host != string(h.Host) || s.body != body {
				t.Errorf("net/http saw %s %s host %s body %q", s.method, s.uri, s.host, s.body)
			}
			for _, f := range h.Fields {
				if f.Hop {
					continue
				}
				if !contains(s.header.Values(string(f.Name)), string(f.Value)) {
					t.Errorf("net/http has %s: %q, want %q", f.Name, s.header.Values(string(f.Name)), f.Value)
				}
			}
		})
	}
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// pipeListener hands net.Pipe connections to an http.Server.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// Responses.

func TestParseResponse(t *testing.T) {
	type want struct {
		status, minor int
		cl            int64
		chunked       bool
		close         bool
		date          bool
		hop           []string
		kept          []string
	}
	for _, tc := range []struct {
		name string
		in   string
		want want
	}{
		{"content-length", head("HTTP/1.1 200 OK", "Content-Type: text/plain", "Content-Length: 5"),
			want{status: 200, minor: 1, cl: 5, hop: []string{"content-length"}, kept: []string{"content-type"}}},
		{"no reason", head("HTTP/1.1 404", "Content-Length: 0"),
			want{status: 404, minor: 1, cl: 0, hop: []string{"content-length"}}},
		{"empty reason", head("HTTP/1.1 500 ", "Content-Length: 0"),
			want{status: 500, minor: 1, cl: 0, hop: []string{"content-length"}}},
		{"odd reason", head("HTTP/1.1 299 Whatever\tyou like: \x80\xff", "X: y"),
			want{status: 299, minor: 1, cl: -1, kept: []string{"x"}}},
		{"chunked", head("HTTP/1.1 200 OK", "Transfer-Encoding: Chunked", "Trailer: X-Sum"),
			want{status: 200, minor: 1, cl: -1, chunked: true, hop: []string{"transfer-encoding"}, kept: []string{"trailer"}}},
		{"until close", head("HTTP/1.1 200 OK", "X: y"),
			want{status: 200, minor: 1, cl: -1, kept: []string{"x"}}},
		{"HTTP/1.0", head("HTTP/1.0 200 OK", "Content-Length: 2"),
			want{status: 200, minor: 0, cl: 2, close: true, hop: []string{"content-length"}}},
		{"HTTP/1.0 keep-alive", head("HTTP/1.0 200 OK", "Connection: keep-alive", "Content-Length: 2"),
			want{status: 200, minor: 0, cl: 2, close: true, hop: []string{"connection", "content-length"}}},
		{"connection close", head("HTTP/1.1 200 OK", "Connection: close", "Content-Length: 2"),
			want{status: 200, minor: 1, cl: 2, close: true, hop: []string{"connection", "content-length"}}},
		{"connection names fields", head("HTTP/1.1 200 OK", "X-A: 1", "Connection: x-a, x-b", "X-B: 2", "X-C: 3"),
			want{status: 200, minor: 1, cl: -1, hop: []string{"x-a", "connection", "x-b"}, kept: []string{"x-c"}}},
		{"hop-by-hop", head("HTTP/1.1 200 OK", "Keep-Alive: timeout=5", "Proxy-Connection: x", "Proxy-Authenticate: Basic", "Upgrade: h2c", "TE: x", "Server: s"),
			want{status: 200, minor: 1, cl: -1, hop: []string{"keep-alive", "proxy-connection", "proxy-authenticate", "upgrade", "te"}, kept: []string{"server"}}},
		{"date", head("HTTP/1.1 204 No Content", "date: Mon, 02 Jan 2006 15:04:05 GMT"),
			want{status: 204, minor: 1, cl: -1, date: true, kept: []string{"date"}}},
		{"request-only names are plain", head("HTTP/1.1 200 OK", "Host: h", "Expect: x", "X-Forwarded-For: 1"),
			want{status: 200, minor: 1, cl: -1, kept: []string{"host", "expect", "x-forwarded-for"}}},
		{"999", head("HTTP/1.1 999 Odd", "X: y"),
			want{status: 999, minor: 1, cl: -1, kept: []string{"x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.in + "body")
			var h Head
			n, res := ParseResponse(b, &h)
			if res != Complete || n != len(tc.in) {
				t.Fatalf("ParseResponse = %d, %v; want %d, complete", n, res, len(tc.in))
			}
			w := tc.want
			if h.Status != w.status || h.Minor != w.minor || h.ContentLength != w.cl || h.Chunked != w.chunked || h.Close != w.close || h.HasDate != w.date {
				t.Errorf("got status %d minor %d cl %d chunked %v close %v date %v; want %+v", h.Status, h.Minor, h.ContentLength, h.Chunked, h.Close, h.HasDate, w)
			}
			var hop, kept []string
			for _, f := range h.Fields {
				if f.Hop {
					hop = append(hop, strings.ToLower(string(f.Name)))
				} else {
					kept = append(kept, strings.ToLower(string(f.Name)))
				}
			}
			if fmt.Sprint(hop) != fmt.Sprint(w.hop) || fmt.Sprint(kept) != fmt.Sprint(w.kept) {
				t.Errorf("hop %q kept %q; want %q, %q", hop, kept, w.hop, w.kept)
			}
			// net/http reads the same head the same way.
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), &http.Request{Method: "GET"})
			if err != nil {
				t.Fatalf("net/http: %v", err)
			}
			// Close may be stricter (HTTP/1.0 keep-alive is not kept); a
			// body to the close is net/http's Close, the caller's framing.
			delimited := h.ContentLength >= 0 || h.Chunked
			if resp.StatusCode != h.Status || resp.ProtoMinor != h.Minor || resp.Close && !h.Close && delimited {
				t.Errorf("net/http: status %d minor %d close %v", resp.StatusCode, resp.ProtoMinor, resp.Close)
			}
			if chunked := len(resp.TransferEncoding) == 1; chunked != h.Chunked {
				t.Errorf("net/http: transfer-encoding %q", resp.TransferEncoding)
			}
			if h.ContentLength >= 0 && resp.ContentLength != h.ContentLength && !BodyLess([]byte("GET"), h.Status) {
				t.Errorf("net/http: content-length %d", resp.ContentLength)
			}
		})
	}
}

func TestParseResponseNotSimple(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"CL and chunked", head("HTTP/1.1 200 OK", "Content-Length: 5", "Transfer-Encoding: chunked")},
		{"chunked and CL", head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked", "Content-Length: 5")},
		{"chunked twice", head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked")},
		{"gzip chunked", head("HTTP/1.1 200 OK", "Transfer-Encoding: gzip, chunked")},
		{"identity", head("HTTP/1.1 200 OK", "Transfer-Encoding: identity")},
		{"HTTP/1.0 chunked", head("HTTP/1.0 200 OK", "Transfer-Encoding: chunked")},
		{"duplicate CL", head("HTTP/1.1 200 OK", "Content-Length: 5", "Content-Length: 5")},
		{"bad CL", head("HTTP/1.1 200 OK", "Content-Length: 5x")},
		{"100 continue", head("HTTP/1.1 100 Continue")},
		{"101 switching", head("HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: upgrade")},
		{"103 early hints", head("HTTP/1.1 103 Early Hints", "Link: </a>")},
		{"connection upgrade", head("HTTP/1.1 200 OK", "Connection: upgrade")},
		{"status 099", head("HTTP/1.1 099 X")},
		{"status 000", head("HTTP/1.1 000 X")},
		{"two-digit status", head("HTTP/1.1 20 OK")},
		{"four-digit status", head("HTTP/1.1 2000 OK")},
		{"status no separator", head("HTTP/1.1 200OK")},
		{"non-digit status", head("HTTP/1.1 2x0 OK")},
		{"signed status", head("HTTP/1.1 +20 OK")},
		{"HTTP/2.0", head("HTTP/2.0 200 OK")},
		{"HTTP/1.2", head("HTTP/1.2 200 OK")},
		{"HTTP/1.10", head("HTTP/1.10 200 OK")},
		{"lower-case version", head("http/1.1 200 OK")},
		{"double space", head("HTTP/1.1  200 OK")},
		{"tab separator", head("HTTP/1.1\t200 OK")},
		{"short", head("HTTP/1.1")},
		{"empty status line", head("")},
		{"garbage", head("hello")},
		{"bare LF in reason", head("HTTP/1.1 200 OK\nContent-Length: 0", "Transfer-Encoding: chunked")},
		{"bare LF ends reason", head("HTTP/1.0 200 \n0")},
		{"CTL in reason", head("HTTP/1.1 200 O\x01K")},
		{"CR in reason", head("HTTP/1.1 200 O\rK")},
		{"obs-fold", head("HTTP/1.1 200 OK", "X: a", " b")},
		{"bare LF field", "HTTP/1.1 200 OK\r\nX: a\nY: b\r\n\r\n"},
		{"space before colon", head("HTTP/1.1 200 OK", "X : a")},
		{"CTL in value", head("HTTP/1.1 200 OK", "X: a\x00")},
		{"too many fields", head(append([]string{"HTTP/1.1 200 OK"}, manyFields(MaxFields+1)...)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Head
			if n, res := ParseResponse([]byte(tc.in), &h); res != NotSimple {
				t.Errorf("ParseResponse(%q) = %d, %v; want not simple", tc.in, n, res)
			}
		})
	}
	in := head("HTTP/1.1 200 OK", "Content-Length: 5")
	for i := range len(in) {
		var h Head
		if _, res := ParseResponse([]byte(in[:i]), &h); res != Incomplete {
			t.Errorf("ParseResponse(%q) = %v; want incomplete", in[:i], res)
		}
	}
}

func TestBodyLess(t *testing.T) {
	for _, tc := range []struct {
		method string
		status int
		want   bool
	}{
		{"GET", 200, false}, {"HEAD", 200, true}, {"GET", 204, true}, {"GET", 304, true},
		{"GET", 100, true}, {"GET", 199, true}, {"POST", 201, false}, {"head", 200, false},
	} {
		if got := BodyLess([]byte(tc.method), tc.status); got != tc.want {
			t.Errorf("BodyLess(%s, %d) = %v", tc.method, tc.status, got)
		}
	}
}

func TestParseAllocs(t *testing.T) {
	req := []byte(simpleRequests[len(simpleRequests)-2].in)
	resp := []byte(head("HTTP/1.1 200 OK", "Content-Length: 5", "Connection: x-a", "X-A: 1"))
	var h Head
	if a := testing.AllocsPerRun(100, func() {
		ParseRequest(req, &h)
		ParseResponse(resp, &h)
	}); a != 0 {
		t.Errorf("%v allocations per parse", a)
	}
}

func BenchmarkParseRequest(b *testing.B) {
	req := []byte(head("GET /api/v1/items?limit=10 HTTP/1.1", "Host: api.example.com", "User-Agent: bench/1.0", "Accept: application/json", "Accept-Encoding: gzip", "X-Forwarded-For: 10.0.0.1", "Connection: keep-alive"))
	var h Head
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		if _, res := ParseRequest(req, &h); res != Complete {
			b.Fatal(res)
		}
	}
}
