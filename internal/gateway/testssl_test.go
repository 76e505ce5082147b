package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testorigin "github.com/corput/corput/internal/origin"
)

// testsslEnv turns on TestTLSGradedByTestssl: testssl.sh spends about half
// a minute of this machine's CPU in bash before its first probe, and the
// two runs take about three minutes together, too long for every `go test`.
const testsslEnv = "CORPUT_TESTSSL"

// testsslFinding is one finding of testssl.sh's flat JSON output.
type testsslFinding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	Finding  string `json:"finding"`
}

// TestTLSGradedByTestssl grades a real `corput serve` HTTPS listener with
// testssl.sh, a tool nobody here wrote, on loopback: with the default
// policy, no protocol below TLS 1.2, no CBC suite, only suites with
// forward secrecy (ECDHE) and no finding rated HIGH or CRITICAL; with
// min_version 1.3, TLS 1.2 not offered. The certificate is RSA, so that a
// suite with RSA key exchange would be negotiable if the policy offered
// one. Certificate checks (-S) are left out: a loopback test certificate
// is self-signed. Run with CORPUT_TESTSSL=1 and -v to read its summaries.
func TestTLSGradedByTestssl(t *testing.T) {
	if os.Getenv(testsslEnv) == "" {
		t.Skipf("set %s=1 to grade the HTTPS listener with testssl.sh (about 3 minutes; install it with apt-get install -y testssl.sh)", testsslEnv)
	}
	tool := lookPath("testssl", "testssl.sh")
	if tool == "" {
		t.Skip("testssl.sh is not installed: apt-get install -y testssl.sh")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl (which testssl.sh uses, and which writes the RSA test certificate) is not installed: apt-get install -y openssl")
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "rsa.pem"), filepath.Join(dir, "rsa.key")
	if out, err := exec.Command("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
		"-keyout", key, "-out", cert, "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1").CombinedOutput(); err != nil {
		t.Fatalf("openssl req: %v\n%s", err, out)
	}
	origins := startOrigins(t, 1, testorigin.Options{Classes: fastClass})
	serve := func(policy string) string {
		text := fmt.Sprintf("tls: {cert: %q, key: %q%s}\n", cert, key, policy)
		return startServe(t, withEndpoints(text+cfgText(1, ""), serverAddrs(origins)...)).listen
	}
	defaultAddr, tls13Addr := serve(""), serve(`, min_version: "1.3"`)

	t.Run("default policy", func(t *testing.T) {
		t.Parallel()
		f := runTestssl(t, tool, defaultAddr, "-p", "-s", "-f", "-E", "-U")
		for _, id := range []string{"SSLv2", "SSLv3", "TLS1", "TLS1_1", "cipherlist_NULL", "cipherlist_aNULL",
			"cipherlist_EXPORT", "cipherlist_LOW", "cipherlist_3DES_IDEA", "cipherlist_AVERAGE"} {
			f.says(t, id, "not offered")
		}
		f.says(t, "TLS1_2", "offered")
		f.says(t, "TLS1_3", "offered")
		f.says(t, "PFS", "offered")
		tls12 := 0
		for _, x := range f {
			if !strings.HasPrefix(x.ID, "cipher-tls") {
				continue
			}
			if strings.HasPrefix(x.ID, "cipher-tls1_2") {
				tls12++
			}
			fields := strings.Fields(x.Finding)
			iana := fields[len(fields)-1]
			if !strings.Contains(x.Finding, " ECDH ") || !(strings.Contains(iana, "_GCM_") || strings.Contains(iana, "CHACHA20_POLY1305")) {
				t.Errorf("a suite without forward secrecy or AEAD offered: %s", x.Finding)
			}
		}
		if tls12 == 0 {
			t.Error("testssl.sh listed no TLS 1.2 suite: the suite check saw nothing")
		}
		f.noneRated(t, "HIGH", "CRITICAL")
	})
	t.Run("min_version 1.3", func(t *testing.T) {
		t.Parallel()
		f := runTestssl(t, tool, tls13Addr, "-p", "-s", "-f")
		for _, id := range []string{"SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2"} {
			f.says(t, id, "not offered")
		}
		f.says(t, "TLS1_3", "offered")
		f.noneRated(t, "HIGH", "CRITICAL")
	})
}

func lookPath(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

type testsslFindings []testsslFinding

// runTestssl runs testssl.sh's checks against addr, logs its text report
// and returns its findings.
func runTestssl(t *testing.T, tool, addr string, checks ...string) testsslFindings {
	t.Helper()
	out := filepath.Join(t.TempDir(), "findings.json")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := append(checks, "--jsonfile", out, "--nodns", "none", "--quiet", "--color", "0", "--warnings", "off", addr)
	start := time.Now()
	text, err := exec.CommandContext(ctx, tool, args...).CombinedOutput()
	t.Logf("testssl %s (%.0f s):\n%s", strings.Join(args, " "), time.Since(start).Seconds(), text)
	if err != nil {
		t.Fatalf("testssl.sh: %v", err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var f testsslFindings
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("testssl.sh's JSON: %v", err)
	}
	return f
}

// says checks that finding id starts with want.
func (f testsslFindings) says(t *testing.T, id, want string) {
	t.Helper()
	for _, x := range f {
		if x.ID == id {
			if !strings.HasPrefix(x.Finding, want) {
				t.Errorf("%s: %q, want %q", id, x.Finding, want)
			}
			return
		}
	}
	t.Errorf("testssl.sh reported no %s", id)
}

// noneRated checks that no finding has one of the severities, and logs
// how many each severity has.
func (f testsslFindings) noneRated(t *testing.T, severities ...string) {
	t.Helper()
	counts := map[string]int{}
	for _, x := range f {
		counts[x.Severity]++
		for _, s := range severities {
			if x.Severity == s {
				t.Errorf("rated %s: %s: %s", s, x.ID, x.Finding)
			}
		}
	}
	t.Logf("findings by severity: %v", counts)
}
