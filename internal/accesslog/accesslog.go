// Package accesslog writes corput's access log: a line per sampled
// request, one JSON object or Apache's combined format with corput's
// fields appended (docs/access-log.md), to standard output or a file.
//
// A request's Record goes to Add, which copies it into a slot of a ring of
// fixed-size entries and returns; one writer goroutine formats the
// entries and writes them in batches, so formatting and I/O happen off
// the request path.
//
// Invariants:
//   - Add never blocks: it never waits for the writer, the disk or a lock.
//     When the ring is full the record is dropped and counted (Dropped,
//     Options.Dropped: corput_access_log_dropped_total); so are the lines
//     of a batch whose write failed.
//   - Memory is bounded: Capacity entries of a fixed size, allocated once
//     by New or Open, and one batch buffer. A field longer than its limit (Limits)
//     is cut and written with "..." after it.
//   - Add and Sample allocate nothing; the writer allocates nothing per
//     line either.
//   - Each record is written whole, as one line, at most once; lines keep
//     the order in which their records took their slots.
//   - Once Close has returned, every record added before Close was
//     called has been written or counted as dropped; a record added after
//     is dropped and counted (one racing Close itself may be lost).
//   - Reopen writes what was added before it to the old file, then opens
//     the path again (log rotation: SIGUSR1 in corput serve); if the open
//     fails the log goes on writing to the old file.
package accesslog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corput/corput/internal/rng"
)

// Format is a line format.
type Format uint8

// The formats.
const (
	JSON     Format = iota // one JSON object per line
	Combined               // Apache's combined format, corput's fields appended
)

// ParseFormat maps an access_log.format value to its Format.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "json":
		return JSON, nil
	case "combined":
		return Combined, nil
	}
	return 0, fmt.Errorf("accesslog: unknown format %q (json or combined)", s)
}

// Stdout is the path that writes to standard output.
const Stdout = "stdout"

// DefaultCapacity is the ring's size in entries when Options.Capacity is 0:
// 10 ms of 100 000 requests a second, about 2.3 MiB.
const DefaultCapacity = 1024

// flushEvery is how often the writer writes what has come in while
// records keep coming; an idle writer sleeps until the next record.
const flushEvery = 100 * time.Millisecond

// batchBytes is the size at which the writer writes a batch out without
// waiting for the ring to be empty.
const batchBytes = 64 << 10

// Record is one request as the log writes it. Add copies the request's
// own fields (Client, Method, Host, Target, Proto, Referer, UserAgent),
// which may be views of a buffer the caller reuses; it keeps Origin,
// Endpoint and Reason as they are (names the gateway holds).
type Record struct {
	Start    time.Time     // the request arrived
	Duration time.Duration // to the end of its response
	Client   string        // the peer's address, host:port
	Method   string
	Host     string
	Target   string // the path and query as the client sent them
	Proto    string // HTTP/1.1, HTTP/2.0
	Status   int    // sent to the client; 499 when it left first
	Bytes    int64  // response body bytes sent
	Referer  string
	// UserAgent is the User-Agent field.
	UserAgent string
	Origin    string // the routed origin's name, "" without a route
	Endpoint  string // the last attempt's endpoint, "" when none was tried
	Attempts  int    // attempts made (forward.Attempt.Attempts)
	Reason    string // X-Corput-Error of the gateway's own answer, "" when the origin answered
	// Limit names the time limit that ended the last attempt's exchange
	// (forward.Limit: response_header, per_try, request, grpc-timeout,
	// stream_idle, body_read), "" when none did.
	Limit string
	Loop  int // the loop the request was placed on, -1 when none
	// RequestID is the request's id (downstream.request_id), "" for none.
	RequestID string
}

// Options configure a Log.
type Options struct {
	Format Format
	// Sample is the share of requests Sample keeps, in (0, 1]; 0 means 1.
	Sample float64
	// Seed seeds the sampling draws.
	Seed uint64
	// Capacity is the ring's size in entries, rounded up to a power of
	// two; 0 is DefaultCapacity.
	Capacity int
	// Dropped, when set, is counted up with every dropped line, besides
	// Log.Dropped (a prometheus.Counter is one).
	Dropped interface{ Add(float64) }
	// Logger hears write and reopen failures; nil is slog.Default().
	Logger *slog.Logger
}

