package sockio

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// drain makes s's last read one that emptied the socket: the peer sends
// a byte and s reads it into a larger buffer. The byte is sent a moment
// after the read starts, so the read usually parks and its wake takes the
// readiness (sent first, the netpoller may report it after the read's
// reset, which leaves a readiness for nothing behind).
func drain(t *testing.T, s *Conn, peer net.Conn) {
	t.Helper()
	sendSoon(peer, "a")
	buf := make([]byte, 16)
	if n, err := s.Read(buf); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v; want the one byte", n, err)
	}
}

// sendSoon has the peer send b a millisecond from now.
func sendSoon(peer net.Conn, b string) {
	go func() {
		time.Sleep(time.Millisecond)
		peer.Write([]byte(b))
	}()
}

// On the platform and release it is built for, WaitRead reaches the
// runtime's poll context: a Go upgrade or a new net layout that loses it
// fails here rather than silently costing a read per request.
func TestWaitReadIsActive(t *testing.T) {
	s, _ := pair(t)
	if waitSupported && s.pd == 0 {
		t.Fatal("no poll context for a TCP connection: WaitRead would never park")
	}
}

// After a read that emptied the socket, WaitRead parks on the netpoller
// until the read deadline: it returns no earlier, and the Read after it
// reports the timeout.
func TestWaitReadParksUntilTheDeadline(t *testing.T) {
	if !waitSupported {
		t.Skip("WaitRead returns at once here")
	}
	s, peer := pair(t)
	// A readiness for nothing (drain's comment) may wake WaitRead early;
	// it must park in one of a few tries, and Read then waits out the
	// deadline either way.
	for range 5 {
		s.SetReadDeadline(time.Time{})
		drain(t, s, peer)
		deadline := time.Now().Add(50 * time.Millisecond)
		s.SetReadDeadline(deadline)
		s.WaitRead()
		parked := !time.Now().Before(deadline)
		if _, err := s.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read after the deadline = %v; want a timeout", err)
		}
		if parked {
			return
		}
	}
	t.Fatal("WaitRead returned before the deadline with nothing to read, in 5 tries")
}

// Bytes that came between the read that emptied the socket and WaitRead
// are not lost: WaitRead returns for them (the readiness is kept, not
// reset), and it leaves them for Read. Were the readiness lost, WaitRead
// would park until the 10 s deadline and Read would time out.
func TestWaitReadKeepsReadinessSeenBeforeIt(t *testing.T) {
	s, peer := pair(t)
	drain(t, s, peer)
	if _, err := peer.Write([]byte("next")); err != nil { // on loopback it is in s's queue when Write returns
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	s.WaitRead()
	buf := make([]byte, 16)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "next" {
		t.Fatalf("Read after WaitRead = %q, %v; want \"next\"", buf[:n], err)
	}
}

// A parked WaitRead wakes for bytes sent later, and reads none of them.
func TestWaitReadWakesForLaterBytes(t *testing.T) {
	s, peer := pair(t)
	for i := range 20 {
		drain(t, s, peer)
		sendSoon(peer, "later") // usually after WaitRead parked; either order must work
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
		s.WaitRead()
		buf := make([]byte, 16)
		n, err := s.Read(buf)
		if err != nil || string(buf[:n]) != "later" {
			t.Fatalf("round %d: Read after WaitRead = %q, %v; want \"later\"", i, buf[:n], err)
		}
	}
}

// A read that filled its buffer may have left bytes in the socket whose
// readiness was already taken: WaitRead must not park then.
func TestWaitReadAfterAFullReadReturnsAtOnce(t *testing.T) {
	s, peer := pair(t)
	sendSoon(peer, "0123456789") // usually after Read parked, so the wake takes the readiness
	buf := make([]byte, 5)
	if n, err := s.Read(buf); n != 5 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	s.SetReadDeadline(time.Now().Add(time.Second))
	s.WaitRead()
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "56789" {
		t.Fatalf("Read after WaitRead = %q, %v; want the rest, \"56789\"", buf[:n], err)
	}
}

// Close wakes a parked WaitRead, and the Read after it reports the close.
func TestCloseWakesWaitRead(t *testing.T) {
	s, peer := pair(t)
	drain(t, s, peer)
	done := make(chan error, 1)
	go func() {
		s.WaitRead()
		_, err := s.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(5 * time.Millisecond) // let it park; Close works either way
	s.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close = %v; want net.ErrClosed", err)
	}
}

// The peer's close wakes WaitRead, and Read reports EOF.
func TestPeerCloseWakesWaitRead(t *testing.T) {
	s, peer := pair(t)
	drain(t, s, peer)
	go func() {
		time.Sleep(time.Millisecond)
		peer.Close()
	}()
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	s.WaitRead()
	if n, err := s.Read(make([]byte, 8)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read after the peer closed = %d, %v; want EOF", n, err)
	}
}

// Where there is no poll context (a pipe) WaitRead returns at once.
func TestWaitReadPassThrough(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := New(a)
	s.WaitRead()
	go b.Write([]byte("pipe"))
	buf := make([]byte, 8)
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "pipe" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
}
