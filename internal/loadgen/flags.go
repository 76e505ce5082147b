package loadgen

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/corput/corput/internal/workload"
)

// Flags are the command-line flags of `corput load`.
type Flags struct {
	target, mix, proto, ca string
	rate                   float64
	duration, timeout      time.Duration
	seed                   uint64
	connections            int
	raw, insecure, json    bool
}

// BindFlags defines the load generator's flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.target, "target", "", "base `URL`; each request goes to URL/<class>, e.g. /light and /heavy")
	fs.Float64Var(&f.rate, "rate", 0, "mean requests per second, Poisson arrivals (open loop)")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long to send")
	fs.StringVar(&f.mix, "workload", "default", "the mix: a built-in `NAME` ("+strings.Join(workload.Names(), ", ")+") or a YAML/JSON FILE")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the arrival times and the class draws")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	fs.BoolVar(&f.raw, "raw", false, "tiny-response throughput test: requests go to URL itself, throughput only, NOT balancer evidence; with --rate 0 it is closed loop over --connections")
	fs.IntVar(&f.connections, "connections", 64, "closed-loop raw test: connections (and workers)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "per-request timeout")
	fs.StringVar(&f.proto, "proto", "", "h1, h2 (https) or h2c (prior knowledge); default HTTP/1.1, or h2 by ALPN for https")
	fs.StringVar(&f.ca, "ca", "", "PEM `FILE` of CAs to trust for https (e.g. corput origin --write-ca)")
	fs.BoolVar(&f.insecure, "insecure", false, "skip TLS certificate checks")
	return f
}

// JSON reports whether --json was given.
func (f *Flags) JSON() bool { return f.json }

// Options builds the run's options.
func (f *Flags) Options() (Options, error) {
	o := Options{
		Target: f.target, Rate: f.rate, Duration: f.duration, Raw: f.raw, Seed: f.seed,
		Timeout: f.timeout, Connections: f.connections, Proto: f.proto,
	}
	if !f.raw {
		m, err := workload.Load(f.mix)
		if err != nil {
			return Options{}, fmt.Errorf("loadgen: --workload: %w", err)
		}
		o.Mix = m
	}
	if f.ca != "" || f.insecure {
		o.TLS = &tls.Config{InsecureSkipVerify: f.insecure}
	}
	if f.ca != "" {
		pemBytes, err := os.ReadFile(f.ca)
		if err != nil {
			return Options{}, fmt.Errorf("loadgen: --ca: %w", err)
		}
		o.TLS.RootCAs = x509.NewCertPool()
		if !o.TLS.RootCAs.AppendCertsFromPEM(pemBytes) {
			return Options{}, fmt.Errorf("loadgen: --ca %s: no PEM certificate in it", f.ca)
		}
	}
	return o, nil
}
