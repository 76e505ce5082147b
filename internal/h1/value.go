package h1

import "unsafe"

// Value is the value of the i-th field (from 0) named name (lower case)
// and whether there is one: a parsed head as forward.Prior.
func (h *Head) Value(name string, i int) ([]byte, bool) {
	for k := range h.Fields {
		if EqFold(h.Fields[k].Name, name) {
			if i == 0 {
				return h.Fields[k].Value, true
			}
			i--
		}
	}
	return nil, false
}

// View views b as a string, for a call that does not keep it (nor b's
// bytes past the call's end): a parsed head's fields are views of the
// connection's read buffer, and looking one up or writing it on allocates
// nothing.
func View(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
