package h1

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
