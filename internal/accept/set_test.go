package accept

import (
	"errors"
	"net"
	"testing"
)

// setServe accepts from s until it ends, echoing one byte per connection
// so that the client knows which set served it; the error it ended with
// arrives on the returned channel.
func setServe(s *Set, tag byte) <-chan error {
	ended := make(chan error, 1)
	go func() {
		for {
			c, err := s.Accept()
			if err != nil {
				ended <- err
				return
			}
			c.Write([]byte{tag})
			c.Close()
		}
	}()
	return ended
}

func dialRead(t *testing.T, addr string) error {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	var b [1]byte
	_, err = c.Read(b[:])
	return err
}

// TestSetMovesToANewAddressWithoutAGap: the new listener serves before
// the old one closes; the old address then refuses, the set's accept loop
// never saw an error.
func TestSetMovesToANewAddressWithoutAGap(t *testing.T) {
	a, b := listen(t), listen(t)
	s := NewSet(a)
	ended := setServe(s, 'x')
	if err := dialRead(t, a.Addr().String()); err != nil {
		t.Fatalf("old address before the move: %v", err)
	}
	s.Add(b)
	for _, addr := range []string{a.Addr().String(), b.Addr().String()} {
		if err := dialRead(t, addr); err != nil {
			t.Fatalf("%s while both listen: %v", addr, err)
		}
	}
	if got := s.Addr().String(); got != b.Addr().String() {
		t.Errorf("Addr = %s, want the newest listener's %s", got, b.Addr())
	}
	s.Retire(a)
	if err := dialRead(t, a.Addr().String()); err == nil {
		t.Errorf("the retired address still serves")
	}
	if err := dialRead(t, b.Addr().String()); err != nil {
		t.Fatalf("new address after the move: %v", err)
	}
	select {
	case err := <-ended:
		t.Fatalf("accept loop ended on a retired listener: %v", err)
	default:
	}
	if n := len(s.Listeners()); n != 1 {
		t.Errorf("%d listeners after the move, want 1", n)
	}
	s.Close()
	if err := <-ended; !errors.Is(err, net.ErrClosed) {
		t.Errorf("after Close, Accept = %v, want net.ErrClosed", err)
	}
}

// TestSetReportsAListenerThatFailsForGood: a member closed underneath the
// set (not retired) ends the accept loop with its error, as the listener
// alone would.
func TestSetReportsAListenerThatFailsForGood(t *testing.T) {
	a, b := listen(t), listen(t)
	s := NewSet(a, b)
	defer s.Close()
	ended := setServe(s, 'x')
	a.Close()
	if err := <-ended; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept = %v, want the failed listener's error (use of closed connection)", err)
	}
}

// TestSetClosesWhatItCannotHandOver: Add on a closed set closes the
// listener; Close leaves no accept goroutine behind (goleak in TestMain).
func TestSetClosesWhatItCannotHandOver(t *testing.T) {
	s := NewSet()
	s.Close()
	ln := listen(t)
	s.Add(ln)
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("a listener added to a closed set still accepts: %v", err)
	}
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on a closed set = %v", err)
	}
	if got := s.Addr(); got != nil {
		t.Errorf("Addr of a set that never had a listener = %v", got)
	}
}
