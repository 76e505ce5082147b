package h1

import (
	"bufio"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

// validChunked are whole chunked bodies (through the trailer section's
// blank line) and the data they carry.
var validChunked = []struct{ name, body, data string }{
	{"empty", "0\r\n\r\n", ""},
	{"one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello"},
	{"two chunks", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world"},
	{"upper hex", "A\r\n0123456789\r\n0\r\n\r\n", "0123456789"},
	{"lower hex", "a\r\n0123456789\r\n0\r\n\r\n", "0123456789"},
	{"leading zeros", "0005\r\nhello\r\n000\r\n\r\n", "hello"},
	{"data holds CRLF", "4\r\n\r\n\r\n\r\n0\r\n\r\n", "\r\n\r\n"},
	{"data holds a chunk", "a\r\n0\r\n\r\n1\r\nxy\r\n0\r\n\r\n", "0\r\n\r\n1\r\nxy"},
	{"extension", "5;name=value\r\nhello\r\n0;last\r\n\r\n", "hello"},
	{"quoted extension", "5;a=\"b;c\\\" d\"\r\nhello\r\n0\r\n\r\n", "hello"},
	{"extension BWS", "5; a \t= \tb;c; d=\"e\";\tf\r\nhello\r\n0\r\n\r\n", "hello"},
	{"extensions chained", "5;a=1;b=2;c\r\nhello\r\n0\r\n\r\n", "hello"},
	{"quoted pair and obs-text", "5;a=\"\\\"\\\\ \t\x80\xff\"\r\nhello\r\n0\r\n\r\n", "hello"},
	{"trailer", "5\r\nhello\r\n0\r\nX-Sum: 1234\r\n\r\n", "hello"},
	{"trailers", "5\r\nhello\r\n0\r\nX-A: 1\r\nX-B: \t2 \r\nX-C:\r\nx:y:z\r\n\r\n", "hello"},
	{"trailer value bytes", "0\r\nX-A: \x80\xff\t\"(a;b)\" \r\n\r\n", ""},
	{"many chunks", strings.Repeat("1\r\nx\r\n", 500) + strings.Repeat("10\r\n0123456789abcdef\r\n", 100) + "0\r\n\r\n",
		strings.Repeat("x", 500) + strings.Repeat("0123456789abcdef", 100)},
	{"big chunk", "2000\r\n" + strings.Repeat("z", 0x2000) + "\r\n0\r\n\r\n", strings.Repeat("z", 0x2000)},
	{"15 hex digits", "00000000000000a\r\n0123456789\r\n0\r\n\r\n", "0123456789"},
	{"long extension", "1;" + strings.Repeat("e", maxChunkLine-4) + "\r\nx\r\n0\r\n\r\n", "x"},
}

// after is what follows a body on a connection: never the body's.
const after = "HTTP/1.1 200 OK\r\n\r\n"

// scanSplit scans b through a fresh Chunks in the given pieces and returns
// the total consumed, done and the error.
func scanSplit(b []byte, cuts []int) (int, bool, error) {
	var c Chunks
	total, prev := 0, 0
	for _, at := range append(cuts, len(b)) {
		piece := b[prev:at]
		prev = at
		n, done, err := c.Scan(piece)
		total += n
		if err != nil || done {
			return total, done, err
		}
		if n != len(piece) {
			return total, done, errors.New("short count without done or error")
		}
	}
	return total, false, nil
}

func TestChunksValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range validChunked {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.body + after)
			want := len(tc.body)
			check := func(how string, n int, done bool, err error) {
				t.Helper()
				if n != want || !done || err != nil {
					t.Errorf("%s: Scan = %d, %v, %v; want %d, true, nil", how, n, done, err, want)
				}
			}
			n, done, err := scanSplit(b, nil)
			check("whole", n, done, err)
			n, done, err = scanSplit([]byte(tc.body), nil)
			check("exact", n, done, err)

			cuts := make([]int, 0, len(b))
			for i := 1; i < len(b); i++ {
				cuts = append(cuts, i)
			}
			n, done, err = scanSplit(b, cuts)
			check("byte by byte", n, done, err)

			for range 50 {
				cuts = cuts[:0]
				for at := 0; ; {
					at += 1 + rng.IntN(16)
					if rng.IntN(8) == 0 {
						at += rng.IntN(len(b))
					}
					if at >= len(b) {
						break
					}
					cuts = append(cuts, at)
				}
				n, done, err = scanSplit(b, cuts)
				check("split", n, done, err)
			}

			// Every proper prefix is neither done nor broken.
			for i := range len(tc.body) {
				var c Chunks
				if n, done, err := c.Scan([]byte(tc.body[:i])); n != i || done || err != nil {
					t.Fatalf("prefix %d: Scan = %d, %v, %v", i, n, done, err)
				}
			}

			// Once done, Scan consumes nothing more.
			var c Chunks
			c.Scan(b)
			if n, done, err := c.Scan([]byte(after)); n != 0 || !done || err != nil {
				t.Errorf("after done: Scan = %d, %v, %v", n, done, err)
			}
			if c.Data() != uint64(len(tc.data)) {
				t.Errorf("Data = %d, want the %d bytes the chunks carry", c.Data(), len(tc.data))
			}

			// net/http reads the same body with the same data.
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+tc.body)), nil)
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(resp.Body)
			if err != nil || string(data) != tc.data {
				t.Errorf("net/http read %q, %v", data, err)
			}
		})
	}
}

