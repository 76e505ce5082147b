package h2

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

// Frame types, flags and settings (RFC 9113 §6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	settingHeaderTableSize   = 0x1
	settingEnablePush        = 0x2
	settingMaxStreams        = 0x3
	settingInitialWindowSize = 0x4
	settingMaxFrameSize      = 0x5
	settingMaxHeaderListSize = 0x6

	clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	// maxFrame is the largest frame payload this side accepts (it never
	// raises SETTINGS_MAX_FRAME_SIZE) and the peer's default.
	maxFrame      = 16384
	initialWindow = 65535
	maxWindow     = 1<<31 - 1
	maxStreamID   = 1<<31 - 1
)

// Options configure a connection; the zero value is usable.
type Options struct {
	// MaxHeaderListSize bounds a response's header list (RFC 9113's
	// size: name + value + 32 per field); it is advertised to the origin
	// and a larger list fails the stream with ErrHeadTooLarge. 64 KiB
	// when 0.
	MaxHeaderListSize uint32
	// WriteTimeout fails the connection when a write makes no progress
	// for this long; 0 means none.
	WriteTimeout time.Duration
	// StreamWindow is the receive window of each stream (the most body
	// one stream buffers for a slow reader); 256 KiB when 0.
	StreamWindow uint32
	// ConnWindow is the connection's receive window; 4 MiB when 0.
	ConnWindow uint32
	// DefaultMaxStreams is Streams() when the origin's first SETTINGS
	// sets no MAX_CONCURRENT_STREAMS ("unlimited"); 1000 when 0.
	DefaultMaxStreams uint32
}

func (o *Options) fill() {
	if o.MaxHeaderListSize == 0 {
		o.MaxHeaderListSize = 64 << 10
	}
	if o.StreamWindow == 0 {
		o.StreamWindow = 256 << 10
	}
	if o.ConnWindow == 0 {
		o.ConnWindow = 4 << 20
	}
	if o.DefaultMaxStreams == 0 {
		o.DefaultMaxStreams = 1000
	}
}

// Conn is an HTTP/2 client connection.
type Conn struct {
	nc  net.Conn
	opt Options
	br  *bufio.Reader
	tls *tls.ConnectionState // nc's, when it is TLS

	// The writer. waiting counts goroutines waiting for wmu: the holder
	// that sees one leaves the flush to it.
	wmu     sync.Mutex
	waiting atomic.Int32
	bw      *bufio.Writer // guarded by wmu
	nextID  uint32        // guarded by wmu
	wdl     time.Time     // guarded by wmu: the write deadline set
	frame   [9]byte       // guarded by wmu

	mu         sync.Mutex
	streams    map[uint32]*Stream // guarded by mu: open until Release
	sendWin    int64              // guarded by mu: the connection's window for DATA sent
	peerInit   int64              // guarded by mu: the origin's INITIAL_WINDOW_SIZE
	peerFrame  int                // guarded by mu: the origin's MAX_FRAME_SIZE
	winCh      chan struct{}      // guarded by mu: closed (and replaced) when a send window grows
	recvWin    int64              // guarded by mu: what the origin may still send on the connection
	recvCredit int64              // guarded by mu: consumed and not yet credited back
	err        error              // guarded by mu: why the connection ended
	pings      map[uint64]chan struct{}
	pingSeq    uint64
	wakes      []*Stream // guarded by mu: streams to wake before the read loop blocks

	maxStreams atomic.Uint32
	broken     atomic.Bool // failed or closed
	goneAway   atomic.Bool
	ready      chan struct{} // closed once the origin's first SETTINGS arrived
	readDone   chan struct{} // closed when the read loop ended

	// The read loop's own.
	dec      *hpack.Decoder
	rbuf     []byte
	hblock   []byte // a header block being assembled from CONTINUATION frames
	hstream  uint32 // its stream; 0 when none
	hend     bool   // its HEADERS frame had END_STREAM
	decoded  []hpack.HeaderField
	hsize    uint32
	tooLarge bool
	sawFirst bool
}

