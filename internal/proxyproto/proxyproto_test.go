package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	src4 = netip.MustParseAddrPort("192.0.2.7:51000")
	dst4 = netip.MustParseAddrPort("198.51.100.1:443")
	src6 = netip.MustParseAddrPort("[2001:db8::7]:51000")
	dst6 = netip.MustParseAddrPort("[2001:db8::1]:443")
)

// onlyReader hides bytes.Reader's other methods: Read must not read past
// the header through any of them.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestReadExact(t *testing.T) {
	tlv := []byte{0x04, 0x00, 0x03, 'a', 'b', 'c'} // a NOOP TLV, skipped
	for _, tc := range []struct {
		name string
		in   []byte
		want Header
	}{
		{"v1 tcp4", AppendV1(nil, Header{Source: src4, Dest: dst4}), Header{Version: 1, Source: src4, Dest: dst4}},
		{"v1 tcp6", AppendV1(nil, Header{Source: src6, Dest: dst6}), Header{Version: 1, Source: src6, Dest: dst6}},
		{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), Header{Version: 1, Local: true}},
		{"v1 unknown with addresses", []byte("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"), Header{Version: 1, Local: true}},
		{"v2 tcp4", AppendV2(nil, Header{Source: src4, Dest: dst4}, nil), Header{Version: 2, Source: src4, Dest: dst4}},
		{"v2 tcp6", AppendV2(nil, Header{Source: src6, Dest: dst6}, nil), Header{Version: 2, Source: src6, Dest: dst6}},
		{"v2 tcp4 with tlv", AppendV2(nil, Header{Source: src4, Dest: dst4}, tlv), Header{Version: 2, Source: src4, Dest: dst4}},
		{"v2 local", AppendV2(nil, Header{Local: true}, nil), Header{Version: 2, Local: true}},
		{"v2 udp", udpV2(), Header{Version: 2, Local: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := []byte("GET / HTTP/1.1\r\n")
			r := bytes.NewReader(append(append([]byte(nil), tc.in...), after...))
			h, err := Read(onlyReader{r})
			if err != nil {
				t.Fatalf("Read(%q) = %v", tc.in, err)
			}
			if h != tc.want {
				t.Fatalf("Read(%q) = %+v, want %+v", tc.in, h, tc.want)
			}
			rest, _ := io.ReadAll(r)
			if !bytes.Equal(rest, after) {
				t.Fatalf("left %q after the header, want %q: it read past its end", rest, after)
			}
		})
	}
}

// udpV2 is a v2 PROXY header for a UDP datagram (family INET, DGRAM).
func udpV2() []byte {
	b := AppendV2(nil, Header{Source: src4, Dest: dst4}, nil)
	b[13] = 0x12
	return b
}

