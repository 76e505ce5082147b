package h1

// Field names a client may not disguise. An origin that maps '_' to '-'
// (CGI, WSGI, several frameworks) reads "Transfer_Encoding" as
// Transfer-Encoding, and one that squeezes separators reads
// "Transfer---Encoding" so too: beside the gateway's own framing or
// X-Forwarded-For such a field is a second framing or a spoofed address.
// Disguised finds them, whatever downstream.underscore_headers says;
// Underscore finds the names that setting is about. Both are ASCII only
// and allocate nothing.

// protectedNames are the names a request may not disguise, lower case,
// one '-' between words; protectedPrefix covers X-Forwarded-For, -Proto,
// -Host, -Client-Cert and every other X-Forwarded-*.
var protectedNames = [...]string{
	"content-length", "transfer-encoding", "host", "connection", "forwarded", "x-request-id",
}

const protectedPrefix = "x-forwarded-"

// Underscore reports whether name has a '_'.
func Underscore[S ~string | ~[]byte](name S) bool {
	for i := 0; i < len(name); i++ {
		if name[i] == '_' {
			return true
		}
	}
	return false
}

// loose reports whether name has a '_' or a run of separators: a name
// that reads differently once they are folded.
func loose[S ~string | ~[]byte](name S) bool {
	for i := 0; i < len(name); i++ {
		if name[i] == '_' || name[i] == '-' && i > 0 && name[i-1] == '-' {
			return true
		}
	}
	return false
}

// Disguised reports whether name, not written as a protected name, equals
// one once '_' is read as '-', each run of '-' and '_' as one '-', and
// case is folded: "Transfer_Encoding", "Content_Length",
// "Transfer---Encoding", "X_Forwarded_For", "x-forwarded_client-cert".
// The protected name itself, written plainly, is not disguised.
func Disguised[S ~string | ~[]byte](name S) bool {
	if !loose(name) {
		return false
	}
	for _, p := range protectedNames {
		if foldedEq(name, p, false) {
			return true
		}
	}
	return foldedEq(name, protectedPrefix, true)
}

// foldedEq reports whether name, folded as Disguised folds it, equals p
// (or starts with p, when prefix is set).
func foldedEq[S ~string | ~[]byte](name S, p string, prefix bool) bool {
	j := 0
	for i := 0; i < len(name); {
		if j == len(p) {
			return prefix
		}
		if c := name[i]; c == '-' || c == '_' {
			if p[j] != '-' {
				return false
			}
			for i < len(name) && (name[i] == '-' || name[i] == '_') {
				i++
			}
		} else if lower(c) != p[j] {
			return false
		} else {
			i++
		}
		j++
	}
	return j == len(p)
}
