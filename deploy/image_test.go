package deploy

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corput/corput/internal/testbin"
)

// The repository's Dockerfile and go.mod, beside this package.
var (
	dockerfilePath = filepath.Join("..", "Dockerfile")
	goModPath      = filepath.Join("..", "go.mod")
)

// instruction is one Dockerfile instruction, its continuation lines
// joined.
type instruction struct {
	line int    // where it starts
	cmd  string // upper case: FROM, RUN, COPY, …
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	from, name string // the base image, and the name after AS
	line       int
	body       []instruction
}

// parseDockerfile splits a Dockerfile into stages: comments and blank lines
// dropped, a line ending in a backslash continued on the next.
func parseDockerfile(text string) ([]stage, error) {
	var stages []stage
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		start := i + 1
		for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue
			}
			l = strings.TrimSuffix(l, `\`) + " " + next
		}
		cmd, args, _ := strings.Cut(l, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{line: start}
			switch {
			case len(f) == 1:
				s.from = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				s.from, s.name = f[0], f[2]
			default:
				return nil, fmt.Errorf("line %d: FROM %s: want IMAGE [AS NAME]", start, in.args)
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				continue // an ARG before the first FROM
			}
			return nil, fmt.Errorf("line %d: %s before the first FROM", start, in.cmd)
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return stages, nil
}

// execForm decodes an instruction's JSON (exec) form.
func execForm(in instruction) ([]string, bool) {
	var out []string
	if err := json.Unmarshal([]byte(in.args), &out); err != nil || len(out) == 0 {
		return nil, false
	}
	return out, true
}

// image is what the checks learn from a Dockerfile.
type image struct {
	stages     []stage
	build      string   // the build stage's `go build` command
	output     string   // its -o path
	binary     string   // where the runtime stage puts it
	uid        int64    // USER's uid, -1 if none or not numeric
	entrypoint []string // exec form
	cmd        []string // exec form
}

// staticBuild is the build stage's command: the static build, its output
// named by -o.
var staticBuild = regexp.MustCompile(`^CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o (/\S+) \./cmd/corput$`)

// runtimeBase is the runtime stage's base: distroless static, non-root,
// optionally pinned by digest.
var runtimeBase = regexp.MustCompile(`^gcr\.io/distroless/static-debian\d+:nonroot(@sha256:[0-9a-f]{64})?$`)

var golangImage = regexp.MustCompile(`^golang:(\d+\.\d+(?:\.\d+)?)(?:-[a-z0-9]+)?$`)

// dockerfileProblems checks a Dockerfile against corput's image rules,
// with goVersion the go line of go.mod. It returns what it learnt and
// every problem found.
func dockerfileProblems(text, goVersion string) (*image, []string) {
	stages, err := parseDockerfile(text)
	if err != nil {
		return nil, []string{err.Error()}
	}
	im := &image{stages: stages, uid: -1}
	var out []string
	problem := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if len(stages) < 2 {
		problem("%d stage(s): want a build stage and a runtime stage (a multi-stage build keeps the toolchain out of the image)", len(stages))
		return im, out
	}
	run := stages[len(stages)-1]
	bi := slices.IndexFunc(stages, func(s stage) bool { return s.name == "build" })
	if bi < 0 {
		problem("no stage named build (FROM golang:… AS build)")
		return im, out
	}
	build := stages[bi]
	if m := golangImage.FindStringSubmatch(build.from); m == nil {
		problem("line %d: the build stage's base %s is not an official golang image", build.line, build.from)
	} else if olderRelease(m[1], goVersion) {
		problem("line %d: the build stage's Go %s is older than go.mod's go %s", build.line, m[1], goVersion)
	}
	for _, in := range build.body {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			im.build = in.args
		}
	}
	if m := staticBuild.FindStringSubmatch(im.build); m == nil {
		problem("the build stage's go build is %q; want CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o PATH ./cmd/corput (a static binary, no paths, no symbols)", im.build)
	} else {
		im.output = m[1]
	}
	if !runtimeBase.MatchString(run.from) {
		problem("line %d: the runtime base %s is not gcr.io/distroless/static-debianN:nonroot (no shell, no package manager, CA certificates and a nonroot passwd entry)", run.line, run.from)
	}
	for _, in := range run.body {
		switch in.cmd {
		case "RUN":
			problem("line %d: RUN in the runtime stage: its base has no shell", in.line)
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && f[0] == "--from=build" {
				if f[1] != im.output {
					problem("line %d: COPY --from=build %s: the build writes %s", in.line, f[1], im.output)
				}
				im.binary = f[2]
			}
		case "USER":
			m := regexp.MustCompile(`^(\d+)(?::(\d+))?$`).FindStringSubmatch(in.args)
			if m == nil {
				problem("line %d: USER %s: want a numeric uid:gid (the kubelet checks runAsNonRoot only against a number)", in.line, in.args)
				continue
			}
			im.uid, _ = strconv.ParseInt(m[1], 10, 64)
			if gid, _ := strconv.ParseInt(m[2], 10, 64); im.uid == 0 || (m[2] != "" && gid == 0) {
				problem("line %d: USER %s: root; run as a non-root uid and gid (65532, distroless's nonroot)", in.line, in.args)
			}
		case "ENTRYPOINT":
			var ok bool
			if im.entrypoint, ok = execForm(in); !ok {
				problem("line %d: ENTRYPOINT %s: want the exec form [\"/corput\"] (no shell in the image; signals reach corput itself)", in.line, in.args)
			}
		case "CMD":
			var ok bool
			if im.cmd, ok = execForm(in); !ok {
				problem("line %d: CMD %s: want the exec form", in.line, in.args)
			}
		}
	}
	switch {
	case im.binary == "":
		problem("the runtime stage copies no binary from the build stage (COPY --from=build %s /corput)", im.output)
	case !slices.Equal(im.entrypoint, []string{im.binary}):
		problem("ENTRYPOINT %q: want [%q], the binary alone, so that the manifests' args are corput's", im.entrypoint, im.binary)
	}
	if !slices.ContainsFunc(run.body, func(in instruction) bool { return in.cmd == "USER" }) {
		problem("the runtime stage sets no USER: the image would run as its base's user, which the manifests cannot check")
	}
	return im, out
}

// olderRelease reports whether the Go release an image tag names (1.26,
// the newest 1.26.x; or 1.26.8) is older than version (go.mod's 1.26.8).
func olderRelease(tag, version string) bool {
	t, v := strings.Split(tag, "."), strings.Split(version, ".")
	for i := range t {
		a, _ := strconv.Atoi(t[i])
		b := 0
		if i < len(v) {
			b, _ = strconv.Atoi(v[i])
		}
		if a != b {
			return a < b
		}
	}
	return false
}

// goDirective reads go.mod's go line.
func goDirective(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(goModPath)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+(?:\.\d+)?)\s*$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod: no go line")
	}
	return string(m[1])
}

func readDockerfile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDockerfile: the image is a static binary on distroless, run as a
// numeric non-root user that the manifests' runAsUser agrees with, its
// entrypoint the binary, its default command flags corput has.
func TestDockerfile(t *testing.T) {
	im, problems := dockerfileProblems(readDockerfile(t), goDirective(t))
	for _, p := range problems {
		t.Error(p)
	}
	if t.Failed() {
		return
	}
	m, err := loadManifests(filesIn(t, "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.podTemplates() {
		for _, c := range append(slices.Clone(p.spec.InitContainers), p.spec.Containers...) {
			if img, _, _ := strings.Cut(c.Image, ":"); img != "corput" {
				continue
			}
			if u := runAsUser(p.spec, &c); u != nil && *u != im.uid {
				t.Errorf("%s, container %s: runAsUser %d, but the image's USER is %d", p.name, c.Name, *u, im.uid)
			}
		}
	}
	bin := testbin.Corput(t)
	if missing := unknownFlags(t, bin, im.cmd); len(missing) > 0 {
		t.Errorf("the image's CMD %q uses flags corput %s does not have: %s", im.cmd, im.cmd[0], strings.Join(missing, ", "))
	}
}

// unknownFlags returns the --flags of args (a corput command line, the
// command first) that the command's -h does not list.
func unknownFlags(t *testing.T, bin string, args []string) []string {
	t.Helper()
	if len(args) == 0 {
		return []string{"(no command)"}
	}
	help, _ := exec.Command(bin, args[0], "-h").CombinedOutput()
	if strings.Contains(string(help), "unknown command") {
		return []string{fmt.Sprintf("%q is not a corput command:\n%s", args[0], help)}
	}
	var out []string
	for _, a := range args[1:] {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if !strings.Contains(string(help), "-"+name+" ") {
				out = append(out, a)
			}
		}
	}
	return out
}

// TestDockerfileChecksCatchMistakes proves each Dockerfile check can fail.
func TestDockerfileChecksCatchMistakes(t *testing.T) {
	good, goVersion := readDockerfile(t), goDirective(t)
	for _, mu := range []struct{ name, old, new, want string }{
		{"root user", "USER 65532:65532", "USER 0:0", "root; run as a non-root"},
		{"user by name", "USER 65532:65532", "USER nonroot", "want a numeric uid:gid"},
		{"no user", "USER 65532:65532\n", "", "sets no USER"},
		{"cgo on", "CGO_ENABLED=0", "CGO_ENABLED=1", "want CGO_ENABLED=0 go build"},
		{"paths kept", " -trimpath", "", "want CGO_ENABLED=0 go build"},
		{"symbols kept", " -ldflags '-s -w'", "", "want CGO_ENABLED=0 go build"},
		{"a distribution base", "FROM gcr.io/distroless/static-debian12:nonroot", "FROM debian:bookworm-slim", "is not gcr.io/distroless/static"},
		{"distroless as root", "static-debian12:nonroot", "static-debian12:latest", "is not gcr.io/distroless/static"},
		{"one stage", "FROM gcr.io/distroless/static-debian12:nonroot\nCOPY --from=build /out/corput /corput\n", "", "want a build stage and a runtime stage"},
		{"an old toolchain", "golang:1.26.8-bookworm", "golang:1.25-bookworm", "older than go.mod's"},
		{"a shell in the runtime stage", "COPY --from=build /out/corput /corput\n", "COPY --from=build /out/corput /corput\nRUN chmod 0555 /corput\n", "RUN in the runtime stage"},
		{"the wrong file copied", "COPY --from=build /out/corput", "COPY --from=build /src/corput", "the build writes /out/corput"},
		{"shell-form entrypoint", `ENTRYPOINT ["/corput"]`, "ENTRYPOINT /corput", "want the exec form"},
		{"entrypoint not the binary", `ENTRYPOINT ["/corput"]`, `ENTRYPOINT ["/bin/sh", "-c", "/corput"]`, "the binary alone"},
	} {
		t.Run(mu.name, func(t *testing.T) {
			if !strings.Contains(good, mu.old) {
				t.Fatalf("%q is not in the Dockerfile; update the mutation", mu.old)
			}
			_, problems := dockerfileProblems(strings.Replace(good, mu.old, mu.new, 1), goVersion)
			got := strings.Join(problems, "\n")
			t.Logf("reported: %s", got)
			if !strings.Contains(got, mu.want) {
				t.Errorf("want a problem containing %q, got:\n%s", mu.want, got)
			}
		})
	}
	bin := testbin.Corput(t)
	if got := unknownFlags(t, bin, []string{"serve", "--config", "x", "--confg", "y"}); !slices.Equal(got, []string{"--confg"}) {
		t.Errorf("unknownFlags found %v, want [--confg]", got)
	}
	if got := unknownFlags(t, bin, []string{"srve"}); len(got) != 1 || !strings.Contains(got[0], "not a corput command") {
		t.Errorf("unknownFlags(srve) = %v, want an unknown command", got)
	}
}

// EnvStaticBuild runs TestDockerfileBuildsAStaticBinary; .ci/run sets it.
const EnvStaticBuild = "CORPUT_STATIC_BUILD"

// TestDockerfileBuildsAStaticBinary runs the build stage's command as
// written (its output moved to a temporary directory) from the repository
// root, which is what the build stage copies: the binary must be static —
// no program interpreter, no shared library — which `file` confirms, and
// it must tell its build (`--version`: this Go, this commit). It compiles
// every dependency afresh (-trimpath shares no cache with other builds),
// so it runs only with CORPUT_STATIC_BUILD=1, as .ci/run sets.
func TestDockerfileBuildsAStaticBinary(t *testing.T) {
	im, problems := dockerfileProblems(readDockerfile(t), goDirective(t))
	if len(problems) > 0 || im.output == "" {
		t.Fatalf("the Dockerfile's build command: %v", problems)
	}
	if os.Getenv(EnvStaticBuild) != "1" {
		t.Skipf("set %s=1 to run the image's build command: %s", EnvStaticBuild, im.build)
	}
	out := filepath.Join(t.TempDir(), "corput")
	command := strings.Replace(im.build, "-o "+im.output+" ", "-o "+out+" ", 1)
	build := exec.Command("sh", "-c", command)
	build.Dir = ".."
	// The build stage sets no GOFLAGS, so -buildvcs is auto there,
	// whatever a go env file here says.
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=auto")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a program interpreter (PT_INTERP): it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (%v)", libs, err)
	}
	if _, err := exec.LookPath("file"); err == nil {
		b, _ := exec.Command("file", out).CombinedOutput()
		t.Logf("file: %s", strings.TrimSpace(string(b)))
		if !strings.Contains(string(b), "statically linked") {
			t.Errorf("file does not say statically linked: %s", b)
		}
	}
	if _, err := exec.LookPath("ldd"); err == nil {
		b, _ := exec.Command("ldd", out).CombinedOutput()
		t.Logf("ldd: %s", strings.TrimSpace(string(b)))
		if !strings.Contains(string(b), "not a dynamic executable") {
			t.Errorf("ldd does not say not a dynamic executable: %s", b)
		}
	}
	v, err := exec.Command(out, "--version").Output()
	if err != nil {
		t.Fatalf("corput --version: %v", err)
	}
	t.Logf("corput --version: %s", strings.TrimSpace(string(v)))
	if !strings.HasPrefix(string(v), "corput ") || !strings.Contains(string(v), runtime.Version()) {
		t.Errorf("corput --version = %q, want corput's build and Go %s", v, runtime.Version())
	}
	// A checkout whose .git is a directory, as the build stage's is, is
	// stamped with its commit (the toolchain does not stamp from a git
	// worktree, whose .git is a file).
	if st, err := os.Stat(filepath.Join("..", ".git")); err != nil || !st.IsDir() {
		t.Logf("../.git is not a directory (a worktree): the commit is not stamped here")
		return
	}
	if rev, err := exec.Command("git", "-C", "..", "rev-parse", "HEAD").Output(); err == nil {
		if want := "commit " + strings.TrimSpace(string(rev)); !strings.Contains(string(v), want) {
			t.Errorf("corput --version = %q, want the checkout's %s", v, want)
		}
	}
}

// TestDockerignoreKeepsTheTreeClean: .dockerignore leaves out no file git
// tracks, so the build stage's tree is the commit's and the binary is not
// stamped modified for a file missing from the context.
func TestDockerignoreKeepsTheTreeClean(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	tracked, err := exec.Command("git", "-C", "..", "ls-files").Output()
	if err != nil {
		t.Skipf("no git checkout to compare with: %v", err)
	}
	for _, pattern := range strings.Split(string(data), "\n") {
		pattern = strings.TrimSpace(pattern)
		if pattern == "" || strings.HasPrefix(pattern, "#") {
			continue
		}
		p := strings.TrimSuffix(strings.TrimPrefix(pattern, "/"), "/")
		for _, file := range strings.Split(strings.TrimSpace(string(tracked)), "\n") {
			top, _, _ := strings.Cut(file, "/")
			if ok, _ := filepath.Match(p, file); ok || top == p {
				t.Errorf(".dockerignore's %s leaves out %s, which git tracks", pattern, file)
			}
		}
	}
}
