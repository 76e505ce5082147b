// Package replay keeps a bounded copy of a request body as it is sent, so
// that a retry can send it again (package forward decides when; package
// proxy runs it for both serving paths and both upstream protocols).
//
// A Body wraps the client's body reader: every byte read through it is
// copied into a buffer, up to the request's limit (retry.replay_buffer),
// and Rewind makes the next reads give the kept bytes again before the
// rest of the client's body. A body that outgrows its limit, or would take
// all bodies' kept bytes over the gateway-wide Cap
// (limits.replay_buffers_bytes), drops its copy: it is no longer Kept, and
// the request is not sent again.
//
// A request mirrored to a shadow origin (package proxy) keeps its body up
// to the mirror's bound (KeepUpTo), and once the request is done Take
// hands the kept bytes, whole, to the mirror with their reservation:
// nothing is copied, and the Cap still counts them until the mirror
// releases them (Kept.Release).
//
// Invariants:
//   - A Body keeps at most its limit, and all Bodies of one Cap together at
//     most the Cap's bound (INV-LB-05: no unbounded buffer); the Cap is
//     accounted with atomics, reserved before a byte is kept and given
//     back at Release.
//   - A Body that is never read takes nothing: no buffer, no reservation,
//     no allocation (the fast path keeps one per client connection).
//   - Buffers come from a pool and go back to it at Release.
//   - Kept may be asked from another goroutine than the reader's (a duplex
//     body's sender): it is atomic.
//   - Each attempt reads through its own Reader; the Readers are
//     serialised, and one of an earlier attempt reads nothing more
//     (ErrStale), so two exchanges never share the body. Release never
//     waits for a Reader blocked in the client's Read.
package replay

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// Why a body was not kept.
const (
	OverBody    = iota // over its request's retry.replay_buffer
	OverGateway        // over limits.replay_buffers_bytes, all bodies together
	numOver
)

// Cap bounds the bytes all Bodies keep together.
type Cap struct {
	max  atomic.Int64
	used atomic.Int64
	// over counts the bodies not kept, by OverBody and OverGateway.
	over [numOver]atomic.Int64
	// Counted, when set, hears each body not kept (for a metric); it must
	// be quick.
	Counted func(why int)
}

// NewCap returns a Cap of max bytes.
func NewCap(max int64) *Cap {
	c := &Cap{}
	c.max.Store(max)
	return c
}

// SetMax changes the bound (a reload); bytes kept beyond a lower one stay
// until their requests end.
func (c *Cap) SetMax(max int64) { c.max.Store(max) }

// Used is the bytes kept now.
func (c *Cap) Used() int64 { return c.used.Load() }

// Over is how many bodies were not kept for why (OverBody, OverGateway).
func (c *Cap) Over(why int) int64 { return c.over[why].Load() }

func (c *Cap) reserve(n int64) bool {
	if c.used.Add(n) > c.max.Load() {
		c.used.Add(-n)
		return false
	}
	return true
}

func (c *Cap) count(why int) {
	c.over[why].Add(1)
	if f := c.Counted; f != nil {
		f(why)
	}
}

// chunk is the size buffers are reserved and grown by.
const chunk = 16 << 10

// bufs are the pooled buffers; one larger than maxPooled is dropped.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, chunk); return &b }}

const maxPooled = 1 << 20

// Body is a request body with its kept copy. The zero value is unused;
// Reset readies it for a request, Release ends it. Each attempt reads it
// through its own Reader, from the first byte: a Reader of an earlier
// attempt (a duplex body's sender still at work) gets ErrStale, so that
// two exchanges never share it.
type Body struct {
	mu       sync.Mutex // serialises the Readers
	src      io.Reader
	cap      *Cap
	limit    int     // the most bytes kept for a retry (Kept)
	most     int     // the most bytes kept at all (KeepUpTo), ≥ limit
	buf      *[]byte // the kept bytes, nil before the first byte is kept
	reserved int64   // of cap
	pos      int     // the next kept byte the current Reader gives
	gen      atomic.Uint32
	started  uint32  // the gen of the Reader that read last
	views    [4]view // Readers, by gen % 4
	dropped  atomic.Bool
	noRetry  atomic.Bool // more than limit bytes are kept (KeepUpTo): not sent again
	reading  atomic.Bool // a Reader is in the client's Read
	released atomic.Bool // Release ran: nothing more is kept
}

// ErrStale is what a Reader of an earlier attempt reads.
var ErrStale = errors.New("replay: the request body is read by a later attempt")

// view is one attempt's Reader.
type view struct {
	b   *Body
	gen uint32
}

// Reset readies b for a request body src, keeping up to limit bytes under
// cap (nil: no gateway-wide bound).
func (b *Body) Reset(src io.Reader, limit int, cap *Cap) {
	b.src, b.limit, b.most, b.cap = src, limit, limit, cap
	b.released.Store(false)
}

// KeepUpTo raises, for the request b was Reset for, the bytes kept to
// limit (a mirrored request's body: Take); a body above its Reset limit
// is still not sent again (Kept is false), and the Cap still bounds it.
func (b *Body) KeepUpTo(limit int) { b.most = max(b.most, limit) }

// Kept is a request body taken whole from its Body (Take): its bytes stay
// reserved under the Body's Cap until Release. The zero value holds none.
type Kept struct {
	buf      *[]byte
	cap      *Cap
	reserved int64
}

