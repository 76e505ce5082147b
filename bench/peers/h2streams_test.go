package main

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/testbin"
)

func TestParseStat(t *testing.T) {
	// The command may hold spaces and parentheses: fields count from the
	// last ')'.
	line := []byte("4242 (a) b (c) S 1 4200 4200 0 -1 4194560 100 0 0 0 731 215 0 0 20 0 3 0 12345 1000 50\n")
	f, ok := parseStat(line)
	if !ok || f.pgrp != 4200 || f.utime != 731 || f.stime != 215 {
		t.Errorf("parseStat = %+v, %v; want pgrp 4200, utime 731, stime 215", f, ok)
	}
	if _, ok := parseStat([]byte("4242 (cut")); ok {
		t.Error("a line without its closing parenthesis parsed")
	}
}

func TestReadGroupSeesThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		t.Skip("no /proc")
	}
	u, err := readGroup(syscall.Getpgrp())
	if err != nil {
		t.Fatal(err)
	}
	if u.Procs < 1 || u.RSSBytes < 1<<20 {
		t.Errorf("own group: %+v; want this process with more than 1 MiB resident", u)
	}
	if _, err := readGroup(1 << 30); err == nil {
		t.Error("a group nobody is in read without error")
	}
}

func TestH2Options(t *testing.T) {
	for _, args := range [][]string{{"--h2-hold", "5s", "--h2-ramp", "5s"}, {"--h2-streams", "0"}, {"--h2-cpu-duration", "500ms"}} {
		if _, err := parseOptions(append([]string{"--scenarios", "h2_streams"}, args...), io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	o, err := parseOptions([]string{"--scenarios", "h2_streams,h2_cpu"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.h2.streams != 60000 || usesStandardOrigins(o.scenarios) {
		t.Errorf("streams %d, standard origins %v; want 60000 and none", o.h2.streams, usesStandardOrigins(o.scenarios))
	}
}

// TestH2ConfigsAreValid: corput's config parses with h2 upstream over
// verified TLS, and the peers' configs pass their own checks.
func TestH2ConfigsAreValid(t *testing.T) {
	members := []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	tc, err := writeTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(corputH2Config("127.0.0.1:8080", "127.0.0.1:9901", members, tc.cert, "", "", 100*time.Second)), "bench.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Origins[0]
	if o.Protocol != "auto" || o.TLS == nil || o.TLS.CA != tc.cert || o.TLS.InsecureSkipVerify || o.Timeouts.Request != 100*time.Second || o.Pool.MaxPending != 50 {
		t.Errorf("origin %+v; want protocol auto, tls verified with the bench CA, request timeout 100s, pool defaults", o)
	}
	cfg, err = config.Parse([]byte(corputH2Config("127.0.0.1:8080", "127.0.0.1:9901", members, tc.cert, "", "{acquire_timeout: 1s}", 100*time.Second)), "bench.yaml")
	if err != nil || cfg.Origins[0].Pool.AcquireTimeout != time.Second || cfg.Origins[0].Pool.MaxPending != 50 {
		t.Errorf("--h2-corput-pool '{acquire_timeout: 1s}': %v; want the pool's acquire timeout 1s, the rest its defaults", err)
	}
	want := map[string]string{nameHAProxy: "ssl verify required ca-file " + tc.cert + " alpn h2", nameCaddy: "tls_trusted_ca_certs " + tc.cert}
	for _, p := range []proxy{haproxyProxy{fwd: true}, caddyProxy{}} {
		for _, prior := range []bool{false, true} {
			if _, err := exec.LookPath(p.bin()); err != nil {
				t.Skipf("%s not installed", p.bin())
			}
			dir := t.TempDir()
			argv, err := h2Proxy{proxy: p, ca: tc.cert, prior: prior, timeout: time.Minute}.files(dir, "127.0.0.1:18080", members, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			path := argv[len(argv)-1]
			check := []string{"haproxy", "-c", "-f", path}
			if p.name() == nameCaddy {
				path = argv[3]
				check = []string{"caddy", "validate", "--config", path, "--adapter", "caddyfile"}
			}
			cmd := exec.Command(check[0], check[1:]...)
			cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(check, " "), err, out)
			}
			b, _ := os.ReadFile(path)
			if !strings.Contains(string(b), want[p.name()]) {
				t.Errorf("%s: config lacks %q:\n%s", p.name(), want[p.name()], b)
			}
		}
	}
	if _, err := (h2Proxy{proxy: nginxProxy{}}).files(t.TempDir(), "127.0.0.1:18080", members, "", nil); err == nil {
		t.Error("nginx got an h2 upstream config")
	}
}

// TestH2Smoke runs both h2 scenarios through corput at a small scale:
// every stream is held at once with no error, and CPU is counted.
func TestH2Smoke(t *testing.T) {
	bin := testbin.Corput(t)
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not installed")
	}
	o, err := parseOptions([]string{"--scenarios", "h2_streams,h2_cpu", "--proxies", "corput,nginx", "--h2-origins", "2", "--h2-streams", "300",
		"--h2-per-conn", "50", "--h2-ramp", "300ms", "--h2-hold", "1500ms", "--h2-cpu-duration", "1s", "--h2-cpu-conns", "4"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	b := runTestBench(t, o, bin, corputProxy{bin_: bin, balancer: o.balancer}, nginxProxy{})
	if b.totalRuns() != 2 || len(b.res.Scenarios) != 2 {
		t.Fatalf("%d runs, %d scenarios; want 2 and 2 (nginx left out)", b.totalRuns(), len(b.res.Scenarios))
	}
	s, ok := b.res.find(scH2Streams, nameCorput)
	if !ok || s.H2 == nil || s.Errors != 0 || s.ActiveStreams != 300 || s.ClientActiveStreams != 300 || s.DownstreamConnections != 6 ||
		s.UpstreamConnections < 2 || s.RSSPerStreamKiB <= 0 || s.P50MS < 1500 {
		t.Errorf("h2_streams: %+v %+v; want 300 streams held at once over 6 connections, no error, RSS growth, latency ≥ the hold", s, s.H2)
	}
	c, ok := b.res.find(scH2CPU, nameCorput)
	if !ok || c.H2 == nil || c.Requests < 100 || c.CPUUSPerRequest <= 0 || c.Errors != 0 {
		t.Errorf("h2_cpu: %+v %+v; want requests counted by the origins and CPU per request", c, c.H2)
	}
	if gs := b.res.goals(); len(gs) == 0 || !strings.HasPrefix(gs[0].Name, "h2_streams") || !gs[0].Met {
		t.Errorf("goals %+v; want the h2_streams hold goal, met", gs)
	}
}
