package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
)

// Fuzz targets for header handling. CI runs each briefly, e.g.
//
//	go test ./internal/gateway -run '^$' -fuzz FuzzFramingFollowsNetHTTP -fuzztime 10s
//
// A crash the fuzzer finds is saved under testdata/fuzz/<Target>/ and
// replays as a regression test in every ordinary `go test` run.

// feed scans b through f in two reads split at split (mod len(b)+1), the
// way bytes arrive from a socket, and returns the first refusal.
func feed(f *framer, b []byte, split int) int64 {
	if len(b) == 0 {
		return noRequest
	}
	at := split % (len(b) + 1)
	if bad := f.scan(b[:at]); bad != noRequest {
		return bad
	}
	if f.state == stPass {
		return noRequest
	}
	return f.scan(b[at:])
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

// FuzzFramingFollowsNetHTTP checks the framing guard against net/http on
// arbitrary bytes: wherever net/http finds a request's end, the guard is at
// the start of the next head and has counted the same requests, unless it
// refused one at or before that point (then the connection ends there).
// It must never panic.
func FuzzFramingFollowsNetHTTP(f *testing.F) {
	for _, set := range [][]hostileCase{smugglingCases, requestLineCases} {
		for _, c := range set {
			f.Add([]byte(c.raw), uint16(17))
		}
	}
	for _, s := range []string{
		"POST /a HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nT: 1\r\n\r\nGET /b HTTP/1.1\r\nHost: g\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: g\r\n\r\nPUT /c HTTP/1.1\r\nHost: g\r\nContent-Length: 3\r\n\r\nabcGET /d HTTP/1.0\nHost: g\n\n",
		"GET /ws HTTP/1.1\r\nHost: g\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x05hello",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
		"POST /e HTTP/1.1\r\nHost: g\r\nContent-Length: 2" + strings.Repeat(" ", 200) + "\r\n\r\nok",
		"POST /f HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n2" + strings.Repeat(" ", 200) + "\r\nok\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s), uint16(40))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		ends, counted, aside := goBoundaries(data)
		var fr framer
		bad := noRequest
		pos := 0
		var heads int64
		for i, end := range ends {
			if b := feed(&fr, data[pos:end], int(split)); bad == noRequest {
				bad = b
			}
			pos = end
			if bad != noRequest && bad <= heads {
				return // refused here: net/http never gets further on this connection
			}
			if counted[i] {
				heads++
			}
			if aside[i] {
				return
			}
			if fr.state != stLine || fr.n != 0 || fr.lines != 0 || fr.heads != heads {
				t.Fatalf("net/http ends request %d at byte %d; the guard is in state %d, line %d (%d bytes), %d heads, want a fresh head after %d\n%q",
					i, end, fr.state, fr.lines, fr.n, fr.heads, heads, data)
			}
		}
		feed(&fr, data[pos:], int(split)) // the rest must not panic either
	})
}

// FuzzFramingAcceptsWellFormedRequests writes requests with net/http's own
// client (fuzzed method, target, one header, body, chunked or not),
// pipelines a few, and checks the guard refuses none of them and counts
// every one, however the bytes are split.
func FuzzFramingAcceptsWellFormedRequests(f *testing.F) {
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
		var fr framer
		if bad := feed(&fr, stream, int(split)); bad != noRequest {
			t.Fatalf("refused request %d of a well-formed stream:\n%q", bad, stream)
		}
		if want := int64(count); fr.heads != want || fr.state != stLine || fr.n != 0 {
			if req.Method == http.MethodOptions && req.URL.RequestURI() == "*" {
				return
			}
			t.Fatalf("after %d well-formed requests the guard counted %d, state %d:\n%q", count, fr.heads, fr.state, stream)
		}
	})
}
