// Package logtest gives tests a log they read while the code under test
// writes to it from other goroutines: a gateway's, a source's or a control
// plane's slog output, asserted on by content.
package logtest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Buffer collects what is written to it; Write and String may be called
// at the same time from any goroutines.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// New returns a text logger for records at level and above, and the Buffer
// it writes to.
func New(level slog.Level) (*slog.Logger, *Buffer) {
	b := &Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level})), b
}
