// Package progress shows how far a long run has got, on a terminal only:
// when the output is not a terminal (CI, a pipe, a file) it prints nothing,
// so logs stay clean.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// Bar is a one-line progress display. A nil *Bar is valid and silent.
type Bar struct {
	mu    sync.Mutex // guards following
	w     io.Writer
	label string
	total int
	done  int
	last  int // last percent printed
}

// IsTerminal reports whether w is a terminal: where progress is shown.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a Bar writing to w when w is a terminal, or nil (silent).
func New(w io.Writer, label string, total int) *Bar {
	if !IsTerminal(w) {
		return nil
	}
	return NewForce(w, label, total)
}

// NewForce returns a Bar that writes to w whatever w is (for tests).
func NewForce(w io.Writer, label string, total int) *Bar {
	if total < 1 {
		total = 1
	}
	return &Bar{w: w, label: label, total: total, last: -1}
}

// Add records n more units done and redraws when the percentage moved.
func (b *Bar) Add(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setLocked(b.done + n)
}

// Set records that n units are done in all (a run that counts elapsed
// seconds) and redraws when the percentage moved.
func (b *Bar) Set(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setLocked(n)
}

// setLocked makes n units done, at most total, and redraws when the
// percentage moved.
func (b *Bar) setLocked(n int) {
	b.done = min(n, b.total)
	pct := b.done * 100 / b.total
	if pct == b.last {
		return
	}
	b.last = pct
	const width = 30
	fill := pct * width / 100
	bar := make([]byte, width)
	for i := range bar {
		if i < fill {
			bar[i] = '='
		} else {
			bar[i] = ' '
		}
	}
	fmt.Fprintf(b.w, "\r%-28s [%s] %3d%%", b.label, bar, pct)
}

// Done completes the line.
func (b *Bar) Done() {
	if b == nil {
		return
	}
	b.Add(b.total)
	b.mu.Lock()
	fmt.Fprintln(b.w)
	b.mu.Unlock()
}

// Count returns a progress callback that shows `label done/total` on w,
// redrawn in place, and clears the line once done reaches total; nil
// (no progress) when w is not a terminal.
func Count(w io.Writer, label string) func(done, total int) {
	if !IsTerminal(w) {
		return nil
	}
	return countTo(w, label)
}

func countTo(w io.Writer, label string) func(done, total int) {
	return func(done, total int) {
		fmt.Fprintf(w, "\r%s %d/%d", label, done, total)
		if done == total {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}
