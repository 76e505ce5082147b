package h2

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

// Stream is one request's stream. The goroutine that opened it owns it:
// it writes the body, waits for the head, reads the body and Releases it.
// Close (and so Cancel) may come from any goroutine.
type Stream struct {
	c    *Conn
	id   uint32
	wake chan struct{} // cap 1: the state below changed
	// holds counts the goroutines using the stream (its owner and a
	// request body's sender): the last to let go Releases it.
	holds atomic.Int32

	// guarded by c.mu
	status     int
	header     []hpack.HeaderField
	trailer    []hpack.HeaderField
	gotHead    bool
	remoteDone bool // the origin ended the stream (END_STREAM)
	localDone  bool // this side ended it
	resetSent  bool
	resetRecv  bool
	err        error
	buf        []byte // body received and not yet read, from r
	r          int
	recvWin    int64 // what the origin may still send on the stream
	unacked    int64 // consumed and not yet credited back
	sendWin    int64
	wakeQueued bool
}

// Wait ends a stream's wait (for a window, the head or body) with ErrDone:
// Done for a context's end, Expire for a timer's; either may be nil.
type Wait struct {
	Done   <-chan struct{}
	Expire <-chan time.Time
}

var streams = sync.Pool{New: func() any { return &Stream{wake: make(chan struct{}, 1)} }}

// maxKeptBuf is the largest body buffer a recycled stream keeps.
const maxKeptBuf = 32 << 10

func (s *Stream) wakeNow() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Open starts a stream with the request header block f (Pseudo, then
// Add). end says the request has no body: the HEADERS end the stream.
// It fails only with ErrUnusable, when nothing was sent.
func (c *Conn) Open(f *Fields, end bool) (*Stream, error) {
	s := streams.Get().(*Stream)
	c.lockWrite()
	if !c.Usable() || c.nextID > maxStreamID {
		if c.nextID > maxStreamID {
			c.goneAway.Store(true) // the IDs ran out: a new connection is needed
		}
		c.unlockWrite()
		streams.Put(s)
		return nil, ErrUnusable
	}
	id := c.nextID
	c.nextID += 2
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.unlockWrite()
		streams.Put(s)
		return nil, ErrUnusable
	}
	s.c, s.id = c, id
	s.holds.Store(1)
	s.sendWin, s.recvWin = c.peerInit, int64(c.opt.StreamWindow)
	s.localDone = end
	frame := c.peerFrame
	c.streams[id] = s
	busy := len(c.streams) > 1
	c.mu.Unlock()
	c.writeHeaders(id, f.b, end, frame)
	c.unlockWriteLater(busy)
	return s, nil
}

// Head waits for the response head and returns its status; Header has
// its fields. w ends the wait with ErrDone (the stream is then the
// caller's to Cancel or Release).
func (s *Stream) Head(w Wait) (int, error) {
	c := s.c
	for {
		c.mu.Lock()
		if s.gotHead {
			st := s.status
			c.mu.Unlock()
			return st, nil
		}
		err := s.err
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if err := s.await(w); err != nil {
			return 0, err
		}
	}
}

// Header is the response head's fields (no pseudo-header fields), names
// in lower case; valid from Head until Release.
func (s *Stream) Header() []hpack.HeaderField { return s.header }

// Value is the first value of the response field name (lower case).
func (s *Stream) Value(name string) (string, bool) {
	for i := range s.header {
		if s.header[i].Name == name {
			return s.header[i].Value, true
		}
	}
	return "", false
}

// Trailer is the response's trailer fields; valid once Read returned
// io.EOF, until Release.
func (s *Stream) Trailer() []hpack.HeaderField {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.trailer
}

// Buffered reports whether Read would return without waiting.
func (s *Stream) Buffered() bool {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.r < len(s.buf) || s.remoteDone || s.err != nil
}

// Read reads the response body; io.EOF once the origin ended the stream
// and everything was read. w ends a wait with ErrDone.
func (s *Stream) Read(p []byte, w Wait) (int, error) {
	c := s.c
	for {
		c.mu.Lock()
		if s.r < len(s.buf) {
			n := copy(p, s.buf[s.r:])
			s.r += n
			var inc uint32
			s.unacked += int64(n)
			if !s.remoteDone && s.unacked >= int64(c.opt.StreamWindow)/2 && c.err == nil {
				inc = uint32(s.unacked)
				s.recvWin += s.unacked
				s.unacked = 0
			}
			due := c.creditLocked(int64(n))
			c.mu.Unlock()
			c.sendCredit(s.id, inc, due)
			return n, nil
		}
		end, err := s.remoteDone, s.err
		c.mu.Unlock()
		switch {
		case end:
			return 0, io.EOF
		case err != nil:
			return 0, err
		}
		if err := s.await(w); err != nil {
			return 0, err
		}
	}
}

// await waits for the stream's state to change: nil, or ErrDone when w
// fired first.
func (s *Stream) await(w Wait) error {
	select {
	case <-s.wake:
		return nil
	case <-w.Done:
	case <-w.Expire:
	}
	return ErrDone
}