// Handshake starts HTTP/2 on nc (a connection that negotiated h2, or
// cleartext with prior knowledge) and returns once the origin's first
// SETTINGS arrived, so Streams is the origin's from the first use. ctx
// bounds the wait; on failure nc is closed.
func Handshake(ctx context.Context, nc net.Conn, o Options) (*Conn, error) {
	o.fill()
	c := &Conn{
		nc: nc, opt: o,
		br:       bufio.NewReaderSize(nc, 32<<10),
		bw:       bufio.NewWriterSize(nc, 32<<10),
		nextID:   1,
		streams:  make(map[uint32]*Stream),
		sendWin:  initialWindow,
		peerInit: initialWindow, peerFrame: maxFrame,
		winCh:    make(chan struct{}),
		recvWin:  int64(o.ConnWindow),
		pings:    make(map[uint64]chan struct{}),
		ready:    make(chan struct{}),
		readDone: make(chan struct{}),
		rbuf:     make([]byte, maxFrame),
	}
	if tc, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := tc.ConnectionState()
		c.tls = &st
	}
	c.dec = hpack.NewDecoder(4096, c.emit)
	c.dec.SetMaxStringLength(int(o.MaxHeaderListSize))
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	c.wmu.Lock()
	c.bw.WriteString(clientPreface)
	var s [4 * 6]byte
	for i, kv := range [4][2]uint32{
		{settingEnablePush, 0},
		{settingInitialWindowSize, o.StreamWindow},
		{settingMaxHeaderListSize, o.MaxHeaderListSize},
		{settingMaxStreams, 0}, // no pushed streams
	} {
		binary.BigEndian.PutUint16(s[i*6:], uint16(kv[0]))
		binary.BigEndian.PutUint32(s[i*6+2:], kv[1])
	}
	c.writeFrame(frameSettings, 0, 0, s[:])
	if o.ConnWindow > initialWindow {
		c.writeWindowUpdate(0, o.ConnWindow-initialWindow)
	}
	err := c.bw.Flush()
	c.wmu.Unlock()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("send the HTTP/2 preface: %w", err)
	}
	go c.readLoop()
	select {
	case <-c.ready:
		if err := nc.SetDeadline(time.Time{}); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	case <-c.readDone:
		return nil, fmt.Errorf("HTTP/2 handshake (the origin's SETTINGS): %w", c.Err())
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("HTTP/2 handshake (the origin's SETTINGS): %w", ctx.Err())
	}
}

// TLS is the connection's TLS state, nil in cleartext.
func (c *Conn) TLS() *tls.ConnectionState { return c.tls }

// Streams is the origin's SETTINGS_MAX_CONCURRENT_STREAMS as last received.
func (c *Conn) Streams() int { return int(c.maxStreams.Load()) }

// Usable is false once the connection failed or was closed, the origin
// sent GOAWAY, or its stream IDs ran out.
func (c *Conn) Usable() bool { return !c.broken.Load() && !c.goneAway.Load() }

// Err is why the connection ended; nil while it works.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection at once; streams not yet ended fail.
func (c *Conn) Close() error {
	c.broken.Store(true)
	err := c.nc.Close()
	c.fail(&ConnError{Err: ErrClosed})
	return err
}

// Ping sends a PING and calls done with nil once it is answered, or with
// an error when timeout passed first or the connection failed; it waits
// on a goroutine of its own.
func (c *Conn) Ping(timeout time.Duration, done func(error)) {
	go func() { done(c.ping(timeout)) }()
}

func (c *Conn) ping(timeout time.Duration) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pingSeq++
	seq, ch := c.pingSeq, make(chan struct{})
	c.pings[seq] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pings, seq)
		c.mu.Unlock()
	}()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	c.lockWrite()
	c.writeFrame(framePing, 0, 0, b[:])
	c.unlockWrite()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-c.readDone:
		return c.Err()
	case <-t.C:
		return fmt.Errorf("no PING answer within %v", timeout)
	}
}

// lockWrite takes the writer.
func (c *Conn) lockWrite() {
	c.waiting.Add(1)
	c.wmu.Lock()
	c.waiting.Add(-1)
}

// unlockWriteLater releases the writer and, when other streams are open
// on the connection (busy: requests are arriving together), flushes after
// the goroutines ready to run now had their turn (runtime.Gosched): the
// requests they start join the same write (and TLS record), and one of
// them, or this one, flushes them all. Under load that is many requests
// per write. A stream alone on its connection flushes at once: the yield
// would wake an idle thread to look for work (the runtime's wakep) and
// find none, a cost paid per request at low request rates.
func (c *Conn) unlockWriteLater(busy bool) {
	if !busy {
		c.unlockWrite()
		return
	}
	due := c.waiting.Load() == 0 && c.bw.Buffered() > 0
	c.wmu.Unlock()
	if due {
		yield()
		c.lockWrite()
		c.unlockWrite() // a no-op when another writer flushed meanwhile
	}
}

