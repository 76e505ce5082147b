package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/netip"
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

// FuzzHeaderHygiene checks the forwarding rules on arbitrary header
// values: no hop-by-hop header and nothing named in Connection survives
// (but TE: trailers, and the upgrade pair when upgrading), and an
// untrusted client never sets X-Forwarded-*.
func FuzzHeaderHygiene(f *testing.F) {
	f.Add("keep-alive, X-Secret", "trailers", "1.2.3.4", "X-Secret", "websocket", "shop.test")
	f.Add("Upgrade", "gzip", "", "Upgrade", "h2c", "")
	f.Add(",,close ,  Te", "trailers, deflate", "a, b", "Te", "", "x")
	f.Fuzz(func(t *testing.T, connection, te, xff, extra, upgrade, host string) {
		h := http.Header{
			"Connection": {connection}, "Te": {te}, "Keep-Alive": {"timeout=5"},
			"Transfer-Encoding": {"chunked"}, "Proxy-Connection": {"keep-alive"},
			"X-Forwarded-For": {xff}, "X-Forwarded-Host": {"evil.test"}, "X-Forwarded-Proto": {"https"},
		}
		if upgrade != "" {
			h["Upgrade"] = []string{upgrade}
		}
		h.Add(extra, "v")
		up := upgradeType(h)
		named := strings.Split(connection, ",")
		removeHopHeaders(h, up)
		for _, k := range hopHeaders {
			v, ok := h[k]
			switch {
			case !ok:
			case k == "Te" && len(v) == 1 && v[0] == "trailers":
			case up != "" && k == "Connection" && len(v) == 1 && v[0] == "Upgrade":
			case up != "" && k == "Upgrade" && len(v) == 1 && v[0] == up:
			default:
				t.Fatalf("hop-by-hop %s: %q survived (upgrade %q)", k, v, up)
			}
		}
		for _, n := range named {
			n = strings.TrimSpace(n)
			if n == "" || strings.EqualFold(n, "upgrade") || (up != "" && strings.EqualFold(n, "connection")) || strings.EqualFold(n, "te") {
				continue
			}
			if _, ok := h[textproto.CanonicalMIMEHeaderKey(n)]; ok && validToken(n) {
				t.Fatalf("%q named in Connection survived: %v", n, h)
			}
		}

		untrusted := h.Clone()
		Forwarding{}.Apply(untrusted, "192.0.2.7:5555", host, false)
		if got := untrusted["X-Forwarded-For"]; len(got) != 1 || got[0] != "192.0.2.7" {
			t.Fatalf("untrusted client set X-Forwarded-For: %q", got)
		}
		if untrusted.Get("X-Forwarded-Proto") != "http" || untrusted.Get("X-Forwarded-Host") != host {
			t.Fatalf("untrusted client set X-Forwarded-Proto/Host: %v", untrusted)
		}
		trusted := h.Clone()
		Forwarding{Trusted: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}.Apply(trusted, "192.0.2.7:5555", host, false)
		got := trusted.Get("X-Forwarded-For")
		if !strings.HasSuffix(got, "192.0.2.7") {
			t.Fatalf("trusted proxy: X-Forwarded-For %q does not end with the peer", got)
		}
		if strings.TrimSpace(xff) == "" && got != "192.0.2.7" {
			t.Fatalf("trusted proxy sent an empty X-Forwarded-For %q: got %q, want only the peer", xff, got)
		}
	})
}

// validToken reports whether s is an HTTP token (a header name that can be
// named in Connection).
func validToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return s != ""
}
