// Package watch tells when a set of files changes: the configuration file
// and the files it names (certificates, keys, CAs), for `corput serve
// --watch`.
//
// It watches each file's directory, not the file: an editor that writes a
// new file and renames it over the old one, and a Kubernetes ConfigMap or
// Secret update (a new timestamped directory, then an atomic swap of the
// ..data symlink the file's path goes through) replace the file without
// writing to it, so a watch on the file itself would hear nothing, or
// nothing more. Events are debounced: a burst of them (a certificate and
// its key written one after the other, a ConfigMap's several files) is one
// change, heard Debounce after the last event.
//
// Invariants:
//   - A change is the content of a watched file differing from what was
//     last seen (a SHA-256 of its bytes, read through any symlinks; a
//     missing or unreadable file is a content of its own). Events that
//     leave every content as it was (a touch, a file beside it written)
//     are no change, so a reload is not run for nothing.
//   - OnChange is never called concurrently with itself; the contents it
//     is called for count as seen from then on, whatever it does with them
//     (a refused reload waits for the next edit).
//   - SetFiles replaces the set (a reload may name other files) without
//     losing a change in between.
//   - Run ends when its context does, with every goroutine and the
//     inotify descriptor released.
package watch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/corput/corput/internal/clock"
)

// DefaultDebounce is how long a burst of events must be quiet before it is
// taken as one change.
const DefaultDebounce = 500 * time.Millisecond

// Options configure a Watcher.
type Options struct {
	Debounce time.Duration // 0: DefaultDebounce
	Clock    clock.Clock   // nil: the wall clock (the debounce timer)
	Logger   *slog.Logger  // nil: slog.Default()
	// OnChange hears that some watched file changed, with their paths.
	OnChange func(changed []string)
}

// Watcher watches a set of files through their directories.
type Watcher struct {
	opts Options
	fsw  *fsnotify.Watcher

	mu    sync.Mutex      // guards following
	files []string        // absolute, cleaned
	dirs  map[string]bool // watched
	seen  map[string][32]byte
	timer clock.Timer
	fire  chan struct{}
}

// New watches files; Run delivers their changes.
func New(files []string, opts Options) (*Watcher, error) {
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	w := &Watcher{opts: opts, fsw: fsw, dirs: map[string]bool{}, seen: map[string][32]byte{}, fire: make(chan struct{}, 1)}
	if err := w.SetFiles(files); err != nil {
		fsw.Close()
		return nil, err
	}
	return w, nil
}

// SetFiles replaces the watched set. Files new to the set take their
// present content as seen.
func (w *Watcher) SetFiles(files []string) error {
	abs := make([]string, 0, len(files))
	for _, f := range files {
		a, err := filepath.Abs(f)
		if err != nil {
			return fmt.Errorf("watch %s: %w", f, err)
		}
		if !slices.Contains(abs, a) {
			abs = append(abs, a)
		}
	}
	slices.Sort(abs)
	w.mu.Lock()
	defer w.mu.Unlock()
	want := map[string]bool{}
	for _, f := range abs {
		want[filepath.Dir(f)] = true
	}
	for d := range want {
		if !w.dirs[d] {
			if err := w.fsw.Add(d); err != nil {
				return fmt.Errorf("watch directory %s: %w", d, err)
			}
			w.dirs[d] = true
		}
	}
	for d := range w.dirs {
		if !want[d] {
			_ = w.fsw.Remove(d) // gone already when the directory was removed
			delete(w.dirs, d)
		}
	}
	seen := map[string][32]byte{}
	for _, f := range abs {
		if h, ok := w.seen[f]; ok {
			seen[f] = h
		} else {
			seen[f] = digest(f)
		}
	}
	w.files, w.seen = abs, seen
	return nil
}

// Files is the watched set, absolute and sorted.
func (w *Watcher) Files() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.files)
}

// digest is f's content as seen: its bytes' SHA-256 through any symlink;
// an unreadable file hashes its error, so that its coming back is a change.
func digest(f string) [32]byte {
	b, err := os.ReadFile(f)
	if err != nil {
		return sha256.Sum256([]byte("unreadable: " + err.Error()))
	}
	return sha256.Sum256(b)
}

// Run delivers changes to OnChange until ctx ends, then releases the
// watch.
func (w *Watcher) Run(ctx context.Context) error {
	defer w.fsw.Close()
	defer w.stopTimer()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			w.arm()
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return nil
			}
			// An overflow loses events, not changes: look at every file.
			w.opts.Logger.Warn("watch: events lost; looking at every watched file", "err", err)
			w.arm()
		case <-w.fire:
			if changed := w.changed(); len(changed) > 0 {
				w.opts.OnChange(changed)
			}
		}
	}
}

// arm (re)starts the debounce timer.
func (w *Watcher) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = w.opts.Clock.AfterFunc(w.opts.Debounce, func() {
		select {
		case w.fire <- struct{}{}:
		default:
		}
	})
}

func (w *Watcher) stopTimer() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}

// changed returns the files whose content differs from the seen one, and
// takes the new contents as seen.
func (w *Watcher) changed() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, f := range w.files {
		if h := digest(f); h != w.seen[f] {
			w.seen[f] = h
			out = append(out, f)
		}
	}
	return out
}