// yield is runtime.Gosched; tests count the calls.
var yield = runtime.Gosched

// unlockWrite releases the writer, flushing unless another writer waits
// for it (that one flushes, with its own frames).
func (c *Conn) unlockWrite() {
	if c.waiting.Load() == 0 && c.bw.Buffered() > 0 {
		c.flushLocked()
	}
	c.wmu.Unlock()
}

func (c *Conn) flushLocked() {
	if c.opt.WriteTimeout > 0 {
		// Moved at most every half timeout: a write is failed between
		// WriteTimeout/2 and WriteTimeout after it stopped progressing.
		if now := time.Now(); c.wdl.Sub(now) < c.opt.WriteTimeout/2 {
			c.wdl = now.Add(c.opt.WriteTimeout)
			_ = c.nc.SetWriteDeadline(c.wdl)
		}
	}
	if err := c.bw.Flush(); err != nil {
		c.broken.Store(true)
		c.nc.Close()
		c.fail(&ConnError{Err: fmt.Errorf("write: %w", err)})
	}
}

// writeFrame writes one frame into the writer (wmu held). A write error
// is found by the flush.
func (c *Conn) writeFrame(typ, flags byte, id uint32, p []byte) {
	n := len(p)
	f := &c.frame
	f[0], f[1], f[2], f[3], f[4] = byte(n>>16), byte(n>>8), byte(n), typ, flags
	binary.BigEndian.PutUint32(f[5:], id)
	c.bw.Write(f[:])
	c.bw.Write(p)
}

func (c *Conn) writeWindowUpdate(id, inc uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], inc)
	c.writeFrame(frameWindowUpdate, 0, id, b[:])
}

func (c *Conn) writeRST(id uint32, code ErrCode) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(code))
	c.writeFrame(frameRSTStream, 0, id, b[:])
}

// writeHeaders writes a header block as HEADERS and, past the origin's
// frame size, CONTINUATION frames (wmu held).
func (c *Conn) writeHeaders(id uint32, block []byte, end bool, frame int) {
	typ, flags := byte(frameHeaders), byte(0)
	if end {
		flags = flagEndStream
	}
	for {
		k := min(len(block), frame)
		if k == len(block) {
			flags |= flagEndHeaders
		}
		c.writeFrame(typ, flags, id, block[:k])
		block = block[k:]
		if len(block) == 0 {
			return
		}
		typ, flags = frameContinuation, 0
	}
}

// fail ends the connection with err: every stream not yet ended fails
// with it, waiting writers and readers wake.
func (c *Conn) fail(err error) {
	c.broken.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	for _, s := range c.streams {
		if !s.remoteDone && s.err == nil {
			s.err = err
		}
		s.wakeNow()
	}
	c.broadcastLocked()
}

// broadcastLocked wakes every writer waiting for a send window.
func (c *Conn) broadcastLocked() {
	close(c.winCh)
	c.winCh = make(chan struct{})
}

// queueWakeLocked wakes s before the read loop next blocks.
func (c *Conn) queueWakeLocked(s *Stream) {
	if !s.wakeQueued {
		s.wakeQueued = true
		c.wakes = append(c.wakes, s)
	}
}

func (c *Conn) flushWakes() {
	c.mu.Lock()
	for i, s := range c.wakes {
		s.wakeQueued = false
		s.wakeNow()
		c.wakes[i] = nil
	}
	c.wakes = c.wakes[:0]
	c.mu.Unlock()
}

// wouldBlock reports whether reading the next frame may wait for the
// socket.
func (c *Conn) wouldBlock() bool {
	k := c.br.Buffered()
	if k < 9 {
		return true
	}
	h, _ := c.br.Peek(9)
	return k < 9+(int(h[0])<<16|int(h[1])<<8|int(h[2]))
}

func (c *Conn) readLoop() {
	defer close(c.readDone)
	err := c.readFrames()
	var ce *ConnError
	if !errors.As(err, &ce) {
		err = &ConnError{Err: fmt.Errorf("read: %w", err)}
	} else if ce.Code != CodeNo && !c.broken.Load() {
		// Tell the origin why, best effort.
		var b [8]byte
		binary.BigEndian.PutUint32(b[4:], uint32(ce.Code))
		c.lockWrite()
		c.writeFrame(frameGoAway, 0, 0, b[:])
		c.flushLocked()
		c.wmu.Unlock()
	}
	c.broken.Store(true)
	c.nc.Close()
	c.fail(err)
	c.flushWakes()
}