// Log is an access log. Its methods may be called from any goroutine, and
// Sample and Add on a nil *Log do nothing.
type Log struct {
	// The producers' side. tail is taken by every Add, head advanced by
	// the writer: each has a cache line of its own.
	tail atomic.Uint64
	_    [56]byte
	head atomic.Uint64
	_    [56]byte

	slots     []slot
	mask      uint64
	wakeAt    uint64 // entries waiting that wake a ticking writer early
	all       bool   // sample 1: keep every request
	threshold uint64 // keep a request when a draw is below it
	rand      *rng.Source
	dropped   atomic.Uint64
	count     interface{ Add(float64) }
	idle      atomic.Bool // the writer sleeps until woken
	closed    atomic.Bool
	wake      chan struct{}

	// The writer's side.
	format   Format
	path     string   // "" for a writer given to New
	file     *os.File // the open file, nil for stdout or a given writer
	w        io.Writer
	buf      []byte // the batch being formatted
	lines    int    // lines in buf
	failing  bool   // the last write failed (logged once until one succeeds)
	log      *slog.Logger
	closeErr error // closing the file, for Close

	flushes chan chan struct{}
	reopens chan chan error
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// Open starts a log writing to path: Stdout, or a file opened for
// appending (created 0640 when missing).
func Open(path string, opts Options) (*Log, error) {
	if path == Stdout {
		return New(os.Stdout, opts), nil
	}
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l := newLog(f, opts)
	l.path, l.file = path, f
	go l.run()
	return l, nil
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	return f, nil
}

// New starts a log writing to w (Reopen does nothing on it).
func New(w io.Writer, opts Options) *Log {
	l := newLog(w, opts)
	go l.run()
	return l
}

func newLog(w io.Writer, opts Options) *Log {
	size := opts.Capacity
	if size <= 0 {
		size = DefaultCapacity
	}
	n := 2
	for n < size {
		n <<= 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Log{
		slots:   make([]slot, n),
		mask:    uint64(n - 1),
		wakeAt:  uint64(max(n/4, 1)),
		rand:    rng.New(opts.Seed),
		count:   opts.Dropped,
		wake:    make(chan struct{}, 1),
		format:  opts.Format,
		w:       w,
		buf:     make([]byte, 0, batchBytes+entryText+1024),
		log:     opts.Logger,
		flushes: make(chan chan struct{}),
		reopens: make(chan chan error),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	for i := range l.slots {
		l.slots[i].seq.Store(uint64(i))
	}
	switch s := opts.Sample; {
	case s <= 0 || s >= 1:
		l.all = true
	default:
		l.threshold = uint64(s * 0x1p64)
	}
	l.idle.Store(true)
	return l
}

// Sample draws whether to log the next request: true with probability
// Options.Sample (always at 1), from a seeded lock-free source. A nil Log
// samples nothing.
func (l *Log) Sample() bool {
	if l == nil {
		return false
	}
	return l.all || l.rand.Uint64() < l.threshold
}

// Add hands r to the writer without waiting (see Record for what it
// copies). With the ring full, or the log closed, r is dropped and
// counted.
func (l *Log) Add(r *Record) {
	if l == nil {
		return
	}
	if l.closed.Load() {
		l.drop(1)
		return
	}
	s, pos, ok := l.reserve()
	if !ok {
		l.drop(1)
		return
	}
	s.e.set(r)
	s.seq.Store(pos + 1)
	if l.idle.Load() || pos+1-l.head.Load() >= l.wakeAt {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// reserve takes the next free slot, at position pos, for a producer; !ok
// when the ring is full. The ring is a bounded multi-producer queue
// (Vyukov's): a slot whose sequence equals a position is free for it; the
// producer that moves tail past the position owns the slot until it
// stores position+1, which hands it to the writer; the writer gives it
// back as position+len(slots).
func (l *Log) reserve() (s *slot, pos uint64, ok bool) {
	pos = l.tail.Load()
	for {
		s = &l.slots[pos&l.mask]
		switch seq := s.seq.Load(); {
		case seq == pos:
			if l.tail.CompareAndSwap(pos, pos+1) {
				return s, pos, true
			}
		case seq < pos: // the writer has not given this slot back yet
			return nil, 0, false
		}
		pos = l.tail.Load() // another producer took pos
	}
}

func (l *Log) drop(n int) {
	l.dropped.Add(uint64(n))
	if l.count != nil {
		l.count.Add(float64(n))
	}
}

// Dropped is how many lines were dropped: the ring was full, the log
// closed, or their write failed.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Flush waits until the writer has written every record added before it.
func (l *Log) Flush() {
	ack := make(chan struct{})
	select {
	case l.flushes <- ack:
		<-ack
	case <-l.done:
	}
}

// Reopen writes what was added before it, then opens the file again at
// its path: after a rotation renamed it, the next lines go to a new file.
// It does nothing for standard output or a writer given to New. If the
// open fails, the log keeps the file it had and Reopen says why.
func (l *Log) Reopen() error {
	if l == nil || l.path == "" {
		return nil
	}
	ack := make(chan error, 1)
	select {
	case l.reopens <- ack:
		return <-ack
	case <-l.done:
		return errors.New("access log: closed")
	}
}

// Path is the file the log writes to, "" for standard output or a writer
// given to New (or a nil Log): what Reopen reopens.
func (l *Log) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// Close writes what was added, closes the file and stops the writer. It
// waits for the writer's last write. Later calls do nothing more and
// return the same.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() { close(l.stop) })
	<-l.done
	return l.closeErr
}

// run is the writer goroutine. While records keep coming it writes every
// flushEvery, or at once when the ring is a quarter full; after an
// interval with none it sleeps until Add wakes it.
func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(flushEvery)
	tick.Stop()
	var ticking <-chan time.Time // nil while idle
	for {
		select {
		case <-l.wake:
		case <-ticking:
		case ack := <-l.flushes:
			l.writeAll()
			close(ack)
			continue
		case ack := <-l.reopens:
			l.writeAll()
			ack <- l.reopen()
			continue
		case <-l.stop:
			l.closed.Store(true)
			l.finish()
			return
		}
		switch {
		case l.writeAll() > 0:
			if ticking == nil {
				l.idle.Store(false)
				tick.Reset(flushEvery)
				ticking = tick.C
			}
		case ticking != nil:
			// A whole interval without a record: sleep until Add wakes
			// us. A record stored before idle was set is seen here; one
			// stored after sees idle and wakes the writer.
			tick.Stop()
			ticking = nil
			l.idle.Store(true)
			if l.ready() {
				l.wakeSelf()
			}
		}
	}
}

func (l *Log) wakeSelf() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// ready reports whether the next slot holds a record.
func (l *Log) ready() bool {
	head := l.head.Load()
	return l.slots[head&l.mask].seq.Load() == head+1
}

// writeAll formats and writes every record ready in order, and returns
// how many there were.
func (l *Log) writeAll() int {
	n := 0
	for head := l.head.Load(); ; head++ {
		s := &l.slots[head&l.mask]
		if s.seq.Load() != head+1 {
			break // empty, or its producer is still copying
		}
		l.buf = s.e.appendLine(l.buf, l.format)
		l.lines++
		s.seq.Store(head + uint64(len(l.slots)))
		l.head.Store(head + 1)
		n++
		if len(l.buf) >= batchBytes {
			l.writeOut()
		}
	}
	l.writeOut()
	return n
}

// finish writes the last records: every slot taken before the log was
// closed, once its producer has stored it.
func (l *Log) finish() {
	last := l.tail.Load()
	for l.writeAll(); l.head.Load() < last; l.writeAll() {
		time.Sleep(time.Millisecond) // a producer is still copying its record
	}
	if l.file != nil {
		if err := l.file.Close(); err != nil {
			l.closeErr = fmt.Errorf("access log: %w", err)
		}
	}
}

// writeOut writes the batch; a failed write's lines are counted dropped.
func (l *Log) writeOut() {
	if len(l.buf) == 0 {
		return
	}
	_, err := l.w.Write(l.buf)
	switch {
	case err != nil:
		l.drop(l.lines)
		if !l.failing {
			l.log.Error("access log: write failed; its lines are dropped and counted until a write succeeds", "path", l.path, "err", err)
		}
		l.failing = true
	case l.failing:
		l.failing = false
		l.log.Info("access log: writing again", "path", l.path)
	}
	l.buf, l.lines = l.buf[:0], 0
}

// reopen opens the path again and, if that works, closes the old file.
func (l *Log) reopen() error {
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	old := l.file
	l.file, l.w = f, f
	if err := old.Close(); err != nil {
		l.log.Warn("access log: closing the file before the reopen", "path", l.path, "err", err)
	}
	return nil
}

// slot is one ring entry and its sequence number (see Add).
type slot struct {
	seq atomic.Uint64
	e   entry
}
