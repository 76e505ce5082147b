package h1

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// scanGuard feeds b to a fresh Guard in the pieces cuts makes (offsets,
// ascending) and returns the first verdict and the Guard.
func scanGuard(b []byte, cuts []int) (int64, bool, *Guard) {
	g := new(Guard)
	prev := 0
	for _, at := range append(cuts, len(b)) {
		if bad, refused := g.Scan(b[prev:at]); refused {
			return bad, true, g
		}
		prev = at
	}
	return 0, false, g
}

// Clean requests, each whole, to pipeline around the cases.
const (
	cleanGet     = "GET /a HTTP/1.1\r\nHost: g\r\n\r\n"
	cleanPost    = "POST /b HTTP/1.1\r\nHost: g\r\nContent-Length: 5\r\n\r\nhello"
	cleanChunked = "POST /c HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nT: 1\r\n\r\n"
	cleanOptions = "OPTIONS * HTTP/1.1\r\nHost: g\r\n\r\n" // answered by net/http, not counted
)

// guardRefused are request shapes the guard refuses: each is the request
// refused, whatever precedes it on the connection.
var guardRefused = []struct{ name, raw string }{
	{"CL then TE", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"TE then CL", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"CL+TE zero body", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{"duplicate equal CL", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"},
	{"conflicting CL", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\nhello!"},
	{"CL list", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 5, 5\r\n\r\nhello"},
	{"CL plus sign", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: +5\r\n\r\nhello"},
	{"CL negative", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: -1\r\n\r\n"},
	{"CL hex", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 0x5\r\n\r\nhello"},
	{"CL empty", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: \r\n\r\n"},
	{"CL overflow", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 9223372036854775808\r\n\r\n"},
	{"CL with CR", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 5\r\r\n\r\nhello"},
	{"CL past the buffer", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 5" + strings.Repeat(" ", 100) + "x\r\n\r\nhello"},
	{"TE chunked, identity", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"TE xchunked", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"TE chunked twice", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"TE vertical tab", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding:\x0bchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"TE on HTTP/1.0", "POST / HTTP/1.0\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"TE+CL on HTTP/1.0", "POST / HTTP/1.0\r\nHost: g\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\nhello"},
	{"obs-fold", "POST / HTTP/1.1\r\nHost: g\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n"},
	{"obs-fold tab", "POST / HTTP/1.1\r\nHost: g\r\nX-A: 1\r\n\t2\r\nContent-Length: 0\r\n\r\n"},
	{"fold before first header", "GET / HTTP/1.1\r\n Host: g\r\n\r\n"},
	{"folded TE", "POST / HTTP/1.1\r\nHost: g\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{"whitespace line", "GET / HTTP/1.1\r\nHost: g\r\n" + strings.Repeat(" ", 200) + "\r\n\r\n"},
	{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: g\r\n\r\n"},
	{"HTTP/2.0 request line", "GET / HTTP/2.0\r\nHost: g\r\n\r\n"},
	{"bogus version", "GET / HTTX/1.1\r\nHost: g\r\n\r\n"},
	{"HTTP/0.9", "GET /\r\n\r\n"},
	{"version then CR", "GET / HTTP/1.1\r\r\nHost: g\r\n\r\n"},
	{"empty request line", "\r\n\r\n"},
	{"chunk size not hex", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
	{"chunk size 0x", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n"},
	{"chunk size overflow", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\nhello\r\n0\r\n\r\n"},
	{"chunk size junk", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n"},
	{"chunk OWS before extension", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5 ;x\r\nhello\r\n0\r\n\r\n"},
	{"chunk line bare LF", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n"},
	{"chunk line CR inside", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5;a\rb\r\nhello\r\n0\r\n\r\n"},
	{"chunk line too long", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5;" + strings.Repeat("e", 4096) + "\r\nhello\r\n0\r\n\r\n"},
	{"chunk data overrun", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n"},
	{"bare LF head", "POST /lf HTTP/1.1\nHost: g\nContent-Length: 2\n\nok"},
	{"chunk size OWS", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n2" + strings.Repeat(" ", 200) + "\r\nok\r\n0\t\r\n\r\n"},
	{"sixteen size digits", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000002\r\nok\r\n0\r\n\r\n"},
	{"CTL in chunk extension", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n2;\x01\r\nok\r\n0\r\n\r\n"},
	{"trailer ends in a bare LF", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-Sum: 1\r\nX-B: 2\n\r\n"},
	{"bare LF in the request line", "GET / HTTP/1.1\nHost: g\r\n\r\n"},
	{"bare LF in a field line", "GET / HTTP/1.1\r\nHost: g\nX: 1\r\n\r\n"},
	{"bare LF ends the head", "GET / HTTP/1.1\r\nHost: g\r\n\n"},
	{"bare LF smuggles a request", "GET / HTTP/1.1\r\nHost: localhost\r\nDummy: x\nContent-Length: 23\r\n\r\nGET / HTTP/1.1\r\nDummy: GET /admin HTTP/1.1\r\nHost: localhost\r\n\r\n"},
	{"bare CR in a value", "GET / HTTP/1.1\r\nHost: g\r\nX: a\rb\r\n\r\n"},
	{"bare CR in the target", "GET /a\rb HTTP/1.1\r\nHost: g\r\n\r\n"},
	{"bare CR before a name", "GET / HTTP/1.1\r\n\rX: 1\r\nHost: g\r\n\r\n"},
	{"bare CR past the buffer", "GET / HTTP/1.1\r\nHost: g\r\nX: " + strings.Repeat("v", 200) + "\rv\r\n\r\n"},
	{"two empty lines first", "\r\n\r\nGET / HTTP/1.1\r\nHost: g\r\n\r\n"},
	{"bare LF empty line first", "\nGET / HTTP/1.1\r\nHost: g\r\n\r\n"},
	{"bare CR first", "\rGET / HTTP/1.1\r\nHost: g\r\n\r\n"},
	{"loose chunk line, empty extension", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n2;\r\naa\r\n0\r\n\r\n"},
	{"loose chunk line, space", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\na \r\n0123456789\r\n0\r\n\r\n"},
	{"loose chunk line, unclosed quote", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n2;a=\"b\r\naa\r\n0\r\n\r\n"},
	{"trailer obs-fold", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n folded\r\n\r\n"},
}

// guardServed are streams the guard refuses nothing of, with the requests
// the handler is given.
var guardServed = []struct {
	name, raw string
	heads     int64
}{
	{"one GET", cleanGet, 1},
	{"pipelined", cleanGet + cleanPost + cleanChunked + cleanOptions + cleanGet, 4},
	{"TE with spaces", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding:   Chunked  \r\n\r\n5\r\nhello\r\n0\r\n\r\n" + cleanGet, 2},
	{"zero-padded CL", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 0003\r\n\r\nabc" + cleanGet, 2},
	{"CL padded past the buffer", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 2" + strings.Repeat(" ", 200) + "\r\n\r\nok" + cleanGet, 2},
	{"HTTP/1.0 with CL", "POST / HTTP/1.0\r\nHost: g\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc" + cleanGet, 2},
	{"long header", "GET / HTTP/1.1\r\nHost: g\r\nX-Long: " + strings.Repeat("v", 5000) + "\r\n\r\n" + cleanGet, 2},
	{"long target", "GET /" + strings.Repeat("p", 300) + " HTTP/1.1\r\nHost: g\r\n\r\n" + cleanGet, 2},
	{"chunk extensions", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5;name=\"v\"\r\nhello\r\n0;last\r\n\r\n" + cleanGet, 2},
	{"body looks like a request", "POST / HTTP/1.1\r\nHost: g\r\nContent-Length: 28\r\n\r\n" + cleanGet + cleanGet, 2},
	{"chunk holds a request", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n1c\r\n" + cleanGet + "\r\n0\r\n\r\n" + cleanGet, 2},
	{"OPTIONS * only", cleanOptions + cleanOptions, 0},
	{"one empty line before each request", "\r\n" + cleanGet + "\r\n" + cleanPost + "\r\n" + cleanGet, 3},
	{"h2c preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00" + "GET / HTTP/9\r\n\r\n", 0},
	{"upgrade", "GET /ws HTTP/1.1\r\nHost: g\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x05hello GET / HTTP/9\r\n\r\n", 1},
	{"incomplete head", "GET / HTTP/1.1\r\nHost: g\r\nContent-Len", 0},
	{"incomplete body", "POST / HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", 1},
}

// checkSplits feeds b whole, split once at every offset, byte by byte and
// in random pieces, and checks each gives the verdict want (-1: none).
func checkSplits(t *testing.T, b []byte, want int64, rng *rand.Rand) *Guard {
	t.Helper()
	check := func(how string, cuts []int) *Guard {
		t.Helper()
		bad, refused, g := scanGuard(b, cuts)
		if !refused {
			bad = -1
		}
		if bad != want {
			t.Fatalf("%s: verdict %d, want %d\n%q", how, bad, want, b)
		}
		return g
	}
	g := check("whole", nil)
	for i := 1; i < len(b); i++ {
		check("split", []int{i})
	}
	cuts := make([]int, 0, len(b))
	for i := 1; i < len(b); i++ {
		cuts = append(cuts, i)
	}
	check("byte by byte", cuts)
	for range 20 {
		cuts = cuts[:0]
		for at := rng.IntN(8); at < len(b); at += 1 + rng.IntN(32) {
			if at > 0 {
				cuts = append(cuts, at)
			}
		}
		check("random pieces", cuts)
	}
	return g
}

func TestGuardRefusesAtTheRightRequest(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range guardRefused {
		t.Run(tc.name, func(t *testing.T) {
			for _, before := range []struct {
				raw   string
				heads int64
			}{
				{"", 0},
				{cleanGet, 1},
				{cleanPost + cleanOptions + cleanChunked, 2},
			} {
				stream := before.raw + tc.raw + cleanGet
				if g := checkSplits(t, []byte(stream), before.heads, rng); g.state != gOff {
					t.Fatalf("after a refusal the guard is in state %d, want off", g.state)
				}
			}
		})
	}
}

func TestGuardServesWellFramedStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range guardServed {
		t.Run(tc.name, func(t *testing.T) {
			g := checkSplits(t, []byte(tc.raw), -1, rng)
			if g.heads != tc.heads {
				t.Fatalf("%d requests counted, want %d", g.heads, tc.heads)
			}
		})
	}
}

// TestGuardFollowsChunksAcrossReads cuts a pipelined stream with chunked
// bodies in two at every offset and checks the guard ends every request
// where it ends, whichever read the cut falls in.
func TestGuardFollowsChunksAcrossReads(t *testing.T) {
	reqs := []string{
		cleanChunked,
		"POST /d HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n10;e\r\n0123456789abcdef\r\n0\r\n\r\n",
		"PUT /e HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n\n\r\n2\r\n\r\n\r\n0\r\nA: 1\r\nB: \t2\r\n\r\n",
		cleanGet,
	}
	var stream []byte
	var ends []int
	for _, r := range reqs {
		stream = append(stream, r...)
		ends = append(ends, len(stream))
	}
	for cut := range len(stream) + 1 {
		var g Guard
		fed := 0
		for i, end := range ends {
			// Feed up to this request's end, cutting the stream at cut.
			for _, to := range []int{min(max(cut, fed), end), end} {
				if _, refused := g.Scan(stream[fed:to]); refused {
					t.Fatalf("cut at %d: refused\n%q", cut, stream)
				}
				fed = to
			}
			if g.state != gLine || g.n != 0 || g.lines != 0 || g.heads != int64(i+1) {
				t.Fatalf("cut at %d: after request %d the guard is in state %d, line %d (%d bytes), %d heads",
					cut, i, g.state, g.lines, g.n, g.heads)
			}
		}
	}
}

// TestGuardFilterTakesOneEmptyLine checks Filter takes the one empty line
// before each request line out of the bytes it passes on, however they
// are split, and leaves every other byte; a second empty line is refused
// and left in place for net/http to refuse too.
func TestGuardFilterTakesOneEmptyLine(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		bad     int64 // -1: none
	}{
		{"\r\n" + cleanGet + "\r\n" + cleanPost + cleanGet, cleanGet + cleanPost + cleanGet, -1},
		{cleanGet + "\r\n\r\n" + cleanGet, cleanGet + "\r\n" + cleanGet, 1},
		{"\r\n\r\n" + cleanGet, "\r\n" + cleanGet, 0},
		{cleanChunked + "\r\n" + cleanGet, cleanChunked + cleanGet, -1},
	} {
		for cut := range len(tc.in) + 1 {
			var g Guard
			in := []byte(tc.in)
			bad := int64(-1)
			var out []byte
			for _, part := range [][]byte{in[:cut], in[cut:]} {
				n, b, refused := g.Filter(part)
				if refused && bad < 0 {
					bad = b
				}
				out = append(out, part[:n]...)
			}
			if string(out) != tc.out || bad != tc.bad {
				t.Fatalf("cut at %d: %q, verdict %d; want %q, %d\n(in %q)", cut, out, bad, tc.out, tc.bad, tc.in)
			}
		}
	}
}

func TestGuardAllocs(t *testing.T) {
	stream := []byte(strings.Repeat(cleanGet+cleanPost+cleanChunked+cleanOptions, 4))
	var g Guard
	if a := testing.AllocsPerRun(100, func() {
		g = Guard{}
		for b := stream; len(b) > 0; b = b[min(len(b), 7):] {
			g.Scan(b[:min(len(b), 7)])
		}
	}); a != 0 {
		t.Errorf("%v allocations per stream", a)
	}
	if g.heads != 12 || g.state != gLine {
		t.Errorf("%d heads, state %d", g.heads, g.state)
	}
}

func BenchmarkGuardScan(b *testing.B) {
	stream := []byte(strings.Repeat(cleanGet+cleanPost+cleanChunked, 16))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		var g Guard
		if _, refused := g.Scan(stream); refused {
			b.Fatal("refused")
		}
	}
}
