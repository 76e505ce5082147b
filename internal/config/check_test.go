package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckAndSummary: Check prints an invalid file's every diagnostic
// and the tally, or the error reading it, and reports false; a valid
// file's summary counts what it holds, singular for one.
func TestCheckAndSummary(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	bad := write("bad.yaml", "routes: [{origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}], pool: {max_pending: -1}, slow_start: {window: 0s}}]\n")
	var out strings.Builder
	if cfg, ok := Check(bad, &out); ok || cfg != nil {
		t.Fatalf("Check of an invalid file: %v, %v", cfg, ok)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0]+lines[1], "ERR_UNBOUNDED_QUEUE_REJECTED") || lines[2] != bad+": invalid: 1 error(s), 1 warning(s)" {
		t.Errorf("Check printed:\n%s", out.String())
	}
	out.Reset()
	if _, ok := Check(filepath.Join(dir, "none.yaml"), &out); ok || !strings.HasPrefix(out.String(), "config: open ") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("Check of a missing file: %v, printed %q", ok, out.String())
	}

	one := write("one.yaml", "listen: 127.0.0.1:8080\nadmin: 127.0.0.1:9901\nloops: 1\nroutes: [{origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]\n")
	out.Reset()
	cfg, ok := Check(one, &out)
	if !ok || out.Len() != 0 {
		t.Fatalf("Check of a valid file: %v, printed %q", ok, out.String())
	}
	if got, want := cfg.Summary(), one+": ok: 1 route, 1 origin, 1 static endpoint, 1 loop; listen 127.0.0.1:8080, admin 127.0.0.1:9901"; got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
	two := write("two.yaml", "loops: 2\nroutes: [{origin: a}, {path_prefix: /b, origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}, {address: 127.0.0.1:2}], slow_start: {window: 0s}}]\n")
	if cfg, ok = Check(two, &out); !ok {
		t.Fatalf("Check of %s: %s", two, out.String())
	}
	if got := cfg.Summary(); !strings.Contains(got, ": ok: 2 routes, 1 origin, 2 static endpoints, 2 loops; ") || !strings.HasSuffix(got, "; 1 warning") {
		t.Errorf("summary %q", got)
	}
}
