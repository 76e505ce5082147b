package route

import "github.com/corput/corput/internal/h1"

// Normalize returns path as routes and address rules see it: percent-
// encoded unreserved characters (RFC 3986 §2.3, '.' among them) and '/'
// (%2F) decoded, repeated slashes merged and dot segments removed (RFC 3986
// §5.2.4), a trailing slash kept. ok is false when the path cannot be
// normalized safely: a ".." segment above the root, answered 400. A path
// that does not start with '/' ("*", "") is returned as it is.
//
// A path that is already normal is returned itself, without an
// allocation; otherwise the result is a new string. No other escape is
// decoded (%25 stays, so nothing is decoded twice).
func Normalize(path string) (string, bool) {
	if len(path) == 0 || path[0] != '/' || normal(path) {
		return path, true
	}
	b := make([]byte, 0, len(path))
	for i := 0; i < len(path); i++ {
		if c, ok := decoded(path, i); ok {
			b = append(b, c)
			i += 2
			continue
		}
		b = append(b, path[i])
	}
	// Resolve the segments in place: out never passes the segment read.
	out, trailing := b[:1], false
	for i := 1; i <= len(b); {
		j := i
		for j < len(b) && b[j] != '/' {
			j++
		}
		seg := b[i:j]
		trailing = false
		switch {
		case len(seg) == 0 || string(seg) == ".":
			trailing = true
		case string(seg) == "..":
			if len(out) == 1 {
				return "", false
			}
			k := len(out) - 2
			for b[k] != '/' {
				k--
			}
			out, trailing = out[:k+1], true
		default:
			out = append(append(out, seg...), '/')
		}
		i = j + 1
	}
	if !trailing && len(out) > 1 {
		out = out[:len(out)-1]
	}
	return string(out), true
}

// normal reports whether path (starting with '/') is already normal:
// nothing Normalize would change.
func normal(path string) bool {
	start := 1 // the current segment's first byte
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			if path[i] == '%' {
				if _, ok := decoded(path, i); ok {
					return false
				}
			}
			continue
		}
		switch path[start:i] {
		case "":
			if i < len(path) {
				return false // "//"
			}
		case ".", "..":
			return false
		}
		start = i + 1
	}
	return true
}

// decoded is the byte that the escape at path[i] ("%XX") stands for, when
// Normalize decodes it: an unreserved character or '/'.
func decoded(path string, i int) (byte, bool) {
	if path[i] != '%' || i+2 >= len(path) {
		return 0, false
	}
	hi, ok1 := h1.Unhex(path[i+1])
	lo, ok2 := h1.Unhex(path[i+2])
	if !ok1 || !ok2 {
		return 0, false
	}
	c := hi<<4 | lo
	switch {
	case c == '/', c == '-', c == '.', c == '_', c == '~',
		'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return c, true
	}
	return 0, false
}
