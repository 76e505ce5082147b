package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// Fuzz targets. Run each for a while, e.g.
//
//	go test ./internal/h1 -run '^$' -fuzz FuzzRequestAgreesWithNetHTTP -fuzztime 60s
//
// A crasher the fuzzer finds is saved under testdata/fuzz/<Target>/ and
// replays as a regression test in every ordinary `go test` run.

// FuzzRequestAgreesWithNetHTTP checks the package's contract: a request
// head ParseRequest calls simple is one net/http's server accepts, with the
// same method, target, host, framing and fields.
func FuzzRequestAgreesWithNetHTTP(f *testing.F) {
	for _, tc := range simpleRequests {
		f.Add([]byte(tc.in))
		f.Add([]byte(tc.in + "body"))
	}
	for _, tc := range notSimpleRequests {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte("GET /a?b=%zz&c=<>\"{}|\\^` HTTP/1.1\r\nHost: h\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\nConnection: close, pragma\r\n\r\n"))
	f.Add([]byte("CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Head
		n, res := ParseRequest(b, &h)
		switch res {
		case Incomplete:
			if n != 0 || HeadEnd(b) >= 0 {
				t.Fatalf("incomplete with n %d, HeadEnd %d", n, HeadEnd(b))
			}
			return
		case NotSimple:
			return
		}
		if n != HeadEnd(b) {
			t.Fatalf("n = %d, HeadEnd = %d", n, HeadEnd(b))
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:n])))
		if err != nil {
			t.Fatalf("simple, but net/http: %v", err)
		}
		if req.Method != string(h.Method) || req.RequestURI != string(h.Target) || req.Host != string(h.Host) {
			t.Fatalf("net/http: %q %q host %q; h1: %q %q host %q", req.Method, req.RequestURI, req.Host, h.Method, h.Target, h.Host)
		}
		if req.ProtoMajor != 1 || req.ProtoMinor != 1 {
			t.Fatalf("net/http: %s", req.Proto)
		}
		// The gateway routes on Path; net/http's handlers see URL.Path.
		if req.URL.Path != string(h.Path) || req.URL.Host != "" {
			t.Fatalf("net/http: path %q host %q; h1: path %q", req.URL.Path, req.URL.Host, h.Path)
		}
		if q := bytes.IndexByte(h.Target, '?'); q >= 0 && req.URL.RawQuery != string(h.Target[q+1:]) {
			t.Fatalf("net/http: query %q; h1 target %q", req.URL.RawQuery, h.Target)
		}
		if cl := max(h.ContentLength, 0); req.ContentLength != cl {
			t.Fatalf("net/http: Content-Length %d; h1: %d", req.ContentLength, h.ContentLength)
		}
		if req.Close != h.Close {
			t.Fatalf("net/http: Close %v; h1: %v", req.Close, h.Close)
		}
		if len(req.TransferEncoding) > 0 || req.Header["Transfer-Encoding"] != nil {
			t.Fatalf("simple with Transfer-Encoding %q", req.TransferEncoding)
		}
		if req.Header["Expect"] != nil || req.Header["Upgrade"] != nil ||
			httpguts.HeaderValuesContainsToken(req.Header["Connection"], "upgrade") {
			t.Fatalf("simple with Expect or Upgrade: %q", req.Header)
		}
		// What net/http's server checks after ReadRequest (which refuses
		// two Host fields and takes the one out of Header).
		if req.Host == "" || !httpguts.ValidHostHeader(req.Host) {
			t.Fatalf("net/http's server refuses Host %q", req.Host)
		}
		for k, vs := range req.Header {
			if !httpguts.ValidHeaderFieldName(k) {
				t.Fatalf("net/http's server refuses field name %q", k)
			}
			for _, v := range vs {
				if !httpguts.ValidHeaderFieldValue(v) {
					t.Fatalf("net/http's server refuses %s: %q", k, v)
				}
			}
		}
		// Every forwarded field, with its value, in order.
		kept := keptFields(&h)
		for k, vs := range kept {
			if !slices.Equal(req.Header[k], vs) {
				t.Fatalf("net/http: %s %q; h1 forwards %q", k, req.Header[k], vs)
			}
		}
		checkHead(t, &h)
	})
}

// checkHead checks the invariants of a Complete request head.
func checkHead(t *testing.T, h *Head) {
	if len(h.Fields) > MaxFields {
		t.Fatalf("%d fields", len(h.Fields))
	}
	first := map[string]int{"x-forwarded-for": -1, "x-forwarded-proto": -1, "x-forwarded-host": -1}
	hop := map[string]bool{}
	for i, f := range h.Fields {
		name := strings.ToLower(string(f.Name))
		if j, ok := first[name]; ok && j < 0 {
			first[name] = i
		}
		if v := f.Value; len(v) > 0 && (v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
			t.Fatalf("value %q not trimmed", v)
		}
		if prev, ok := hop[name]; ok && prev != f.Hop {
			t.Fatalf("fields named %s differ in Hop", name)
		}
		hop[name] = f.Hop
		switch name {
		case "host", "content-length", "connection", "te", "trailer", "keep-alive", "proxy-connection",
			"proxy-authorization", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host":
			if !f.Hop {
				t.Fatalf("%s not hop-by-hop", f.Name)
			}
		}
	}
	if h.XFF != first["x-forwarded-for"] || h.XFP != first["x-forwarded-proto"] || h.XFH != first["x-forwarded-host"] {
		t.Fatalf("XFF, XFP, XFH = %d, %d, %d; want %v", h.XFF, h.XFP, h.XFH, first)
	}
}

