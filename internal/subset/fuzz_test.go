package subset

import "testing"

// FuzzRingDeltas drives a ring through a byte-coded sequence of deltas and
// checks every invariant after each one. The first two bytes pick the fleet
// and sizing; then each byte is an operation: low two bits 0–1 add a new
// endpoint, 2 removes the endpoint at (byte>>2) mod N, 3 syncs to the
// membership minus every (byte>>2 mod 7 + 2)-th endpoint plus one new one.
func FuzzRingDeltas(f *testing.F) {
	f.Add([]byte{3, 2, 0, 0, 0, 0, 2, 6, 10, 3, 0, 1, 2})
	f.Add([]byte{255, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2})
	f.Add([]byte{16, 4, 3, 7, 11, 15, 0, 0, 2, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 2 {
			return
		}
		fleet := Fleet{Gateways: 1 + int(ops[0]>>4), Loops: 1 + int(ops[0]&15)}
		sizing := FixedSize([]int{0, 2, 3, 8}[ops[1]&3])
		r, err := NewRing(Config{Origin: "fuzz", Fleet: fleet, Sizing: sizing}, addrs(int(ops[1]>>2)))
		if err != nil {
			t.Fatal(err)
		}
		next := 1000
		for _, op := range ops[2:] {
			before := r.Snapshot()
			var d Delta
			switch {
			case op&3 < 2:
				d, err = r.Add(addr(next))
				next++
			case op&3 == 2:
				if r.Len() == 0 {
					continue
				}
				d, err = r.Remove(r.addrs[int(op>>2)%r.Len()])
			default:
				step := int(op>>2)%7 + 2
				var members []string
				for i, a := range r.addrs {
					if i%step != 0 {
						members = append(members, a)
					}
				}
				d, err = r.Sync(append(members, addr(next)))
				next++
			}
			if err != nil {
				t.Fatal(err)
			}
			checkRing(t, r)
			checkStep(t, before, r.Snapshot(), d)
		}
	})
}