func protocolError(format string, args ...any) error {
	return &ConnError{Code: CodeProtocol, Err: fmt.Errorf(format, args...)}
}

func (c *Conn) readFrames() error {
	var h [9]byte
	for {
		if c.wouldBlock() {
			c.flushWakes()
		}
		if _, err := io.ReadFull(c.br, h[:]); err != nil {
			return err
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags := h[3], h[4]
		id := binary.BigEndian.Uint32(h[5:]) & maxStreamID
		if n > maxFrame {
			return &ConnError{Code: CodeFrameSize, Err: fmt.Errorf("a %d-byte frame, above %d", n, maxFrame)}
		}
		p := c.rbuf[:n]
		if _, err := io.ReadFull(c.br, p); err != nil {
			return err
		}
		if !c.sawFirst && (typ != frameSettings || flags&flagAck != 0) {
			return protocolError("the origin's first frame is not SETTINGS (type %d)", typ)
		}
		if c.hstream != 0 && (typ != frameContinuation || id != c.hstream) {
			return protocolError("a frame (type %d) inside stream %d's header block", typ, c.hstream)
		}
		var err error
		switch typ {
		case frameData:
			err = c.onData(id, flags, p)
		case frameHeaders:
			err = c.onHeaders(id, flags, p)
		case frameContinuation:
			if c.hstream == 0 {
				return protocolError("CONTINUATION without HEADERS")
			}
			c.hblock = append(c.hblock, p...)
			if len(c.hblock) > 2*int(c.opt.MaxHeaderListSize)+maxFrame {
				return &ConnError{Code: CodeEnhanceYourCalm, Err: fmt.Errorf("a header block above %d bytes", len(c.hblock))}
			}
			if flags&flagEndHeaders != 0 {
				id := c.hstream
				c.hstream = 0
				err = c.onBlock(id, c.hblock, c.hend)
			}
		case frameRSTStream:
			err = c.onRST(id, p)
		case frameSettings:
			err = c.onSettings(flags, p)
		case framePing:
			err = c.onPing(flags, p)
		case frameGoAway:
			err = c.onGoAway(p)
		case frameWindowUpdate:
			err = c.onWindowUpdate(id, p)
		case framePushPromise:
			return protocolError("PUSH_PROMISE, with push disabled")
		} // PRIORITY and unknown types are ignored (RFC 9113 §4.1, §5.5)
		if err != nil {
			return err
		}
	}
}

// unpad strips a padded frame's padding.
func unpad(flags byte, p []byte) ([]byte, error) {
	if flags&flagPadded == 0 {
		return p, nil
	}
	if len(p) == 0 || int(p[0]) >= len(p) {
		return nil, protocolError("padding longer than the frame")
	}
	return p[1 : len(p)-int(p[0])], nil
}

func (c *Conn) onData(id uint32, flags byte, p []byte) error {
	if id == 0 {
		return protocolError("DATA on stream 0")
	}
	data, err := unpad(flags, p)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.recvWin -= int64(len(p))
	if c.recvWin < 0 {
		c.mu.Unlock()
		return &ConnError{Code: CodeFlowControl, Err: errors.New("the origin sent past the connection's window")}
	}
	s := c.streams[id]
	credit := len(p) - len(data) // padding is credited back at once
	switch {
	case s == nil || s.err != nil || s.remoteDone || !s.gotHead:
		credit = len(p) // nobody reads it
	default:
		s.recvWin -= int64(len(p))
		if s.recvWin < 0 {
			c.mu.Unlock()
			return &ConnError{Code: CodeFlowControl, Err: fmt.Errorf("the origin sent past stream %d's window", id)}
		}
		if s.r > 0 && s.r == len(s.buf) {
			s.buf, s.r = s.buf[:0], 0
		}
		s.buf = append(s.buf, data...)
		s.unacked += int64(credit) // its padding: credited with the stream's next update
		if flags&flagEndStream != 0 {
			s.remoteDone = true
		}
		c.queueWakeLocked(s)
	}
	due := c.creditLocked(int64(credit))
	c.mu.Unlock()
	c.sendCredit(0, 0, due)
	return nil
}

// creditLocked returns n consumed bytes to the connection's window and
// says how much to credit back now: the WINDOW_UPDATE goes out once half
// the window was consumed.
func (c *Conn) creditLocked(n int64) uint32 {
	c.recvCredit += n
	if c.recvCredit < int64(c.opt.ConnWindow)/2 || c.err != nil {
		return 0
	}
	k := c.recvCredit
	c.recvCredit = 0
	c.recvWin += k
	return uint32(k)
}

// sendCredit writes the WINDOW_UPDATEs that were found due: stream's for
// stream id and conn's for the connection, each only when not 0; mu must
// not be held.
func (c *Conn) sendCredit(id, stream, conn uint32) {
	if stream == 0 && conn == 0 {
		return
	}
	c.lockWrite()
	if stream > 0 {
		c.writeWindowUpdate(id, stream)
	}
	if conn > 0 {
		c.writeWindowUpdate(0, conn)
	}
	c.unlockWrite()
}

func (c *Conn) onHeaders(id uint32, flags byte, p []byte) error {
	if id == 0 {
		return protocolError("HEADERS on stream 0")
	}
	b, err := unpad(flags, p)
	if err != nil {
		return err
	}
	if flags&flagPriority != 0 {
		if len(b) < 5 {
			return protocolError("HEADERS too short for its priority")
		}
		b = b[5:]
	}
	end := flags&flagEndStream != 0
	if flags&flagEndHeaders == 0 {
		c.hblock = append(c.hblock[:0], b...)
		c.hstream, c.hend = id, end
		return nil
	}
	return c.onBlock(id, b, end)
}

func (c *Conn) emit(f hpack.HeaderField) {
	c.hsize += f.Size()
	if c.hsize > c.opt.MaxHeaderListSize {
		c.tooLarge = true
		return
	}
	c.decoded = append(c.decoded, f)
}

// onBlock decodes a whole header block (the connection's HPACK state
// needs it even when the stream is gone) and gives it to the stream: its
// response head, an interim 1xx response (dropped), or its trailers.
func (c *Conn) onBlock(id uint32, block []byte, end bool) error {
	for i := range c.decoded {
		c.decoded[i] = hpack.HeaderField{}
	}
	c.decoded, c.hsize, c.tooLarge = c.decoded[:0], 0, false
	_, err := c.dec.Write(block)
	if err == nil {
		err = c.dec.Close()
	}
	c.mu.Lock()
	s := c.streams[id]
	if err != nil {
		if s != nil && errors.Is(err, hpack.ErrStringLength) && s.err == nil {
			s.err = ErrHeadTooLarge
		}
		c.mu.Unlock()
		return &ConnError{Code: CodeCompression, Err: err}
	}
	if s == nil || s.err != nil {
		c.mu.Unlock()
		return nil
	}
	reset := CodeNo
	switch {
	case c.tooLarge:
		s.err, reset = ErrHeadTooLarge, CodeCancel
	case !s.gotHead:
		status, ok := statusOf(c.decoded)
		switch {
		case !ok:
			s.err, reset = &StreamError{Code: CodeProtocol}, CodeProtocol
		case status < 200:
			if end {
				s.err, reset = &StreamError{Code: CodeProtocol}, CodeProtocol
			}
			// else an interim response: dropped
		default:
			s.status, s.gotHead = status, true
			s.header = appendRegular(s.header[:0], c.decoded)
			s.remoteDone = end
		}
	case !end:
		s.err, reset = &StreamError{Code: CodeProtocol}, CodeProtocol // trailers must end the stream
	default:
		s.trailer = appendRegular(s.trailer[:0], c.decoded)
		s.remoteDone = true
	}
	if reset != CodeNo {
		s.resetSent = true
	}
	c.queueWakeLocked(s)
	c.mu.Unlock()
	if reset != CodeNo {
		c.lockWrite()
		c.writeRST(id, reset)
		c.unlockWrite()
	}
	return nil
}

// statusOf reads :status, which must be the first field and a three-digit
// number.
func statusOf(fs []hpack.HeaderField) (int, bool) {
	if len(fs) == 0 || fs[0].Name != ":status" || len(fs[0].Value) != 3 {
		return 0, false
	}
	v := fs[0].Value
	st := 0
	for i := 0; i < 3; i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
		st = st*10 + int(v[i]-'0')
	}
	return st, st >= 100
}

