package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// runCLI runs the corput command line in-process.
func runCheckCLI(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = run(args, &out, &errw)
	return code, out.String(), errw.String()
}

func exampleFile(name string) string { return filepath.Join("..", "..", "examples", name) }

func TestCheckExamples(t *testing.T) {
	cases := []struct {
		file string
		exit int
		code string
		line int
		key  string
	}{
		{"gateway.yaml", 0, "", 0, ""},
		{"bad-unbounded-queue.yaml", 2, "ERR_UNBOUNDED_QUEUE_REJECTED", 12, "origins[0].pool.max_pending"},
		{"bad-average-slo.yaml", 2, "ERR_AVERAGE_ONLY_TARGET_REJECTED", 11, "origins[0].slo.average"},
		{"bad-uniform-workload.yaml", 2, "ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED", 11, "workload.classes"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := exampleFile(c.file)
			exit, out, errOut := runCheckCLI("check", "--config", path)
			if exit != c.exit {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", exit, c.exit, out, errOut)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if c.exit == 0 {
				want := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `: ok: 2 routes, 2 origins, 6 static endpoints, \d+ loops?; listen 127\.0\.0\.1:8080, admin 127\.0\.0\.1:9901$`)
				if len(lines) != 1 || !want.MatchString(lines[0]) {
					t.Errorf("want one summary line matching %s, got:\n%s", want, out)
				}
				return
			}
			// One diagnostic line in the contract's format, then the tally.
			prefix := path + ":" + strconv.Itoa(c.line) + ": " + c.key + ": " + c.code + ": "
			if len(lines) != 2 || !strings.HasPrefix(lines[0], prefix) {
				t.Errorf("want a line starting %q and a tally, got:\n%s", prefix, out)
			}
			if lines[len(lines)-1] != path+": invalid: 1 error(s), 0 warning(s)" {
				t.Errorf("tally line = %q", lines[len(lines)-1])
			}
		})
	}
}

func TestCheckPrintsEveryDiagnostic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	src := `listen: 127.0.0.1:8080
routes: [{origin: api}]
origins:
  - name: api
    endpoints: [{address: 127.0.0.1:9001}]
    pool: {max_pending: -1, idle_timeout: 60}
    slo: {average: 20ms}
    slow_start: {window: 5s}
workload: {classes: [{name: ping, percent: 100, latency: 2ms}]}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	exit, out, _ := runCheckCLI("check", "--config", path)
	if exit != 2 {
		t.Fatalf("exit %d, want 2:\n%s", exit, out)
	}
	want := []string{
		path + ":6: origins[0].pool.idle_timeout: ",
		path + ":6: origins[0].pool.max_pending: ERR_UNBOUNDED_QUEUE_REJECTED: ",
		path + ":7: origins[0].slo.average: ERR_AVERAGE_ONLY_TARGET_REJECTED: ",
		path + ":8: origins[0].slow_start.window: warning: ",
		path + ":9: workload.classes: ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED: ",
		path + ": invalid: 4 error(s), 1 warning(s)",
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestCheckWarningsStillPass(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warn.yaml")
	src := "routes: [{origin: api}]\norigins:\n  - {name: api, endpoints: [{address: 127.0.0.1:9001}], slow_start: {window: 0s}}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	exit, out, _ := runCheckCLI("check", path) // a positional file works too
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if exit != 0 || len(lines) != 2 || !strings.Contains(lines[0], ": warning: ") || !strings.HasSuffix(lines[1], "; 1 warning") {
		t.Fatalf("exit %d, output:\n%s", exit, out)
	}
}

// corput check warns of plaintext xDS to a server off loopback, and
// passes: the warning names the server key and the tls block to add.
func TestCheckWarnsOfPlaintextXDS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xds.yaml")
	src := "fleet: {server: corput-control-plane:18000}\nroutes: [{origin: api}]\norigins:\n  - {name: api, discovery: {type: xds, server: 127.0.0.1:18000, cluster: api}}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	exit, out, _ := runCheckCLI("check", "--config", path)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if exit != 0 || len(lines) != 2 || !strings.Contains(lines[0], ":1: fleet.server: warning: plaintext xDS to corput-control-plane:18000") ||
		!strings.Contains(lines[0], "add fleet.tls: {ca: FILE}") || !strings.HasSuffix(lines[1], "; 1 warning") {
		t.Fatalf("exit %d, want 0 with one warning on fleet.server (the loopback xDS origin is not warned of); output:\n%s", exit, out)
	}
}

func TestCheckUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		exit int
		out  string // substring of stdout
		err  string // substring of stderr
	}{
		{"no config", []string{"check"}, 2, "", "usage: corput check --config FILE"},
		{"missing file", []string{"check", "--config", "does-not-exist.yaml"}, 2, "config: open does-not-exist.yaml: no such file or directory", ""},
		{"unknown flag", []string{"check", "--confg", "x.yaml"}, 2, "", "flag provided but not defined: -confg"},
		{"two files", []string{"check", "--config", "a.yaml", "b.yaml"}, 2, "", "usage: corput check"},
		{"help", []string{"check", "-h"}, 0, "", "Exit 2: invalid"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exit, out, errOut := runCheckCLI(c.args...)
			if exit != c.exit || !strings.Contains(out, c.out) || !strings.Contains(errOut, c.err) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ⊇ %q, stderr ⊇ %q", exit, c.exit, out, errOut, c.out, c.err)
			}
		})
	}
}

func TestCheckIsRegistered(t *testing.T) {
	c, ok := commands["check"]
	if !ok || c.summary == "" {
		t.Fatal("check is not registered with a summary")
	}
	var buf bytes.Buffer
	usage(&buf)
	if !strings.Contains(buf.String(), "check") {
		t.Errorf("usage does not list check:\n%s", buf.String())
	}
}