// ErrBodyNotWanted fails a body write on a stream the origin already
// ended or reset: its response (if it sent one) is still to be read.
var ErrBodyNotWanted = errors.New("the origin ended the stream; the rest of the request body is not wanted")

// Write sends p as DATA within the flow-control windows. w ends a wait
// for a window with ErrDone.
func (s *Stream) Write(p []byte, w Wait) (int, error) {
	c := s.c
	sent := 0
	for len(p) > 0 {
		c.mu.Lock()
		var k int
		for {
			switch {
			case s.err != nil:
				err := s.err
				c.mu.Unlock()
				return sent, err
			case s.resetRecv || s.localDone:
				c.mu.Unlock()
				return sent, ErrBodyNotWanted
			}
			k = int(min(int64(len(p)), s.sendWin, c.sendWin, int64(c.peerFrame)))
			if k > 0 {
				break
			}
			ch := c.winCh
			c.mu.Unlock()
			select {
			case <-ch:
			case <-w.Done:
				return sent, ErrDone
			case <-w.Expire:
				return sent, ErrDone
			}
			c.mu.Lock()
		}
		s.sendWin -= int64(k)
		c.sendWin -= int64(k)
		c.mu.Unlock()
		c.lockWrite()
		c.writeFrame(frameData, 0, s.id, p[:k])
		c.unlockWrite()
		sent += k
		p = p[k:]
	}
	return sent, nil
}

// CloseWrite ends the request: its trailers when trailer is non-nil and
// not empty, an empty DATA frame with END_STREAM otherwise.
func (s *Stream) CloseWrite(trailer *Fields) error {
	c := s.c
	c.mu.Lock()
	switch {
	case s.err != nil:
		err := s.err
		c.mu.Unlock()
		return err
	case s.resetRecv || s.localDone:
		c.mu.Unlock()
		return nil
	}
	s.localDone = true
	frame := c.peerFrame
	c.mu.Unlock()
	c.lockWrite()
	if trailer != nil && len(trailer.b) > 0 {
		c.writeHeaders(s.id, trailer.b, true, frame)
	} else {
		c.writeFrame(frameData, flagEndStream, s.id, nil)
	}
	c.unlockWrite()
	return nil
}

// Cancel fails the stream with err, unless it already ended, and resets
// it (RST_STREAM CANCEL). Waits on it end at once. Any goroutine may call
// it, until Release.
func (s *Stream) Cancel(err error) {
	c := s.c
	c.mu.Lock()
	if s.err != nil || s.remoteDone && s.localDone || s.resetRecv {
		c.mu.Unlock()
		return
	}
	if s.err == nil {
		s.err = err
	}
	send := !s.resetSent && c.err == nil
	s.resetSent = true
	s.wakeNow()
	c.broadcastLocked()
	c.mu.Unlock()
	if send {
		c.lockWrite()
		c.writeRST(s.id, CodeCancel)
		c.unlockWrite()
	}
}

// Close cancels the stream with ErrCanceled (io.Closer, for a watcher
// that cuts an exchange when its client leaves).
func (s *Stream) Close() error {
	s.Cancel(ErrCanceled)
	return nil
}

// Release ends the owner's use of the stream: one that has not ended both
// ways is reset, its unread body is credited back to the connection, and
// the stream is recycled. It must not be used afterwards.
func (s *Stream) Release() {
	c := s.c
	c.mu.Lock()
	reset := !s.resetSent && !s.resetRecv && c.err == nil && !(s.remoteDone && s.localDone)
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
	}
	if s.wakeQueued {
		for i, w := range c.wakes {
			if w == s {
				c.wakes = append(c.wakes[:i], c.wakes[i+1:]...)
				break
			}
		}
	}
	due := c.creditLocked(int64(len(s.buf) - s.r))
	c.mu.Unlock()
	if reset || due > 0 {
		c.lockWrite()
		if reset {
			c.writeRST(s.id, CodeCancel)
		}
		if due > 0 {
			c.writeWindowUpdate(0, due)
		}
		c.unlockWrite()
	}
	s.recycle()
}

// Hold adds a holder of the stream: a goroutine besides its owner that
// uses it (a request body's sender). Each holder, the owner included, lets
// go with Unhold; the last one Releases the stream.
func (s *Stream) Hold() { s.holds.Add(1) }

// Unhold lets go of one hold; the last Releases the stream.
func (s *Stream) Unhold() {
	if s.holds.Add(-1) <= 0 {
		s.Release()
	}
}

func (s *Stream) recycle() {
	for i := range s.header {
		s.header[i] = hpack.HeaderField{}
	}
	for i := range s.trailer {
		s.trailer[i] = hpack.HeaderField{}
	}
	buf := s.buf[:0]
	if cap(buf) > maxKeptBuf {
		buf = nil
	}
	s.c, s.id, s.status, s.err, s.r = nil, 0, 0, nil, 0
	s.header, s.trailer, s.buf = s.header[:0], s.trailer[:0], buf
	s.gotHead, s.remoteDone, s.localDone, s.resetSent, s.resetRecv, s.wakeQueued = false, false, false, false, false, false
	s.recvWin, s.unacked, s.sendWin = 0, 0, 0
	select {
	case <-s.wake:
	default:
	}
	streams.Put(s)
}
