package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestSilentWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	if New(&buf, "x", 10) != nil {
		t.Fatal("a buffer got a progress bar")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := New(f, "x", 10)
	b.Add(5) // nil-safe
	b.Done()
	if b != nil {
		t.Fatal("a regular file got a progress bar")
	}
}

func TestForceDraws(t *testing.T) {
	var buf bytes.Buffer
	b := NewForce(&buf, "sim", 4)
	b.Add(1)
	b.Add(1)
	b.Done()
	out := buf.String()
	if !strings.Contains(out, " 25%") || !strings.Contains(out, " 50%") || !strings.HasSuffix(out, "100%\n") {
		t.Fatalf("output %q", out)
	}
}

// Set counts in all, not more: a run reporting elapsed seconds past its
// total stops at 100%, and a repeated count draws nothing new.
func TestSetCountsInAll(t *testing.T) {
	var buf bytes.Buffer
	b := NewForce(&buf, "drill", 4)
	b.Set(1)
	b.Set(1)
	b.Set(3)
	b.Set(9)
	out := buf.String()
	if strings.Count(out, " 25%") != 1 || !strings.Contains(out, " 75%") || !strings.HasSuffix(out, "100%") || strings.Contains(out, "225%") {
		t.Fatalf("output %q", out)
	}
	var nilBar *Bar
	nilBar.Set(1) // nil-safe
}

// Count redraws `label done/total` in place and clears the line at the
// end; it shows nothing where w is not a terminal.
func TestCount(t *testing.T) {
	var buf bytes.Buffer
	if Count(&buf, "subsets: trial") != nil {
		t.Fatal("a buffer got a progress count")
	}
	show := countTo(&buf, "subsets: trial")
	show(1, 2)
	show(2, 2)
	if got, want := buf.String(), "\rsubsets: trial 1/2\rsubsets: trial 2/2\r\033[K"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}
