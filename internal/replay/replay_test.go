package replay

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestRewindGivesTheSameBytes: a body read partly, rewound, is read whole
// from its first byte, the kept part then the rest.
func TestRewindGivesTheSameBytes(t *testing.T) {
	c := NewCap(1 << 20)
	var b Body
	src := strings.Repeat("0123456789", 1000)
	b.Reset(strings.NewReader(src), 64<<10, c)
	first := b.Reader()
	part := make([]byte, 3000)
	if _, err := io.ReadFull(first, part); err != nil {
		t.Fatal(err)
	}
	if !b.Kept() || c.Used() < 3000 {
		t.Fatalf("kept %v, used %d", b.Kept(), c.Used())
	}
	got, err := io.ReadAll(b.Reader())
	if err != nil || string(got) != src {
		t.Fatalf("a second Reader: %d bytes, %v; want the body whole", len(got), err)
	}
	if _, err := first.Read(part); err != ErrStale {
		t.Fatalf("the first Reader read on: %v; want ErrStale", err)
	}
	if again, _ := io.ReadAll(b.Reader()); !bytes.Equal(again, got) {
		t.Fatal("a third Reader gave other bytes")
	}
	if !b.Release() {
		t.Fatal("Release with no Reader at work: not reusable")
	}
	if c.Used() != 0 {
		t.Fatalf("after Release: %d bytes reserved", c.Used())
	}
}

// TestOverTheLimitsIsNotKept: a body over its limit, or over the
// gateway-wide cap, is not kept, and each is counted by its reason.
func TestOverTheLimitsIsNotKept(t *testing.T) {
	c := NewCap(20 << 10)
	var counted []int
	c.Counted = func(why int) { counted = append(counted, why) }
	var big, a, b Body
	big.Reset(strings.NewReader(strings.Repeat("x", 5000)), 4096, c)
	io.Copy(io.Discard, big.Reader())
	if big.Kept() || c.Used() != 0 {
		t.Fatalf("a body over its limit: kept %v, used %d", big.Kept(), c.Used())
	}
	a.Reset(strings.NewReader(strings.Repeat("a", 16<<10)), 64<<10, c)
	io.Copy(io.Discard, a.Reader())
	b.Reset(strings.NewReader(strings.Repeat("b", 16<<10)), 64<<10, c)
	io.Copy(io.Discard, b.Reader())
	if !a.Kept() || b.Kept() {
		t.Fatalf("two bodies over the cap together: kept %v and %v; want the first only", a.Kept(), b.Kept())
	}
	if c.Over(OverBody) != 1 || c.Over(OverGateway) != 1 || len(counted) != 2 || counted[0] != OverBody || counted[1] != OverGateway {
		t.Fatalf("counted %v (body %d, gateway %d)", counted, c.Over(OverBody), c.Over(OverGateway))
	}
	a.Release()
	big.Release()
	b.Release()
	if c.Used() != 0 {
		t.Fatalf("after Release: %d bytes reserved", c.Used())
	}
}

// TestUnreadBodyTakesNothing: a body never read reserves nothing and
// allocates nothing, however often it is reset and released.
func TestUnreadBodyTakesNothing(t *testing.T) {
	c := NewCap(1 << 20)
	var b Body
	r := strings.NewReader("")
	if n := testing.AllocsPerRun(100, func() {
		b.Reset(r, 64<<10, c)
		_ = b.Kept()
		_ = b.Reader()
		b.Release()
	}); n != 0 {
		t.Fatalf("%v allocations per unread body", n)
	}
	if c.Used() != 0 {
		t.Fatal("an unread body reserved bytes")
	}
}

// TestReleaseDoesNotWaitForABlockedReader: a Reader of an earlier attempt
// blocked in the client's Read does not hold Release up; the Body is then
// not reusable, and the Reader gives the reservation back as it returns.
func TestReleaseDoesNotWaitForABlockedReader(t *testing.T) {
	c := NewCap(1 << 20)
	pr, pw := io.Pipe()
	var b Body
	b.Reset(pr, 64<<10, c)
	r := b.Reader()
	done := make(chan error)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	for !b.reading.Load() { // blocked in the pipe's Read: nothing was written
		runtime.Gosched()
	}
	if b.Release() {
		t.Fatal("Release with a Reader in the client's Read: reusable")
	}
	pw.Write([]byte("x"))
	if err := <-done; err != ErrStale {
		t.Fatalf("the blocked Reader returned %v; want ErrStale", err)
	}
	if c.Used() != 0 {
		t.Fatalf("%d bytes still reserved", c.Used())
	}
}
