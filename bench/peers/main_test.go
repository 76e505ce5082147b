package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corput/corput/bench/peers/internal/proxies"
	"github.com/corput/corput/bench/peers/internal/results"
)

func TestOptions(t *testing.T) {
	if _, err := parseOptions([]string{"--scenarios", "raw,bogus"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--scenarios") {
		t.Errorf("unknown scenario: err = %v", err)
	}
	if o, err := parseOptions([]string{"--scenarios", "raw,raw_tls"}, io.Discard); err != nil || !slices.Equal(o.Scenarios, []string{results.ScRaw, results.ScRawTLS}) {
		t.Errorf("--scenarios raw,raw_tls: %v, %v", o.Scenarios, err)
	}
	if _, err := parseOptions([]string{"--origin-procs", "-1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--origin-procs") {
		t.Errorf("negative origin processors: err = %v", err)
	}
	if _, err := parseOptions([]string{"extra"}, io.Discard); err == nil || !strings.Contains(err.Error(), `"extra"`) {
		t.Errorf("an argument after the flags: err = %v", err)
	}
	o, err := parseOptions(nil, io.Discard)
	if err != nil || o.RawConns != 64 || o.RawDuration != 10*time.Second || o.SkewDuration != 20*time.Second || o.Rate != 300 || o.OriginProcs != 1 {
		t.Errorf("defaults = %+v, %v; want wrk -c64 -d10s and 300 req/s for 20 s, one processor per origin", o, err)
	}
	if o.Balancer != proxies.DefaultBalancer || !o.Forwarded || !o.Install || o.Rounds != 1 || o.Seed != 1 || !slices.Equal(o.Proxies, []string{"corput", "nginx", "haproxy", "caddy"}) {
		t.Errorf("defaults = %+v; want corput's default balancer written out, forwarded headers, install, 1 round, seed 1, every proxy", o)
	}
	if want := []string{results.ScRaw, results.ScRawTLS, results.ScSkewed, results.ScColdJoin, results.ScOverhead}; !slices.Equal(o.Scenarios, want) {
		t.Errorf("default scenarios %v, want %v (spread only when named)", o.Scenarios, want)
	}
	if s := o.Spread; s.Origins*s.Listeners != 800 || s.Loops != 16 || s.Conns != 256 || s.FewConns != 4 ||
		s.Streams != 100 || s.H2Requests != 40000 || s.Duration != 10*time.Second {
		t.Errorf("spread defaults = %+v; want 800 endpoints, 16 loops, wrk -c256 and -c4 for 10 s, h2load -c1 -m100 -n40000", s)
	}
	if o.TLS.CorputProtocol != "auto" || o.TLS.Origins*o.TLS.Listeners != 16 || o.Many.Origins*o.Many.Listeners != 64 || o.Many.Window != time.Minute {
		t.Errorf("TLS defaults = %+v, %+v; want corput on auto, 16 and 64 endpoints, a 60 s window", o.TLS, o.Many)
	}
	if o, err := parseOptions([]string{"--scenarios", "spread", "--corput-balancer", "{policy: p2c}"}, io.Discard); err != nil || !slices.Equal(o.Scenarios, []string{results.ScSpread}) || o.Balancer != "{policy: p2c}" {
		t.Errorf("--scenarios spread --corput-balancer: %v %q, %v", o.Scenarios, o.Balancer, err)
	}
	for _, bad := range [][]string{{"--spread-listeners", "0"}, {"--spread-loops", "0"}, {"--spread-duration", "500ms"}, {"--spread-h2-requests", "-1"},
		{"--rounds", "0"}, {"--raw-rounds", "-1"}, {"--rate", "0"}, {"--many-listeners", "0"}, {"--tls-corput-protocol", "h3"}} {
		if _, err := parseOptions(bad, io.Discard); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: err = %v; want an error naming the flag", bad, err)
		}
	}
	if o, err := parseOptions([]string{"--tls-corput-protocol", "h1"}, io.Discard); err != nil || o.TLS.CorputProtocol != "h1" {
		t.Errorf("--tls-corput-protocol h1: %q, %v", o.TLS.CorputProtocol, err)
	}
}

func TestH2Options(t *testing.T) {
	for _, args := range [][]string{{"--h2-hold", "5s", "--h2-ramp", "5s"}, {"--h2-streams", "0"}, {"--h2-cpu-duration", "500ms"}} {
		if _, err := parseOptions(append([]string{"--scenarios", "h2_streams"}, args...), io.Discard); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: err = %v; want an error naming %s", args, err, args[0])
		}
	}
	o, err := parseOptions([]string{"--scenarios", "h2_streams,h2_cpu", "--h2-corput-pool", "{acquire_timeout: 1s}"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.H2.Streams != 60000 || o.H2.PerConn != 100 || o.H2.Hold != 90*time.Second || o.H2.CorputPool != "{acquire_timeout: 1s}" {
		t.Errorf("h2 options %+v; want 60000 streams, 100 per connection, held 90 s, the pool given", o.H2)
	}
}

// TestHelpIsNotAnError: -h prints the flags and exits 0 without running.
func TestHelpIsNotAnError(t *testing.T) {
	var out strings.Builder
	if code := run([]string{"-h"}, io.Discard, &out); code != 0 || !strings.Contains(out.String(), "-scenarios") {
		t.Errorf("run -h = %d, printed %q", code, out.String())
	}
	if code := run([]string{"--rounds", "0"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("run --rounds 0 = %d, want 2", code)
	}
}
