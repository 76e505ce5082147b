package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/gateway"
	"github.com/corput/corput/internal/origin"
)

// part is a running origin or gateway: where it serves and how to stop it.
type part struct {
	name  string
	addr  string // the serving address, host:port
	admin string // a gateway's admin address; "" for an origin
	stop  func() error
	// reload has a gateway started by gatewayOn read its file again
	// (SIGHUP for a process); nil for the others.
	reload func() error
}

// launcher starts the parts of a run. The run talks to every part over
// its sockets only, so the same orchestration drives child processes (the
// real `corput origin` and `corput serve`) and, for tests, servers inside
// this process.
type launcher interface {
	// origin starts test origin i: the default profile (the 70/30 mix,
	// 8 workers) speaking h1 and prior-knowledge h2 on one port.
	origin(ctx context.Context, i int, seed uint64) (*part, error)
	// gateway starts a gateway from a config file's text; name is unique
	// within the run.
	gateway(ctx context.Context, name string, cfg []byte) (*part, error)
	// gatewayOn starts a gateway from the config file at path that
	// serves the listening socket ln instead of binding its listen
	// address (socket activation): a restart hands the same socket to
	// the next gateway, which accepts beside the old one. Its part can
	// reload.
	gatewayOn(ctx context.Context, name, path string, ln *os.File) (*part, error)
}

// originID names origin i in logs and in the X-Corput-Origin header.
func originID(i int) string { return fmt.Sprintf("e%02d", i) }

// stopAll stops parts in reverse order and joins their errors.
func stopAll(parts []*part) error {
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		if err := parts[i].stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", parts[i].name, err))
		}
	}
	return errors.Join(errs...)
}

// inProcess runs origins (origin.Start) and gateways (gateway.New) inside
// this process. Every byte still crosses a loopback socket; only the
// process boundary is gone.
type inProcess struct{}

func (inProcess) origin(_ context.Context, i int, seed uint64) (*part, error) {
	opts, err := origin.Profile("default")
	if err != nil {
		return nil, err
	}
	opts.Proto, opts.ID, opts.Seed = origin.H2C, originID(i), seed
	srv, err := origin.Start(opts)
	if err != nil {
		return nil, err
	}
	return &part{name: "origin " + opts.ID, addr: srv.Addr(), stop: srv.Close}, nil
}

func (inProcess) gateway(_ context.Context, name string, text []byte) (*part, error) {
	cfg, err := config.Parse(text, name+".yaml")
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", name, err)
	}
	return startInProcess(name, cfg, gateway.Options{})
}

// gatewayOn serves a copy of ln (net.FileListener) and reloads through
// Gateway.ReloadFromSource, the path SIGHUP takes in `corput serve`.
func (inProcess) gatewayOn(_ context.Context, name, path string, ln *os.File) (*part, error) {
	load := func() (*config.Config, error) { return config.Load(path) }
	cfg, err := load()
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", name, err)
	}
	l, err := net.FileListener(ln)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: the socket handed over: %w", name, err)
	}
	p, err := startInProcess(name, cfg, gateway.Options{Load: load, Listeners: gateway.Listeners{Listen: l}})
	if err != nil {
		l.Close()
	}
	return p, err
}

func startInProcess(name string, cfg *config.Config, opts gateway.Options) (*part, error) {
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := gateway.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", name, err)
	}
	if err := g.Start(); err != nil {
		g.Close()
		return nil, fmt.Errorf("gateway %s: %w", name, err)
	}
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
		defer cancel()
		return g.Shutdown(ctx)
	}
	return &part{name: "gateway " + name, addr: g.Addr(), admin: g.AdminAddr(), stop: stop, reload: g.ReloadFromSource}, nil
}

// stopGrace is how long a part may take to drain and exit before it is
// killed.
const stopGrace = 10 * time.Second
