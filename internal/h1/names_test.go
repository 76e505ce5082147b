package h1

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestDisguised(t *testing.T) {
	for _, name := range []string{
		"Transfer_Encoding", "transfer_encoding", "TRANSFER_ENCODING", "Transfer---Encoding", "Transfer-_-Encoding",
		"Content_Length", "content__length", "Host_", "X_Forwarded_For", "x-forwarded_for", "X_FORWARDED_PROTO",
		"X_Forwarded_Host", "X-Forwarded_Client-Cert", "x_forwarded_anything", "X--Forwarded-For", "Forwarded_",
		"X_Request_ID", "x-request--id", "Con_nection",
	} {
		want := !strings.HasSuffix(name, "_") && name != "Con_nection"
		if got := Disguised(name); got != want {
			t.Errorf("Disguised(%q) = %v, want %v", name, got, want)
		}
		if got := Disguised([]byte(name)); got != want {
			t.Errorf("Disguised([]byte(%q)) = %v, want %v", name, got, want)
		}
	}
	for _, name := range []string{
		"Transfer-Encoding", "Content-Length", "Host", "X-Forwarded-For", "X-Forwarded-Client-Cert", "Forwarded",
		"X-Request-ID", "X_Api_Key", "Accept_Language", "Transfer_Encodings", "Content-Lengthy", "X-Forwarded",
		"X_Forwarded", "XForwarded_For", "Trans_fer-Encoding", "", "_", "--", "Host-Name", "Content--Type",
	} {
		if Disguised(name) {
			t.Errorf("Disguised(%q) = true, want false", name)
		}
	}
}

// TestDisguisedCoversWhatCGIReads checks the rule against the mapping the
// near-miss names exploit: a name whose CGI variable (upper case, '-' as
// '_') is a protected name's, and is not that name, is disguised.
func TestDisguisedCoversWhatCGIReads(t *testing.T) {
	cgi := func(n string) string { return strings.ToUpper(strings.ReplaceAll(n, "-", "_")) }
	for _, p := range []string{"Content-Length", "Transfer-Encoding", "Host", "Connection", "Forwarded", "X-Request-Id", "X-Forwarded-For", "X-Forwarded-Client-Cert"} {
		for _, name := range []string{strings.ReplaceAll(p, "-", "_"), strings.ToLower(strings.ReplaceAll(p, "-", "_"))} {
			if cgi(name) != cgi(p) || EqualFold(name, p) {
				continue
			}
			if !Disguised(name) {
				t.Errorf("%q reads as %s through CGI, but is not Disguised", name, cgi(p))
			}
		}
		if Disguised(http.CanonicalHeaderKey(p)) {
			t.Errorf("the plain name %q is Disguised", p)
		}
	}
}

func TestUnderscore(t *testing.T) {
	if !Underscore("X_A") || !Underscore([]byte("_")) || Underscore("X-A") || Underscore("") {
		t.Error("Underscore misreads")
	}
}

func BenchmarkDisguised(b *testing.B) {
	names := [][]byte{[]byte("X_Api_Key"), []byte("Transfer_Encoding"), []byte("Accept-Encoding")}
	b.ReportAllocs()
	for b.Loop() {
		for _, n := range names {
			Disguised(n)
		}
	}
}

// FuzzDisguised checks Disguised against a plain restatement of the rule
// with strings and a regular expression: '_' as '-', runs of '-' folded to
// one, lower case; a protected name or the X-Forwarded- prefix, not
// written plainly.
func FuzzDisguised(f *testing.F) {
	for _, s := range []string{"Transfer_Encoding", "Transfer---Encoding", "X_Forwarded_For", "Host", "x-forwarded-", "X__", "Content-Length-", "_host"} {
		f.Add(s)
	}
	runs := regexp.MustCompile(`-+`)
	f.Fuzz(func(t *testing.T, name string) {
		folded := runs.ReplaceAllString(strings.Map(func(r rune) rune {
			if r == '_' {
				return '-'
			}
			if 'A' <= r && r <= 'Z' {
				return r + 'a' - 'A'
			}
			return r
		}, name), "-")
		plain := !strings.Contains(name, "_") && !strings.Contains(name, "--")
		want := !plain && (slices.Contains(protectedNames[:], folded) || strings.HasPrefix(folded, protectedPrefix))
		if got := Disguised(name); got != want {
			t.Fatalf("Disguised(%q) = %v, want %v (folded %q)", name, got, want, folded)
		}
	})
}