func TestReadRefuses(t *testing.T) {
	v2 := AppendV2(nil, Header{Source: src4, Dest: dst4}, nil)
	long := append([]byte(nil), sigV2...)
	long = append(long, 0x21, 0x11)
	long = binary.BigEndian.AppendUint16(long, MaxV2) // 16+MaxV2 > MaxV2
	badCmd := append([]byte(nil), v2...)
	badCmd[12] = 0x2f
	badVer := append([]byte(nil), v2...)
	badVer[12] = 0x11
	short4 := append([]byte(nil), sigV2...)
	short4 = append(short4, 0x21, 0x11, 0, 4, 1, 2, 3, 4)
	for _, tc := range []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", ErrNoHeader},
		{"plain http", "GET / HTTP/1.1\r\n\r\n", ErrNoHeader},
		{"tls hello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", ErrNoHeader},
		{"v2 signature broken late", "\r\n\r\n\x00\r\nQUIX\n\x21\x11\x00\x00", ErrNoHeader},
		{"v1 truncated", "PROXY TCP4 192.0.2.7 198.5", ErrMalformed},
		{"v1 no crlf", "PROXY TCP4 192.0.2.7 198.51.100.1 1 2\n", ErrMalformed},
		{"v1 oversize", "PROXY TCP4 " + strings.Repeat("1", 200) + "\r\n", ErrTooLong},
		{"v1 family mismatch", "PROXY TCP4 2001:db8::1 2001:db8::2 1 2\r\n", ErrMalformed},
		{"v1 tcp6 with v4", "PROXY TCP6 192.0.2.7 198.51.100.1 1 2\r\n", ErrMalformed},
		{"v1 port range", "PROXY TCP4 192.0.2.7 198.51.100.1 65536 2\r\n", ErrMalformed},
		{"v1 port sign", "PROXY TCP4 192.0.2.7 198.51.100.1 +1 2\r\n", ErrMalformed},
		{"v1 leading zero", "PROXY TCP4 192.0.2.7 198.51.100.1 01 2\r\n", ErrMalformed},
		{"v1 extra field", "PROXY TCP4 192.0.2.7 198.51.100.1 1 2 3\r\n", ErrMalformed},
		{"v1 double space", "PROXY TCP4  192.0.2.7 198.51.100.1 1 2\r\n", ErrMalformed},
		{"v1 bad family", "PROXY UDP4 192.0.2.7 198.51.100.1 1 2\r\n", ErrMalformed},
		{"v1 zone", "PROXY TCP6 fe80::1%eth0 fe80::2 1 2\r\n", ErrMalformed},
		{"v2 truncated prefix", string(v2[:14]), ErrNoHeader},
		{"v2 truncated body", string(v2[:len(v2)-3]), ErrMalformed},
		{"v2 oversize", string(long), ErrTooLong},
		{"v2 bad command", string(badCmd), ErrMalformed},
		{"v2 bad version", string(badVer), ErrMalformed},
		{"v2 tcp4 too short for addresses", string(short4), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(onlyReader{strings.NewReader(tc.in)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Read(%q) = %v, want %v", tc.in, err, tc.want)
			}
		})
	}
}

func TestParseRoundTrip(t *testing.T) {
	for _, h := range []Header{{Source: src4, Dest: dst4}, {Source: src6, Dest: dst6}} {
		h1, err := ParseV1(AppendV1(nil, h))
		if err != nil || h1.Source != h.Source || h1.Dest != h.Dest {
			t.Fatalf("v1 round trip of %+v: %+v, %v", h, h1, err)
		}
		h2, err := ParseV2(AppendV2(nil, h, nil))
		if err != nil || h2.Source != h.Source || h2.Dest != h.Dest {
			t.Fatalf("v2 round trip of %+v: %+v, %v", h, h2, err)
		}
	}
	max6 := "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	longest := "PROXY UNKNOWN " + max6 + " " + max6 + " 65535 65535\r\n"
	if len(longest) != MaxV1 {
		t.Fatalf("the specification's longest line is %d bytes, MaxV1 is %d", len(longest), MaxV1)
	}
	if _, err := Read(onlyReader{strings.NewReader(longest)}); err != nil {
		t.Fatalf("the longest v1 line: %v", err)
	}
}

// FuzzRead checks that Read never panics, never reads past what it says
// is the header, and that whatever it accepts re-encodes to the same
// addresses.
func FuzzRead(f *testing.F) {
	f.Add(AppendV1(nil, Header{Source: src4, Dest: dst4}))
	f.Add(AppendV1(nil, Header{Source: src6, Dest: dst6}))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add(AppendV2(nil, Header{Source: src4, Dest: dst4}, []byte{1, 0, 2, 'h', '2'}))
	f.Add(AppendV2(nil, Header{Source: src6, Dest: dst6}, nil))
	f.Add(AppendV2(nil, Header{Local: true}, nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		h, err := Read(onlyReader{r})
		used := len(in) - r.Len()
		if used > MaxV2 {
			t.Fatalf("read %d bytes, above MaxV2", used)
		}
		if err != nil {
			return
		}
		var again Header
		var perr error
		switch h.Version {
		case 1:
			again, perr = ParseV1(in[:used])
		case 2:
			again, perr = ParseV2(in[:used])
		default:
			t.Fatalf("version %d", h.Version)
		}
		if perr != nil || again != h {
			t.Fatalf("Read took %q as %+v; parsing those bytes alone gives %+v, %v", in[:used], h, again, perr)
		}
		if !h.Local {
			var enc []byte
			if h.Version == 1 {
				enc = AppendV1(nil, h)
			} else {
				enc = AppendV2(nil, h, nil)
			}
			back, err := Read(onlyReader{bytes.NewReader(enc)})
			if err != nil || back.Source != h.Source || back.Dest != h.Dest {
				t.Fatalf("%+v re-encoded as %q reads back as %+v, %v", h, enc, back, err)
			}
		}
	})
}