// Bytes are the body's bytes, valid until Release.
func (k *Kept) Bytes() []byte {
	if k.buf == nil {
		return nil
	}
	return *k.buf
}

// Release gives the bytes and their reservation back.
func (k *Kept) Release() {
	if k.buf != nil {
		if cap(*k.buf) <= maxPooled {
			*k.buf = (*k.buf)[:0]
			bufs.Put(k.buf)
		}
	}
	if k.reserved > 0 && k.cap != nil {
		k.cap.used.Add(-k.reserved)
	}
	*k = Kept{}
}

// Take takes the kept bytes out of b when they are the whole body, n
// bytes (n > 0), and no Reader is reading: b keeps nothing more, and the
// bytes stay reserved until the Kept's Release. It never waits.
func (b *Body) Take(n int64) (k Kept, ok bool) {
	if n <= 0 || !b.mu.TryLock() {
		return Kept{}, false
	}
	defer b.mu.Unlock()
	if b.dropped.Load() || b.buf == nil || int64(len(*b.buf)) != n {
		return Kept{}, false
	}
	k = Kept{buf: b.buf, cap: b.cap, reserved: b.reserved}
	b.buf, b.reserved = nil, 0
	b.dropped.Store(true) // nothing more is kept, nor sent again
	return k, true
}

// Release gives b's buffer and reservation back; its Readers read nothing
// more. It never waits: when a Reader of an earlier attempt is in the
// client's Read (a duplex body's sender), that Reader gives them back as
// it returns, and Release reports false: b must not be reused (the caller
// takes a new Body).
func (b *Body) Release() (reusable bool) {
	b.gen.Add(1)
	b.released.Store(true)
	if !b.mu.TryLock() {
		return false
	}
	b.free()
	b.released.Store(false)
	b.mu.Unlock()
	return true
}

// free gives the buffer and the reservation back; b.mu is held.
func (b *Body) free() {
	if b.buf != nil {
		if cap(*b.buf) <= maxPooled {
			*b.buf = (*b.buf)[:0]
			bufs.Put(b.buf)
		}
		b.buf = nil
	}
	b.unreserve()
	b.src, b.cap, b.limit, b.most, b.pos = nil, nil, 0, 0, 0
	b.dropped.Store(false)
	b.noRetry.Store(false)
}

// Kept reports whether every byte read so far is kept and no earlier
// Reader is in the middle of reading the client's body
// (forward.Rewinder): the body can be sent again from its start. True
// before any was read.
func (b *Body) Kept() bool { return !b.dropped.Load() && !b.noRetry.Load() && !b.reading.Load() }

// Reader starts a reading of the body from its first byte, for one
// attempt: the kept bytes, then the rest of the client's body. Every
// earlier Reader is ended (ErrStale).
func (b *Body) Reader() io.Reader {
	g := b.gen.Add(1)
	v := &b.views[g%uint32(len(b.views))]
	v.b, v.gen = b, g
	return v
}

// Read gives the kept bytes from the Reader's start, then the client's
// body, keeping what it reads.
func (v *view) Read(p []byte) (int, error) {
	b := v.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch g := b.gen.Load(); {
	case v.gen != g:
		return 0, ErrStale
	case v.gen != b.started: // this Reader's first read: from the first byte
		b.pos, b.started = 0, g
	}
	if b.buf != nil && b.pos < len(*b.buf) {
		k := copy(p, (*b.buf)[b.pos:])
		b.pos += k
		return k, nil
	}
	if b.src == nil {
		return 0, ErrStale
	}
	b.reading.Store(true)
	k, err := b.src.Read(p)
	b.reading.Store(false)
	if b.released.Load() { // the request ended during the read
		b.free()
		return k, ErrStale
	}
	if k > 0 && !b.dropped.Load() {
		b.keep(p[:k])
	}
	return k, err
}

// Close closes the client's body when it can be closed (a duplex body's
// writer that is cut).
func (v *view) Close() error {
	if c, ok := v.b.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// keep appends p to the kept bytes, or drops them all when they would go
// over a bound.
func (b *Body) keep(p []byte) {
	n := 0
	if b.buf != nil {
		n = len(*b.buf)
	}
	if n+len(p) > b.most {
		b.drop(OverBody)
		return
	}
	if n+len(p) > b.limit {
		b.noRetry.Store(true)
	}
	if need := int64(n + len(p)); need > b.reserved {
		grow := max(need-b.reserved, min(chunk, int64(b.most)-b.reserved))
		if b.cap != nil && !b.cap.reserve(grow) {
			b.drop(OverGateway)
			return
		}
		b.reserved += grow
	}
	if b.buf == nil {
		b.buf = bufs.Get().(*[]byte)
	}
	*b.buf = append(*b.buf, p...)
	b.pos = len(*b.buf)
}

// drop gives the kept bytes up: the body can no longer be sent again.
func (b *Body) drop(why int) {
	b.dropped.Store(true)
	if b.cap != nil && b.most > 0 { // limit 0 keeps nothing by design: not counted
		b.cap.count(why)
	}
	b.unreserve()
	if b.buf != nil {
		*b.buf = (*b.buf)[:0]
		bufs.Put(b.buf)
		b.buf = nil
	}
}

func (b *Body) unreserve() {
	if b.reserved > 0 && b.cap != nil {
		b.cap.used.Add(-b.reserved)
	}
	b.reserved = 0
}