var malformedChunked = []struct{ name, body string }{
	{"empty size", "\r\n"},
	{"bad hex", "g\r\n"},
	{"bad hex after digits", "5g\r\nhello\r\n0\r\n\r\n"},
	{"negative", "-5\r\n"},
	{"0x prefix", "0x5\r\nhello\r\n0\r\n\r\n"},
	{"space before size", " 5\r\nhello\r\n0\r\n\r\n"},
	{"space after size", "5 \r\nhello\r\n0\r\n\r\n"},
	{"space before extension", "5 ;a\r\nhello\r\n0\r\n\r\n"},
	{"space after quoted extension", "5;a=\"b\" ;c\r\nhello\r\n0\r\n\r\n"},
	{"space before the CR (llhttp 074)", "a \r\n0123456789\r\n0\r\n\r\n"},
	{"tab after size", "5\t\r\nhello\r\n0\r\n\r\n"},
	{"extension without a name (llhttp 072)", "2;\r\naa\r\n0\r\n\r\n"},
	{"extension of spaces", "2; \r\naa\r\n0\r\n\r\n"},
	{"unclosed quoted extension (llhttp 087)", "2;a=\"b\r\naa\r\n0\r\n\r\n"},
	{"space after extension", "5;a \r\nhello\r\n0\r\n\r\n"},
	{"space inside extension", "5;a\tb\r\nhello\r\n0\r\n\r\n"},
	{"extension value missing", "5;a=\r\nhello\r\n0\r\n\r\n"},
	{"extension value not a token", "5;a=b(c)\r\nhello\r\n0\r\n\r\n"},
	{"text after quoted value", "5;a=\"b\"c\r\nhello\r\n0\r\n\r\n"},
	{"CTL in quoted extension", "5;a=\"\x01\"\r\nhello\r\n0\r\n\r\n"},
	{"double semicolon", "5;;a\r\nhello\r\n0\r\n\r\n"},
	{"extension without size", ";a\r\nhello\r\n"},
	{"bare LF after size", "5\nhello\r\n0\r\n\r\n"},
	{"CR without LF after size", "5\rhello\r\n"},
	{"bare LF in extension", "5;a\nb\r\nhello\r\n0\r\n\r\n"},
	{"CTL in extension", "5;a\x00b\r\nhello\r\n0\r\n\r\n"},
	{"DEL in extension", "5;a\x7f\r\nhello\r\n0\r\n\r\n"},
	{"16 hex digits", "0000000000000005\r\nhello\r\n0\r\n\r\n"},
	{"huge size", "ffffffffffffffffff\r\n"},
	{"size line too long", "1;" + strings.Repeat("e", maxChunkLine) + "\r\nx\r\n0\r\n\r\n"},
	{"missing CRLF after data", "5\r\nhello0\r\n\r\n"},
	{"data too long", "5\r\nhello!\r\n0\r\n\r\n"},
	{"data too short", "5\r\nhell\r\n0\r\n\r\n"},
	{"LF only after data", "5\r\nhello\n0\r\n\r\n"},
	{"CR only after data", "5\r\nhello\r0\r\n\r\n"},
	{"bare LF ends body", "0\r\n\n"},
	{"bare LF after last chunk", "0\n\r\n"},
	{"bare LF after trailer", "0\r\nX: 1\n\r\n"},
	{"bare LF in trailer", "0\r\nX: a\nb\r\n\r\n"},
	{"CTL in trailer", "0\r\nX: a\x01b\r\n\r\n"},
	{"NUL in trailer", "0\r\nX: \x00\r\n\r\n"},
	{"DEL in trailer", "0\r\nX: \x7f\r\n\r\n"},
	{"CR without LF in trailer", "0\r\nX: a\rb\r\n\r\n"},
	{"CR without LF at end", "0\r\n\rx"},
	{"trailer without colon", "0\r\n0\r\n\r\n"},
	{"trailer without name", "0\r\n: 1\r\n\r\n"},
	{"trailer obs-fold", "0\r\nX: 1\r\n folded\r\n\r\n"},
	{"trailer leading space", "0\r\n X: 1\r\n\r\n"},
	{"trailer space before colon", "0\r\nX : 1\r\n\r\n"},
	{"trailer non-token name", "0\r\nX(1): 1\r\n\r\n"},
	{"trailers too large", "0\r\n" + strings.Repeat("X-Long: "+strings.Repeat("v", 1000)+"\r\n", 70) + "\r\n"},
}

