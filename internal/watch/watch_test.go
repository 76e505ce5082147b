package watch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The tests watch real files in a temporary directory through real
// inotify; the debounce runs on the wall clock, short, and the tests wait
// for what OnChange hears, never for a time.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type heard struct {
	mu    sync.Mutex
	calls [][]string
	ch    chan []string
}

func (h *heard) on(changed []string) {
	h.mu.Lock()
	h.calls = append(h.calls, changed)
	h.mu.Unlock()
	h.ch <- changed
}

// next waits for the next OnChange.
func (h *heard) next(t *testing.T) []string {
	t.Helper()
	select {
	case c := <-h.ch:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no change heard in 10s")
		return nil
	}
}

func start(t *testing.T, files []string, debounce time.Duration) (*Watcher, *heard) {
	t.Helper()
	h := &heard{ch: make(chan []string, 16)}
	w, err := New(files, Options{Debounce: debounce, OnChange: h.on})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return w, h
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWatchHearsEveryWayAFileIsReplaced: written in place, renamed over
// (as editors and `install` do), and swapped behind a ConfigMap's ..data
// symlink — and a write beside the file, or a touch, is no change: the
// next change heard is the real one, alone.
func TestWatchHearsEveryWayAFileIsReplaced(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "corput.yaml")
	write(t, cfg, "v1")
	_, h := start(t, []string{cfg}, 20*time.Millisecond)

	write(t, filepath.Join(dir, "neighbour"), "x")
	now := time.Now()
	if err := os.Chtimes(cfg, now, now); err != nil {
		t.Fatal(err)
	}
	write(t, cfg, "v2")
	if got := h.next(t); !slices.Equal(got, []string{cfg}) {
		t.Fatalf("written in place: heard %v", got)
	}

	tmp := filepath.Join(dir, ".corput.yaml.tmp")
	write(t, tmp, "v3")
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	if got := h.next(t); !slices.Equal(got, []string{cfg}) {
		t.Fatalf("renamed over: heard %v", got)
	}
	h.mu.Lock()
	n := len(h.calls)
	h.mu.Unlock()
	if n != 2 {
		t.Errorf("%d calls for 2 changes (the neighbour and the touch must not count)", n)
	}
}

// TestWatchFollowsAConfigMapSwap lays a directory out as the kubelet does
// — corput.yaml -> ..data/corput.yaml, ..data -> ..2026_12_01_v1 — and
// updates it as the kubelet does: a new timestamped directory, a new
// symlink renamed over ..data, the old directory removed.
func TestWatchFollowsAConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "..v1"), 0o755))
	write(t, filepath.Join(dir, "..v1", "corput.yaml"), "v1")
	must(os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "corput.yaml"), filepath.Join(dir, "corput.yaml")))
	cfg := filepath.Join(dir, "corput.yaml")
	_, h := start(t, []string{cfg}, 20*time.Millisecond)

	must(os.Mkdir(filepath.Join(dir, "..v2"), 0o755))
	write(t, filepath.Join(dir, "..v2", "corput.yaml"), "v2")
	must(os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..v1")))
	if got := h.next(t); !slices.Equal(got, []string{cfg}) {
		t.Fatalf("ConfigMap swap: heard %v", got)
	}
	if b, _ := os.ReadFile(cfg); string(b) != "v2" {
		t.Fatalf("the file reads %q after the swap", b)
	}
}

// TestWatchDebouncesABurst: a certificate and its key written one after
// the other are one change naming both; files in two directories are
// watched, and SetFiles moves the watch.
func TestWatchDebouncesABurst(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	cert, key, cfg := filepath.Join(a, "tls.crt"), filepath.Join(a, "tls.key"), filepath.Join(b, "corput.yaml")
	for _, f := range []string{cert, key, cfg} {
		write(t, f, "old")
	}
	w, h := start(t, []string{cfg, cert, key}, 300*time.Millisecond)
	write(t, cert, "new")
	write(t, key, "new")
	got := h.next(t)
	want := []string{cert, key}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("a burst: heard %v, want one change naming %v", got, want)
	}

	if err := w.SetFiles([]string{cfg}); err != nil {
		t.Fatal(err)
	}
	write(t, cert, "newer") // no longer watched
	write(t, cfg, "new")
	if got := h.next(t); !slices.Equal(got, []string{cfg}) {
		t.Fatalf("after SetFiles: heard %v", got)
	}
	if got := w.Files(); !slices.Equal(got, []string{cfg}) {
		t.Errorf("Files = %v", got)
	}
}

// TestWatchRefusesAMissingDirectory: a file whose directory does not exist
// cannot be watched, and New says which.
func TestWatchRefusesAMissingDirectory(t *testing.T) {
	_, err := New([]string{filepath.Join(t.TempDir(), "nope", "x.pem")}, Options{OnChange: func([]string) {}})
	if err == nil {
		t.Fatal("New watched a file in a missing directory")
	}
}
