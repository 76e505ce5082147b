package origin

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/corput/corput/internal/workload"
)

// Flags are the command-line flags of `corput origin`: a profile, then any
// flag given explicitly overrides the profile's value.
type Flags struct {
	fs                                      *flag.FlagSet
	listen, profile, proto, mix, warmup, id string
	cert, key, writeCA, clientCA, minTLS    string
	workers, bodyBytes, listeners           int
	slowdown, errorRate                     float64
	seed                                    uint64
	idle                                    time.Duration
}

// BindFlags defines the origin's flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.listen, "listen", "127.0.0.1:9001", "`ADDR` to listen on (port 0 picks a free one)")
	fs.IntVar(&f.listeners, "listeners", 1, "listen on `N` consecutive ports from --listen's (port 0: a free run in 10000–29999), each counted on its own in the stats")
	fs.StringVar(&f.profile, "profile", "default", "preset: "+strings.Join(ProfileNames(), ", "))
	fs.StringVar(&f.proto, "proto", string(H1), "h1, h2c (h1 and prior-knowledge h2 on one port) or tls (ALPN h2 and http/1.1)")
	fs.StringVar(&f.mix, "workload", "default", "latency classes: a built-in `NAME` ("+strings.Join(workload.Names(), ", ")+") or a YAML/JSON FILE")
	fs.StringVar(&f.warmup, "warmup", "none", "cold start `FACTORx:WINDOW`, e.g. 8x:40s")
	fs.StringVar(&f.id, "id", "", "value of the "+IDHeader+" response header")
	fs.StringVar(&f.cert, "cert", "", "TLS certificate `FILE` (default: generate a self-signed one)")
	fs.StringVar(&f.key, "key", "", "TLS key `FILE`")
	fs.StringVar(&f.clientCA, "client-ca", "", "with --proto tls, require client certificates signed by this PEM `FILE` (mTLS)")
	fs.StringVar(&f.minTLS, "min-tls", "1.2", "with --proto tls, the lowest TLS `VERSION` served: 1.2 or 1.3")
	fs.StringVar(&f.writeCA, "write-ca", "", "write the TLS certificate in PEM to `FILE` for clients to trust")
	fs.IntVar(&f.workers, "workers", 8, "requests served at once; later ones wait (0 = unlimited)")
	fs.IntVar(&f.bodyBytes, "body-bytes", 0, "response body size (0 sends \"ok\\n\")")
	fs.Float64Var(&f.slowdown, "slowdown", 1, "multiply every service time (5 = the degraded endpoint)")
	fs.Float64Var(&f.errorRate, "error-rate", 0, "probability `P` of answering 500 (1 = always)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the 5xx draws")
	fs.DurationVar(&f.idle, "idle-timeout", 0, "close keep-alive connections idle this long (0 = never)")
	return f
}

// Options builds the options: the profile's, overridden by every flag that
// was given.
func (f *Flags) Options() (Options, error) {
	o, err := Profile(f.profile)
	if err != nil {
		return Options{}, err
	}
	o.Listen, o.Listeners, o.Proto, o.ID, o.Seed = f.listen, f.listeners, Proto(f.proto), f.id, f.seed
	o.BodyBytes, o.IdleTimeout, o.CertFile, o.KeyFile, o.ClientCAFile = f.bodyBytes, f.idle, f.cert, f.key, f.clientCA
	var errs []error
	o.MinTLS, err = parseMinTLS(f.minTLS)
	errs = append(errs, err)
	f.fs.Visit(func(fl *flag.Flag) {
		var err error
		switch fl.Name {
		case "workers":
			o.Workers = f.workers
		case "slowdown":
			o.Slowdown = f.slowdown
		case "error-rate":
			o.ErrorRate = f.errorRate
		case "warmup":
			o.Warmup, err = workload.ParseWarmup(f.warmup)
		case "workload":
			var m workload.Mix
			m, err = workload.Load(f.mix)
			o.Classes = m.Classes
		}
		errs = append(errs, err)
	})
	if err := errors.Join(errs...); err != nil {
		return Options{}, fmt.Errorf("origin: %w", err)
	}
	return o, nil
}

// WriteCA writes the running origin's certificate where --write-ca asks.
func (f *Flags) WriteCA(s *Server) error {
	if f.writeCA == "" {
		return nil
	}
	if s.CertPEM() == nil {
		return fmt.Errorf("origin: --write-ca %s needs --proto tls", f.writeCA)
	}
	return os.WriteFile(f.writeCA, s.CertPEM(), 0o644)
}
