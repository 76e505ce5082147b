package replay

import (
	"bytes"
	"io"
	"testing"
)

// TestTakeHandsTheWholeBodyOver: a body kept up to a mirror's bound
// larger than its retry limit is not Kept for a retry, but Take hands its
// bytes over whole with their reservation, which Release gives back; a
// body not read whole, or over the bound, is not taken.
func TestTakeHandsTheWholeBodyOver(t *testing.T) {
	cap := NewCap(1 << 20)
	body := bytes.Repeat([]byte("x"), 3000)

	var b Body
	b.Reset(bytes.NewReader(body), 1000, cap) // the retry limit
	b.KeepUpTo(4000)                          // the mirror's bound
	if _, err := io.ReadAll(b.Reader()); err != nil {
		t.Fatal(err)
	}
	if b.Kept() {
		t.Fatal("a body above its retry limit is Kept: a retry would send it again")
	}
	if _, ok := b.Take(2999); ok {
		t.Fatal("Take of a length other than the body's")
	}
	k, ok := b.Take(3000)
	if !ok || !bytes.Equal(k.Bytes(), body) {
		t.Fatalf("Take: %v, %d bytes", ok, len(k.Bytes()))
	}
	if !b.Release() || cap.Used() == 0 {
		t.Fatalf("after the Body's Release the taken bytes are no longer reserved (%d)", cap.Used())
	}
	k.Release()
	if cap.Used() != 0 {
		t.Fatalf("%d bytes reserved after the Kept's Release", cap.Used())
	}

	b.Reset(bytes.NewReader(body), 1000, cap)
	b.KeepUpTo(2000) // below the body
	io.ReadAll(b.Reader())
	if _, ok := b.Take(3000); ok {
		t.Fatal("Take of a body over the mirror's bound")
	}
	b.Release()

	b.Reset(bytes.NewReader(body), 4000, cap)
	r := b.Reader()
	r.Read(make([]byte, 100)) // read partly
	if _, ok := b.Take(3000); ok {
		t.Fatal("Take of a body not read whole")
	}
	b.Release()
	if cap.Used() != 0 {
		t.Fatalf("%d bytes reserved at the end", cap.Used())
	}
}