// appendRegular appends the fields that are neither pseudo-header fields
// nor connection-specific ones (an origin that sends those anyway has them
// dropped, as a proxy drops hop-by-hop fields).
func appendRegular(dst, fs []hpack.HeaderField) []hpack.HeaderField {
	for _, f := range fs {
		if len(f.Name) > 0 && f.Name[0] == ':' || connectionSpecific(f.Name) {
			continue
		}
		dst = append(dst, f)
	}
	return dst
}

func (c *Conn) onRST(id uint32, p []byte) error {
	if id == 0 || len(p) != 4 {
		return protocolError("malformed RST_STREAM")
	}
	code := ErrCode(binary.BigEndian.Uint32(p))
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil {
		return nil
	}
	s.resetRecv = true
	if !s.remoteDone && s.err == nil {
		s.err = &StreamError{Code: code, Remote: true}
	}
	// Buffered body nobody will read is credited back on Release.
	c.queueWakeLocked(s)
	c.broadcastLocked() // a body writer waiting for a window
	return nil
}

func (c *Conn) onSettings(flags byte, p []byte) error {
	if flags&flagAck != 0 {
		if len(p) != 0 {
			return &ConnError{Code: CodeFrameSize, Err: errors.New("SETTINGS ACK with a payload")}
		}
		return nil
	}
	if len(p)%6 != 0 {
		return &ConnError{Code: CodeFrameSize, Err: errors.New("SETTINGS payload not a multiple of 6")}
	}
	sawMax := false
	c.mu.Lock()
	for ; len(p) > 0; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:])
		switch binary.BigEndian.Uint16(p) {
		case settingMaxStreams:
			c.maxStreams.Store(v)
			sawMax = true
		case settingInitialWindowSize:
			if v > maxWindow {
				c.mu.Unlock()
				return &ConnError{Code: CodeFlowControl, Err: fmt.Errorf("INITIAL_WINDOW_SIZE %d", v)}
			}
			delta := int64(v) - c.peerInit
			c.peerInit = int64(v)
			for _, s := range c.streams {
				s.sendWin += delta
			}
			c.broadcastLocked()
		case settingMaxFrameSize:
			if v < maxFrame || v > 1<<24-1 {
				c.mu.Unlock()
				return protocolError("MAX_FRAME_SIZE %d", v)
			}
			c.peerFrame = int(v)
		}
	}
	c.mu.Unlock()
	if !c.sawFirst {
		c.sawFirst = true
		if !sawMax {
			c.maxStreams.Store(c.opt.DefaultMaxStreams)
		}
		defer close(c.ready)
	}
	c.lockWrite()
	c.writeFrame(frameSettings, flagAck, 0, nil)
	c.unlockWrite()
	return nil
}