func TestChunksMalformed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range malformedChunked {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.body)
			n, done, err := scanSplit(b, nil)
			if err != ErrChunked || done {
				t.Fatalf("Scan(%q) = %d, %v, %v; want ErrChunked", tc.body, n, done, err)
			}
			if n > len(b) {
				t.Fatalf("consumed %d of %d", n, len(b))
			}
			cuts := make([]int, 0, len(b))
			for i := 1; i < len(b); i++ {
				cuts = append(cuts, i)
			}
			if n2, done, err := scanSplit(b, cuts); err != ErrChunked || done || n2 != n {
				t.Errorf("byte by byte: Scan = %d, %v, %v; want %d, ErrChunked", n2, done, err, n)
			}
			for range 20 {
				cuts = cuts[:0]
				for at := rng.IntN(8); at < len(b); at += 1 + rng.IntN(64) {
					if at > 0 {
						cuts = append(cuts, at)
					}
				}
				if n2, done, err := scanSplit(b, cuts); err != ErrChunked || done || n2 != n {
					t.Errorf("split %v: Scan = %d, %v, %v; want %d, ErrChunked", cuts, n2, done, err, n)
				}
			}
		})
	}
}

// TestChunksTrailerLimit checks the trailer bound is on the section, not
// on each line.
func TestChunksTrailerLimit(t *testing.T) {
	line := "X: " + strings.Repeat("v", 97) + "\r\n" // 102 bytes
	fits := "0\r\n" + strings.Repeat(line, (maxTrailers-2)/len(line)) + "\r\n"
	var c Chunks
	if n, done, err := c.Scan([]byte(fits)); n != len(fits) || !done || err != nil {
		t.Errorf("trailers within the bound: %d, %v, %v", n, done, err)
	}
	over := "0\r\n" + strings.Repeat(line, 2*maxTrailers/len(line)) + "\r\n"
	c = Chunks{}
	if _, _, err := c.Scan([]byte(over)); err != ErrChunked {
		t.Errorf("trailers over the bound: %v", err)
	}
}

func TestChunksEmptyScan(t *testing.T) {
	var c Chunks
	if n, done, err := c.Scan(nil); n != 0 || done || err != nil {
		t.Errorf("Scan(nil) = %d, %v, %v", n, done, err)
	}
	c.Scan([]byte("0\r\n\r\n"))
	if n, done, err := c.Scan(nil); n != 0 || !done || err != nil {
		t.Errorf("Scan(nil) after done = %d, %v, %v", n, done, err)
	}
}

func BenchmarkChunksScan(b *testing.B) {
	body := []byte(strings.Repeat("400\r\n"+strings.Repeat("x", 0x400)+"\r\n", 64) + "0\r\n\r\n")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var c Chunks
		if n, done, err := c.Scan(body); n != len(body) || !done || err != nil {
			b.Fatal(n, done, err)
		}
	}
}

// TestChunksLooseLinesNetHTTPTakes checks that the loose chunk lines and
// trailers the strict grammar refuses are ones net/http's reader takes:
// the guard's refusal of them is what keeps them from an origin.
func TestChunksLooseLinesNetHTTPTakes(t *testing.T) {
	for _, body := range []string{
		"2;\r\naa\r\n0\r\n\r\n",
		"a \r\n0123456789\r\n0\r\n\r\n",
		"2;a=\"b\r\naa\r\n0\r\n\r\n",
		"5;a \r\nhello\r\n0\r\n\r\n",
		"5;a\x00\x7fb\x01\r\nhello\r\n0\r\n\r\n",
		"0000000000000005\r\nhello\r\n0\r\n\r\n",
		"0\r\nX: 1\nY: 2\r\n\n",
	} {
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+body+after)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Errorf("net/http refuses %q (%v): the case proves nothing", body, err)
		}
		if _, _, err := scanSplit([]byte(body), nil); err != ErrChunked {
			t.Errorf("Chunks takes %q", body)
		}
	}
}