// FuzzChunksSplit checks Scan does not depend on how the bytes arrive: the
// input whole and cut in up to three pieces give the same count, done and
// error. A body Scan completes is one net/http reads to the same end.
func FuzzChunksSplit(f *testing.F) {
	for _, tc := range validChunked {
		if len(tc.body) < 1024 {
			f.Add([]byte(tc.body+after), uint16(len(tc.body)/2), uint16(len(tc.body)-1))
		}
	}
	for _, tc := range malformedChunked {
		if len(tc.body) < 1024 {
			f.Add([]byte(tc.body), uint16(1), uint16(len(tc.body)/2))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, s1, s2 uint16) {
		n, done, err := scanSplit(b, nil)
		if n > len(b) || (done && err != nil) || (err != nil && err != ErrChunked) {
			t.Fatalf("whole: %d of %d, %v, %v", n, len(b), done, err)
		}
		if !done && err == nil && n != len(b) {
			t.Fatalf("whole: %d of %d without done or error", n, len(b))
		}
		a, c := int(s1)%(len(b)+1), int(s2)%(len(b)+1)
		if a > c {
			a, c = c, a
		}
		n2, done2, err2 := scanSplit(b, []int{a, c})
		if n2 != n || done2 != done || err2 != err {
			t.Fatalf("split at %d, %d: %d, %v, %v; whole: %d, %v, %v", a, c, n2, done2, err2, n, done, err)
		}
		if !done {
			return
		}
		// net/http reads the same body and stops where Scan did.
		src := bytes.NewReader(b[:n])
		// (A buffer large enough for Scan's trailer bound: net/http's
		// own bound is its reader's size.)
		br := bufio.NewReaderSize(io.MultiReader(strings.NewReader("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), src), 2*maxTrailers)
		resp, rerr := http.ReadResponse(br, nil)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if _, rerr = io.Copy(io.Discard, resp.Body); rerr != nil {
			t.Fatalf("Scan done at %d, net/http: %v", n, rerr)
		}
		if left := br.Buffered() + src.Len(); left != 0 {
			t.Fatalf("Scan done at %d, net/http left %d bytes", n, left)
		}
	})
}

// FuzzResponseAgreesWithNetHTTP checks a response head ParseResponse calls
// simple is one http.ReadResponse reads with the same status and framing,
// so the fast path and the general one relay the same body.
func FuzzResponseAgreesWithNetHTTP(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 200 OK\r\nConnection: keep-alive, x-a\r\nX-A: 1\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 204 No Content\r\nContent-Length: 7\r\nDate: x\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Head
		n, res := ParseResponse(b, &h)
		if res != Complete {
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b[:n])), &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("simple, but net/http: %v", err)
		}
		if resp.StatusCode != h.Status || resp.ProtoMajor != 1 || resp.ProtoMinor != h.Minor {
			t.Fatalf("net/http: %s %d; h1: %d, minor %d", resp.Proto, resp.StatusCode, h.Status, h.Minor)
		}
		if chunked := slices.Equal(resp.TransferEncoding, []string{"chunked"}); chunked != h.Chunked && !BodyLess([]byte("GET"), h.Status) {
			t.Fatalf("net/http: Transfer-Encoding %q; h1 chunked %v", resp.TransferEncoding, h.Chunked)
		}
		if !BodyLess([]byte("GET"), h.Status) && !h.Chunked && resp.ContentLength != h.ContentLength {
			t.Fatalf("net/http: Content-Length %d; h1: %d", resp.ContentLength, h.ContentLength)
		}
		if resp.Close && !h.Close && (h.ContentLength >= 0 || h.Chunked) {
			t.Fatal("net/http closes after the response, h1 would reuse the connection")
		}
		kept := keptFields(&h)
		for k, vs := range kept {
			if k == "Trailer" && h.Chunked {
				continue // net/http moves it into resp.Trailer
			}
			if !slices.Equal(resp.Header[k], vs) {
				t.Fatalf("net/http: %s %q; h1 forwards %q", k, resp.Header[k], vs)
			}
		}
	})
}

// keptFields is every forwarded (non-hop) field of h, by canonical name, in
// order.
func keptFields(h *Head) map[string][]string {
	kept := map[string][]string{}
	for _, f := range h.Fields {
		if !f.Hop {
			k := textproto.CanonicalMIMEHeaderKey(string(f.Name))
			kept[k] = append(kept[k], string(f.Value))
		}
	}
	return kept
}

// feedGuard scans b through g in two reads split at split (mod len(b)+1),
// the way bytes arrive from a socket, and returns the first refusal (-1:
// none).
func feedGuard(g *Guard, b []byte, split int) int64 {
	at := split % (len(b) + 1)
	for _, part := range [][]byte{b[:at], b[at:]} {
		if bad, refused := g.Scan(part); refused {
			return bad
		}
	}
	return -1
}

