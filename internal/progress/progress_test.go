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
