package sockio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns both ends of a real TCP connection on 127.0.0.1, the first
// wrapped.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	s := New(c)
	t.Cleanup(func() { s.Close(); r.c.Close() })
	return s, r.c
}

func TestRawOnLinux(t *testing.T) {
	s, _ := pair(t)
	if rawSupported && s.raw == nil {
		t.Fatal("a TCP connection gave no raw access: Conn would pass through")
	}
}

// A write larger than both socket buffers must wait for the reader (the
// EAGAIN → netpoller path) and deliver every byte in order.
func TestLargeWriteWaitsForReader(t *testing.T) {
	s, peer := pair(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	errc := make(chan error, 1)
	go func() {
		n, err := s.Write(want)
		if err == nil && n != len(want) {
			err = errors.New("short write")
		}
		errc <- err
	}()
	got := make([]byte, 0, len(want))
	buf := make([]byte, 7001) // small, odd reads: the writer fills the buffers
	for len(got) < len(want) {
		n, err := peer.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("peer read after %d bytes: %v", len(got), err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
}

// A read waits for data (the reader parks before the peer writes) and
// then returns it; the peer's close is io.EOF.
func TestReadWaitsThenEOF(t *testing.T) {
	s, peer := pair(t)
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := s.Read(buf)
		ch <- res{buf[:n], err}
	}()
	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || string(r.b) != "hello" {
		t.Fatalf("Read = %q, %v; want hello", r.b, r.err)
	}
	peer.Close()
	n, err := s.Read(make([]byte, 8))
	if n != 0 || err != io.EOF {
		t.Fatalf("Read after the peer closed = %d, %v; want 0, io.EOF", n, err)
	}
}

// Deadlines work as on net.Conn: a timeout is a net.Error whose Timeout is
// true and which is os.ErrDeadlineExceeded.
func TestDeadlines(t *testing.T) {
	s, _ := pair(t)
	s.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := s.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline = %v; want a timeout", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("Read error = %#v; want a *net.OpError for read", err)
	}
	s.SetReadDeadline(time.Time{})

	s.SetWriteDeadline(time.Now().Add(-time.Second))
	_, err = s.Write([]byte("x"))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past the deadline = %v; want a timeout", err)
	}
}

// Close unblocks a waiting Read with net.ErrClosed.
func TestCloseUnblocksRead(t *testing.T) {
	s, _ := pair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 8))
		errc <- err
	}()
	// The reader may not have parked yet; Close works either way.
	s.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read on a closed conn = %v; want net.ErrClosed", err)
	}
}

// A write to a peer that reset the connection fails with the errno,
// shaped as net.Conn's error.
func TestWriteAfterReset(t *testing.T) {
	s, peer := pair(t)
	peer.(*net.TCPConn).SetLinger(0) // close with RST
	peer.Close()
	var err error
	for i := 0; i < 100 && err == nil; i++ { // the RST must arrive first
		_, err = s.Write([]byte("after the reset"))
		if err == nil {
			time.Sleep(time.Millisecond)
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Write after a reset = %v; want ECONNRESET or EPIPE", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("Write error = %#v; want a *net.OpError for write", err)
	}
}

// A connection without raw access passes through.
func TestPassThrough(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := New(a)
	if s.raw != nil {
		t.Fatal("net.Pipe gave raw access")
	}
	go b.Write([]byte("pipe"))
	buf := make([]byte, 8)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "pipe" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if s.Unwrap() != a {
		t.Fatal("Unwrap lost the connection")
	}
}

// Reads and writes allocate nothing.
func TestNoAllocs(t *testing.T) {
	s, peer := pair(t)
	msg := []byte("ping")
	buf := make([]byte, 16)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per write+read; want 0", allocs)
	}
}

// BenchmarkPingPong is one small write and read each way over loopback,
// through Conn and through net.Conn.
func BenchmarkPingPong(b *testing.B) {
	for _, v := range []string{"net.Conn", "sockio", "sockio.WriteRead"} {
		wrap, name := v != "net.Conn", v
		b.Run(name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				var rw io.ReadWriter = c
				if wrap {
					rw = New(c)
				}
				buf := make([]byte, 64)
				for {
					n, err := rw.Read(buf)
					if err != nil {
						return
					}
					if _, err := rw.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			var rw io.ReadWriter = c
			if wrap {
				rw = New(c)
			}
			msg, buf := []byte("ping"), make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if v == "sockio.WriteRead" {
					if n, err := rw.(*Conn).WriteRead(msg, buf); err != nil || n != len(msg) {
						b.Fatal(n, err)
					}
					continue
				}
				if _, err := rw.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rw, buf[:len(msg)]); err != nil {
					b.Fatal(err)
				}
			}
			c.Close()
			<-done
		})
	}
}

// echoPeer echoes what it reads on peer until it fails.
func echoPeer(t *testing.T, peer net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := peer.Read(buf)
			if err != nil {
				return
			}
			if _, err := peer.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { peer.Close(); <-done })
}

// WriteRead sends a request and returns the reply, over and over on one
// connection, allocating nothing.
func TestWriteReadRoundTrips(t *testing.T) {
	s, peer := pair(t)
	echoPeer(t, peer)
	buf := make([]byte, 64)
	msg := []byte("ping")
	allocs := testing.AllocsPerRun(200, func() {
		n, err := s.WriteRead(msg, buf)
		if err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("WriteRead = %q, %v", buf[:n], err)
		}
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per WriteRead; want 0", allocs)
	}
}

// A request larger than the socket buffers is finished through Write
// (the kernel takes part of it inside the read) and the reply still comes.
func TestWriteReadLargeRequest(t *testing.T) {
	s, peer := pair(t)
	want := bytes.Repeat([]byte("x"), 4<<20)
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, peer, int64(len(want)))
		if err == nil {
			_, err = peer.Write([]byte("done"))
		}
		done <- err
	}()
	buf := make([]byte, 16)
	n, err := s.WriteRead(want, buf)
	if err != nil || string(buf[:n]) != "done" {
		t.Fatalf("WriteRead = %q, %v; want done", buf[:n], err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The peer's close is io.EOF; a reset peer is a write or read error; a
// passed deadline is a timeout.
func TestWriteReadErrors(t *testing.T) {
	s, peer := pair(t)
	go func() {
		b := make([]byte, 4)
		io.ReadFull(peer, b)
		peer.Close() // reads the request, answers nothing
	}()
	if _, err := s.WriteRead([]byte("ping"), make([]byte, 8)); err != io.EOF {
		t.Fatalf("WriteRead to a peer that closed after the request = %v, want io.EOF", err)
	}

	s2, peer2 := pair(t)
	peer2.(*net.TCPConn).SetLinger(0)
	peer2.Close()
	var err error
	for i := 0; i < 100 && (err == nil || err == io.EOF); i++ {
		_, err = s2.WriteRead([]byte("ping"), make([]byte, 8))
		if err == nil || err == io.EOF {
			time.Sleep(time.Millisecond) // the RST is on its way
		}
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("WriteRead to a reset peer = %v; want ECONNRESET or EPIPE", err)
	}

	s3, _ := pair(t)
	s3.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := s3.WriteRead([]byte("ping"), make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteRead past the read deadline = %v, want a timeout", err)
	}
}
