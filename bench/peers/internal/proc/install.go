package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// aptPackage is the Debian package that installs an executable a run
// needs.
var aptPackage = map[string]string{
	"nginx": "nginx-light", "haproxy": "haproxy", "caddy": "caddy", "wrk": "wrk", "openssl": "openssl", "h2load": "nghttp2-client",
}

// Install installs the missing executables with apt-get; with install
// false a missing one is an error that names the packages to install.
func Install(bins []string, install bool) error {
	var missing []string
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !install {
		return fmt.Errorf("not installed: %s (run without --install=false, or apt-get install %s)", strings.Join(missing, ", "), debs(missing))
	}
	fmt.Fprintf(os.Stderr, "peers: installing %s with apt-get\n", debs(missing))
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq"}, strings.Fields(debs(missing))...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, LastLines(string(out), 5))
		}
	}
	return nil
}

func debs(bins []string) string {
	var out []string
	for _, b := range bins {
		out = append(out, aptPackage[b])
	}
	return strings.Join(out, " ")
}

// LastLines is the last n lines of a command's output, for error
// messages.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
