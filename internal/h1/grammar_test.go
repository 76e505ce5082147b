package h1

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFolds checks EqualFold in each form, and EqFold where b is lower
// case.
func TestFolds(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"Content-Length", "content-length", true},
		{"CONTENT-LENGTH", "content-length", true},
		{"WebSocket", "WEBSOCKET", true},
		{"-", "-", true},
		{"", "", true},
		{"content\rlength", "content-length", false}, // c|0x20 folds CR onto '-'
		{"\x10", "0", false},                         // and CTLs onto digits
		{"@", "`", false},                            // and '@' onto '`'
		{"content_length", "content-length", false},
		{"H0st", "host", false},
		{"\x08ost", "host", false},
		{"Host", "hos", false},
		{"k", "\u212a", false}, // strings.EqualFold folds the Kelvin sign onto 'k'
	} {
		if got := EqualFold(tc.a, tc.b); got != tc.want {
			t.Errorf("EqualFold(%q, %q) = %v", tc.a, tc.b, got)
		}
		if got := EqualFold([]byte(tc.b), []byte(tc.a)); got != tc.want {
			t.Errorf("EqualFold([]byte(%q), []byte(%q)) = %v", tc.b, tc.a, got)
		}
		if got := EqualFold([]byte(tc.a), tc.b); got != tc.want {
			t.Errorf("EqualFold([]byte(%q), %q) = %v", tc.a, tc.b, got)
		}
		if got := EqFold([]byte(tc.a), tc.b); tc.b == strings.ToLower(tc.b) && got != tc.want {
			t.Errorf("EqFold(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

// TestFoldsAgreeOnLetters checks only letters fold, and that EqFold,
// EqualFold and strings.EqualFold agree on every pair of ASCII bytes
// (strings.EqualFold differs only past ASCII).
func TestFoldsAgreeOnLetters(t *testing.T) {
	for a := range 128 {
		for b := range 128 {
			x, y := string(rune(a)), string(rune(b))
			eq := EqualFold(x, y)
			letter := 'a' <= a|0x20 && a|0x20 <= 'z'
			if want := a == b || (letter && a|0x20 == b|0x20); eq != want {
				t.Fatalf("EqualFold(%q, %q) = %v", x, y, eq)
			}
			if eq != strings.EqualFold(x, y) {
				t.Fatalf("EqualFold(%q, %q) = %v, strings.EqualFold says otherwise", x, y, eq)
			}
			if y == strings.ToLower(y) && EqFold([]byte(x), y) != eq {
				t.Fatalf("EqFold(%q, %q) != EqualFold", x, y)
			}
		}
	}
}

func TestParseLength(t *testing.T) {
	for _, v := range []string{
		"0", "5", "0005", "18446744073709551616", "9223372036854775807", "9223372036854775808",
		"00000000000000000000000000042", "", "+5", "-1", "0x5", "5 ", " 5", "1 2", "5,5", "٣",
		"99999999999999999999999",
	} {
		n, ok := parseLength([]byte(v))
		want, err := strconv.ParseUint(v, 10, 63)
		if ok != (err == nil) || (ok && uint64(n) != want) {
			t.Errorf("parseLength(%q) = %d, %v; strconv.ParseUint: %d, %v", v, n, ok, want, err)
		}
	}
	if n, ok := parseLength([]byte("9223372036854775807")); !ok || n != math.MaxInt64 {
		t.Errorf("MaxInt64: %d, %v", n, ok)
	}
}

func TestConnectionTokens(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want []string
	}{
		{"close", []string{"close"}},
		{" keep-alive , X-A,\tTE ", []string{"keep-alive", "X-A", "TE"}},
		{",, ,close,,", []string{"close"}},
		{"trailers, deflate;q=0.5", []string{"trailers", "deflate;q=0.5"}},
		{"a b", []string{"a b"}},
		{"", nil},
		{" \t ", nil},
	} {
		var got []string
		for tok := range ConnectionTokens([]byte(tc.v)) {
			got = append(got, string(tok))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ConnectionTokens(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
	// The sequence can be walked again, and stopped.
	seq := ConnectionTokens([]byte("a, b, c"))
	for range seq {
		break
	}
	var n int
	for range seq {
		n++
	}
	if n != 3 {
		t.Errorf("a second walk saw %d tokens, want 3", n)
	}
}

func TestHeadFields(t *testing.T) {
	head := "HTTP/1.1 200 Connection: reason\r\n" +
		"Connection: close, X-A\r\n" +
		"X-B:  1 \r\n" +
		"X-C: 2\n" + // a bare LF ends a line for net/http
		"Connection: X-D\r\n" +
		"  X-E  \r\n" + // obs-fold: more of Connection
		"no colon\r\n" +
		" X-F\r\n" + // continues nothing
		"Empty:\r\n" +
		"\r\n" +
		"After: body\r\n"
	type field struct{ name, value string }
	var got []field
	for name, value := range HeadFields([]byte(head)) {
		got = append(got, field{string(name), string(value)})
	}
	want := []field{
		{"Connection", "close, X-A"}, {"X-B", "1"}, {"X-C", "2"},
		{"Connection", "X-D"}, {"Connection", "X-E"}, {"Empty", ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("HeadFields = %q, want %q", got, want)
	}
}

func TestGrammarAllocs(t *testing.T) {
	v := []byte("keep-alive, X-A, TE")
	head := []byte("HTTP/1.1 200 OK\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n")
	if a := testing.AllocsPerRun(100, func() {
		for range ConnectionTokens(v) {
		}
		for name, value := range HeadFields(head) {
			EqualFold(name, "connection")
			EqualFold(value, value)
		}
	}); a != 0 {
		t.Errorf("%v allocations", a)
	}
}

// Every field of HopFields is marked Hop where the parsers accept it: in
// a response without a chunked body (a chunked body's Trailer declaration
// goes with it) and in a simple request (which may not have Upgrade or
// Transfer-Encoding at all).
func TestHopFieldsAreMarked(t *testing.T) {
	for _, name := range HopFields {
		value := "x"
		switch name {
		case "Transfer-Encoding":
			value = "chunked"
		case "Connection":
			value = "keep-alive"
		}
		var h Head
		resp := "HTTP/1.1 200 OK\r\n" + name + ": " + value + "\r\n\r\n"
		if _, res := ParseResponse([]byte(resp), &h); res == Complete {
			if f := h.Fields[len(h.Fields)-1]; !EqualFold(f.Name, name) || !f.Hop {
				t.Errorf("response %s: Hop %v", name, f.Hop)
			}
		} else {
			t.Errorf("response with %s: %v", name, res)
		}
		req := "GET / HTTP/1.1\r\nHost: x\r\n" + name + ": " + value + "\r\n\r\n"
		if _, res := ParseRequest([]byte(req), &h); res == Complete {
			if f := h.Fields[len(h.Fields)-1]; !EqualFold(f.Name, name) || !f.Hop {
				t.Errorf("request %s: Hop %v", name, f.Hop)
			}
		} else if name != "Upgrade" && name != "Transfer-Encoding" {
			t.Errorf("request with %s: %v", name, res)
		}
	}
}