// goBoundaries parses data as net/http's server does (a 4 KiB bufio
// reader, bodies read to the end) and returns where each request ends,
// whether the handler would see it (net/http answers OPTIONS * itself),
// and whether the guard must step aside after it (HTTP/2 preface, Upgrade).
func goBoundaries(data []byte) (ends []int, counted, aside []bool) {
	src := bytes.NewReader(data)
	br := bufio.NewReaderSize(src, 4096)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, err = io.Copy(io.Discard, req.Body)
		if err != nil {
			return
		}
		ends = append(ends, len(data)-src.Len()-br.Buffered())
		counted = append(counted, !(req.Method == http.MethodOptions && req.RequestURI == "*"))
		stop := req.Method == "PRI" || len(req.Header["Upgrade"]) > 0
		aside = append(aside, stop)
		if stop {
			return
		}
	}
}

// FuzzGuardFollowsNetHTTP checks Guard's contract against net/http on
// arbitrary bytes: wherever net/http finds a request's end, the guard is
// at the start of the next head and has counted the same requests, unless
// it refused one at or before that point (then the connection ends there).
// It must never panic.
func FuzzGuardFollowsNetHTTP(f *testing.F) {
	for _, c := range guardRefused {
		f.Add([]byte(c.raw), uint16(17))
		f.Add([]byte(cleanGet+c.raw), uint16(40))
	}
	for _, c := range guardServed {
		f.Add([]byte(c.raw), uint16(40))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		// net/http reads what Filter passes on: without the empty line
		// the guard ignores before a request line.
		var fg Guard
		var passed []byte
		at := int(split) % (len(data) + 1)
		for _, part := range [][]byte{bytes.Clone(data[:at]), bytes.Clone(data[at:])} {
			n, _, _ := fg.Filter(part)
			passed = append(passed, part[:n]...)
		}
		data = passed
		ends, counted, aside := goBoundaries(data)
		var g Guard
		bad := int64(-1)
		pos := 0
		var heads int64
		for i, end := range ends {
			if b := feedGuard(&g, data[pos:end], int(split)); bad < 0 {
				bad = b
			}
			pos = end
			if bad >= 0 && bad <= heads {
				return // refused here: net/http never gets further on this connection
			}
			if counted[i] {
				heads++
			}
			if aside[i] {
				return
			}
			if g.state != gLine || g.n != 0 || g.lines != 0 || g.heads != heads {
				t.Fatalf("net/http ends request %d at byte %d; the guard is in state %d, line %d (%d bytes), %d heads, want a fresh head after %d\n%q",
					i, end, g.state, g.lines, g.n, g.heads, heads, data)
			}
		}
		feedGuard(&g, data[pos:], int(split)) // the rest must not panic either
	})
}

// FuzzGuardAcceptsWellFormedRequests writes requests with net/http's own
// client (fuzzed method, target, one header, body, chunked or not),
// pipelines a few, and checks the guard refuses none of them and counts
// every one, however the bytes are split.
func FuzzGuardAcceptsWellFormedRequests(f *testing.F) {
	f.Add("POST", "/pay", "X-Id", "42", []byte("hello"), true, uint8(3), uint16(9))
	f.Add("GET", "/a b?c=d", "Accept", "*/*", []byte(nil), false, uint8(2), uint16(0))
	f.Add("PUT", "/", "X-Long", strings.Repeat("v", 300), bytes.Repeat([]byte("x"), 5000), true, uint8(2), uint16(4100))
	f.Fuzz(func(t *testing.T, method, path, name, value string, body []byte, chunked bool, n uint8, split uint16) {
		key := textproto.CanonicalMIMEHeaderKey(name)
		switch key {
		case "Content-Length", "Transfer-Encoding", "Upgrade", "Host", "Trailer":
			return // framing headers are the other targets' business
		}
		req := &http.Request{
			Method: method, URL: &url.URL{Path: path}, Host: "gw.test",
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{key: {value}},
		}
		if len(body) > 0 || chunked {
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
			if chunked {
				req.ContentLength = -1
				req.TransferEncoding = []string{"chunked"}
			}
		}
		var one bytes.Buffer
		if err := req.Write(&one); err != nil {
			return
		}
		if ends, _, aside := goBoundaries(one.Bytes()); len(ends) != 1 || ends[0] != one.Len() || aside[0] {
			return // net/http itself would not serve it as one plain request
		}
		count := int(n%4) + 1
		stream := bytes.Repeat(one.Bytes(), count)
		var g Guard
		if bad := feedGuard(&g, stream, int(split)); bad >= 0 {
			t.Fatalf("refused request %d of a well-formed stream:\n%q", bad, stream)
		}
		if want := int64(count); g.heads != want || g.state != gLine || g.n != 0 {
			if req.Method == http.MethodOptions && req.URL.RequestURI() == "*" {
				return
			}
			t.Fatalf("after %d well-formed requests the guard counted %d, state %d:\n%q", count, g.heads, g.state, stream)
		}
	})
}
