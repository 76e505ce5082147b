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

// New returns a Bar writing to w when w is a terminal, or nil (silent).
func New(w io.Writer, label string, total int) *Bar {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
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
	b.done += n
	if b.done > b.total {
		b.done = b.total
	}
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
