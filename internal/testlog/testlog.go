// Package testlog is a log sink for tests: a buffer that the code under
// test writes its log to from its own goroutines while the test reads it.
//
// Invariant: every Write and String holds the buffer's lock, so a read
// sees whole writes (a slog handler writes one line per Write).
package testlog

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer is a concurrency-safe bytes.Buffer; the zero value is empty and
// ready.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// New is a text logger at level writing to a new Buffer.
func New(level slog.Level) (*slog.Logger, *Buffer) {
	b := &Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level})), b
}