// serveOne accepts one connection from l and reports its remote address
// and the first line read after the header, or the error.
func serveOne(t *testing.T, l net.Listener) <-chan string {
	out := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			out <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		addr := c.RemoteAddr().String()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			out <- addr + " read: " + err.Error()
			return
		}
		out <- addr + " " + string(buf)
	}()
	return out
}

func listen(t *testing.T, p *Policy) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(ln, func() *Policy { return p })
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if len(b) > 0 {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestListenerTrusted(t *testing.T) {
	var refused atomic.Int32
	p := &Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Timeout: 2 * time.Second,
		Count: func(string) { refused.Add(1) }}
	l := listen(t, p)
	got := serveOne(t, l)
	dial(t, l.Addr().String(), append(AppendV2(nil, Header{Source: src4, Dest: dst4}, nil), "hello"...))
	if s := <-got; s != "192.0.2.7:51000 hello" {
		t.Fatalf("served %q, want the header's address and the bytes after it", s)
	}
	got = serveOne(t, l)
	dial(t, l.Addr().String(), append(AppendV1(nil, Header{Source: src6, Dest: dst6}), "hello"...))
	if s := <-got; s != "[2001:db8::7]:51000 hello" {
		t.Fatalf("served %q", s)
	}
	// LOCAL keeps the balancer's own address.
	got = serveOne(t, l)
	dial(t, l.Addr().String(), append(AppendV2(nil, Header{Local: true}, nil), "hello"...))
	if s := <-got; !strings.HasPrefix(s, "127.0.0.1:") || !strings.HasSuffix(s, " hello") {
		t.Fatalf("served %q, want the real peer for LOCAL", s)
	}
	// No header from a trusted source: refused.
	got = serveOne(t, l)
	dial(t, l.Addr().String(), []byte("GET / HTTP/1.1\r\n\r\n"))
	if s := <-got; !strings.Contains(s, "read:") {
		t.Fatalf("served %q, want a connection without a header refused", s)
	}
	if refused.Load() != 1 {
		t.Fatalf("counted %d refusals, want 1", refused.Load())
	}
}

func TestListenerSlowloris(t *testing.T) {
	var reasons []string
	p := &Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Timeout: 150 * time.Millisecond,
		Count: func(r string) { reasons = append(reasons, r) }}
	l := listen(t, p)
	got := serveOne(t, l)
	c := dial(t, l.Addr().String(), []byte("PROXY TCP4 192.0.2.7 "))
	start := time.Now()
	s := <-got
	if !strings.Contains(s, "read:") {
		t.Fatalf("served %q, want a header that never ends refused", s)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to refuse a stalled header", d)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the stalled connection is still open")
	}
	if len(reasons) != 1 || reasons[0] != "timeout" {
		t.Fatalf("counted %v, want [timeout]", reasons)
	}
}

func TestListenerOther(t *testing.T) {
	var reasons atomic.Value
	p := &Policy{From: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Other: Refuse,
		Count: func(r string) { reasons.Store(r) }}
	l := listen(t, p)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	// The reset may come before the dial returns, or at the write, or at
	// the read.
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		defer c.Close()
		c.Write(AppendV2(nil, Header{Source: src4, Dest: dst4}, nil))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a header from outside from was not refused")
		}
	}
	for reasons.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("Accept returned a connection from outside from")
	case <-time.After(50 * time.Millisecond):
	}
	if reasons.Load() != "source" {
		t.Fatalf("counted %v, want source", reasons.Load())
	}
	l.Close()

	p2 := &Policy{From: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Other: Plain}
	l2 := listen(t, p2)
	got := serveOne(t, l2)
	dial(t, l2.Addr().String(), []byte("hello"))
	if s := <-got; !strings.HasPrefix(s, "127.0.0.1:") || !strings.HasSuffix(s, " hello") {
		t.Fatalf("served %q, want a plain connection served as it is", s)
	}
}
