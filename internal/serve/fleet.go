package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
	"github.com/corput/corput/internal/gateway"
)

// cpFleet follows the fleet position the control plane of fleet.server
// assigns to this gateway's node id (discovery.FleetXDS). The newest
// position is current(); moved() signals each change, coalesced, so that a
// burst of moves is applied once, at the newest.
type cpFleet struct {
	log   *slog.Logger
	src   *discovery.FleetXDS
	after func(time.Duration) <-chan time.Time // time.After; a test's clock
	moved chan struct{}                        // 1-buffered
	done  chan struct{}                        // closed when the source's Run returns

	mu  sync.Mutex // guards following
	cur discovery.Fleet
	got bool // cur is a position the control plane gave
}

// followFleet starts following the position of cfg's node id; in says
// whether a flag or the environment also gives one, which is refused.
func followFleet(ctx context.Context, cfg *config.Config, in discovery.FleetInputs, log *slog.Logger) (*cpFleet, error) {
	if given := fleetGivenOutside(in); given != "" {
		return nil, fmt.Errorf("%s: the control plane at fleet.server assigns the fleet position; remove %s (or fleet.server)", given, given)
	}
	node := cfg.Fleet.NodeID
	if node == "" {
		node = in.Hostname
	}
	src, err := discovery.NewFleetXDS(discovery.XDSConfig{Server: cfg.Fleet.Server, NodeID: node, TLS: cfg.Fleet.TLS.Files(), Logger: log})
	if err != nil {
		return nil, err
	}
	f := &cpFleet{log: log, after: time.After, moved: make(chan struct{}, 1), done: make(chan struct{}), src: src}
	go func() {
		defer close(f.done)
		_ = src.Run(ctx, f.set)
	}()
	log.Info("fleet position: waiting for the control plane's; the gateway starts once it has one", "server", cfg.Fleet.Server, "node_id", node)
	return f, nil
}

// fleetGivenOutside names a flag or environment variable that gives a
// fleet position, or "".
func fleetGivenOutside(in discovery.FleetInputs) string {
	switch {
	case in.FlagInstance != nil:
		return "--fleet-instance"
	case in.FlagSize != nil:
		return "--fleet-size"
	}
	if in.LookupEnv != nil {
		for _, k := range []string{discovery.EnvFleetInstance, discovery.EnvFleetSize} {
			if _, ok := in.LookupEnv(k); ok {
				return k
			}
		}
	}
	return ""
}

func (f *cpFleet) set(fl discovery.Fleet) {
	f.mu.Lock()
	f.cur, f.got = fl, true
	f.mu.Unlock()
	f.log.Info("fleet position from the control plane", "instance", fl.Instance, "size", fl.Size)
	select {
	case f.moved <- struct{}{}:
	default:
	}
}

// current is the newest position, and whether there is one yet.
func (f *cpFleet) current() (discovery.Fleet, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur, f.got
}

// errNoPosition: the wait for the first position ended with ctx.
var errNoPosition = errors.New("stopped before the control plane gave a fleet position")

// first waits for the first position, or for ctx to end. Until it comes
// the gateway does not start: a position made up meanwhile could be
// another gateway's.
func (f *cpFleet) first(ctx context.Context) (discovery.Fleet, error) {
	for {
		if fl, ok := f.current(); ok {
			return fl, nil
		}
		select {
		case <-f.moved:
		case <-ctx.Done():
			return discovery.Fleet{}, fmt.Errorf("%w (%v)", errNoPosition, f.src.Err())
		}
	}
}

// await waits for the first position and places cfg there. Meanwhile the
// admin listener (lns.Admin, or cfg's admin address bound here) answers
// /healthz ok and /readyz 503 (waitingAdmin); its socket is then handed
// to the gateway in lns.Admin.
func (f *cpFleet) await(ctx context.Context, cfg *config.Config, lns *gateway.Listeners) (discovery.Fleet, error) {
	wa, err := serveWhileWaiting(lns.Admin, cfg.Admin.Listen, "waiting for the fleet position from the control plane at "+cfg.Fleet.Server)
	if err != nil {
		return discovery.Fleet{}, err
	}
	f.log.Info("admin: /healthz answers ok and /readyz 503 while the gateway waits for its fleet position", "admin", wa.Addr())
	if _, err := f.first(ctx); err != nil {
		wa.close()
		return discovery.Fleet{}, err
	}
	ln, err := wa.handOver()
	if err != nil {
		ln.Close()
		return discovery.Fleet{}, err
	}
	lns.Admin = ln
	return f.place(cfg), nil
}

// place sets cfg's position to the newest one, and returns it.
func (f *cpFleet) place(cfg *config.Config) discovery.Fleet {
	fl, _ := f.current()
	cfg.Fleet.Instance, cfg.Fleet.Size = fl.Instance, fl.Size
	return fl
}

// moveRetry is how soon a refused move is tried again: until the gateway
// stands where the control plane placed it, it may share a position with
// another gateway.
const moveRetry = time.Second

// apply moves the gateway to each new position until ctx ends. A refused
// move (logged by move) is tried again every moveRetry, at the newest
// position, until one is applied.
func (f *cpFleet) apply(ctx context.Context, move func(instance, size int) error) {
	var retry <-chan time.Time
	for {
		select {
		case <-f.moved:
		case <-retry:
		case <-ctx.Done():
			return
		}
		fl, _ := f.current()
		retry = nil
		if move(fl.Instance, fl.Size) != nil {
			retry = f.after(moveRetry)
		}
	}
}

// placeInFleet resolves the gateway's fleet position from in and the
// keys of cfg's fleet block the file writes (one it leaves out gives
// nothing, so that `fleet: {size: 3}` leaves the instance to the
// environment or the hostname), and sets cfg.Fleet to it.
func placeInFleet(cfg *config.Config, in discovery.FleetInputs) (discovery.Fleet, error) {
	if cfg.Written("fleet.instance") {
		in.ConfigInstance = &cfg.Fleet.Instance
	}
	if cfg.Written("fleet.size") {
		in.ConfigSize = &cfg.Fleet.Size
	}
	fleet, err := discovery.ResolveFleet(in)
	if err != nil {
		return fleet, err
	}
	cfg.Fleet = config.Fleet{Instance: fleet.Instance, Size: fleet.Size}
	return fleet, nil
}
