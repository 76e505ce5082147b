package deploy

import (
	"bufio"
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/testbin"
)

// unit is a systemd unit file: section → key → values (a key may repeat).
type unit map[string]map[string][]string

func readUnit(t *testing.T, name string) unit {
	t.Helper()
	b, err := Files.ReadFile("systemd/" + name)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", name, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unit) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u[section][key]
	if len(v) != 1 {
		t.Fatalf("[%s] %s: %d values, want 1", section, key, len(v))
	}
	return v[0]
}

// TestSystemdUnitsAgreeWithCorput: the units run flags `corput serve`
// really has, reload with SIGHUP, wait out the default drain before a
// kill, and the socket hands its descriptor over under the name corput's
// socket activation takes as the downstream listener, to the template's
// instances.
func TestSystemdUnitsAgreeWithCorput(t *testing.T) {
	bin := testbin.Corput(t)
	help, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	drain := config.Default().Shutdown.DrainTimeout
	for _, name := range []string{"corput.service", "corput@.service"} {
		u := readUnit(t, name)
		start := u.one(t, "Service", "ExecStart")
		if !strings.Contains(start, " serve ") {
			t.Errorf("%s: ExecStart %q does not run corput serve", name, start)
		}
		for _, flag := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(start, -1) {
			if !strings.Contains(string(help), "-"+flag[1]+" ") {
				t.Errorf("%s: ExecStart uses --%s, which corput serve does not have:\n%s", name, flag[1], help)
			}
		}
		if got := u.one(t, "Service", "ExecReload"); got != "/bin/kill -HUP $MAINPID" {
			t.Errorf("%s: ExecReload = %q, want SIGHUP (a reload in place)", name, got)
		}
		if got := u.one(t, "Service", "KillSignal"); got != "SIGTERM" {
			t.Errorf("%s: KillSignal = %q, want SIGTERM (corput's drain)", name, got)
		}
		stop, err := time.ParseDuration(u.one(t, "Service", "TimeoutStopSec") + "s")
		if err != nil || stop <= drain {
			t.Errorf("%s: TimeoutStopSec %v does not outlast shutdown.drain_timeout's default %v", name, stop, drain)
		}
	}
	tmpl, sock := readUnit(t, "corput@.service"), readUnit(t, "corput.socket")
	if got := tmpl.one(t, "Service", "Sockets"); got != "corput.socket" {
		t.Errorf("corput@.service: Sockets = %q, want corput.socket", got)
	}
	if start := tmpl.one(t, "Service", "ExecStart"); !strings.Contains(start, "--admin 127.0.0.1:%i") {
		t.Errorf("corput@.service: each instance needs its own admin port (--admin 127.0.0.1:%%i): %q", start)
	}
	if got := sock.one(t, "Socket", "FileDescriptorName"); got != "listen" {
		t.Errorf("corput.socket: FileDescriptorName = %q, want listen (the name corput serve takes as the downstream socket)", got)
	}
	if got := sock.one(t, "Socket", "Service"); !regexp.MustCompile(`^corput@\d+\.service$`).MatchString(got) {
		t.Errorf("corput.socket: Service = %q, want an instance of corput@.service", got)
	}
}