func (c *Conn) onPing(flags byte, p []byte) error {
	if len(p) != 8 {
		return &ConnError{Code: CodeFrameSize, Err: errors.New("PING payload not 8 bytes")}
	}
	if flags&flagAck != 0 {
		c.mu.Lock()
		if ch, ok := c.pings[binary.BigEndian.Uint64(p)]; ok {
			close(ch)
			delete(c.pings, binary.BigEndian.Uint64(p))
		}
		c.mu.Unlock()
		return nil
	}
	c.lockWrite()
	c.writeFrame(framePing, flagAck, 0, p)
	c.unlockWrite()
	return nil
}

func (c *Conn) onGoAway(p []byte) error {
	if len(p) < 8 {
		return &ConnError{Code: CodeFrameSize, Err: errors.New("GOAWAY shorter than 8 bytes")}
	}
	last := binary.BigEndian.Uint32(p) & maxStreamID
	c.goneAway.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, s := range c.streams {
		if id > last && s.err == nil && !s.remoteDone {
			s.err = ErrRefused
			c.queueWakeLocked(s)
		}
	}
	c.broadcastLocked()
	return nil
}

func (c *Conn) onWindowUpdate(id uint32, p []byte) error {
	if len(p) != 4 {
		return &ConnError{Code: CodeFrameSize, Err: errors.New("WINDOW_UPDATE payload not 4 bytes")}
	}
	inc := int64(binary.BigEndian.Uint32(p) & maxWindow)
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == 0 {
		if inc == 0 {
			return protocolError("WINDOW_UPDATE of 0 on the connection")
		}
		c.sendWin += inc
		if c.sendWin > maxWindow {
			return &ConnError{Code: CodeFlowControl, Err: errors.New("the connection's send window above 2^31-1")}
		}
	} else if s := c.streams[id]; s != nil {
		s.sendWin += inc // a 0 or an overflow would be the stream's error; the origin's, and harmless here
	}
	c.broadcastLocked()
	return nil
}
