// Package live is the lab's live mode (`corput lab --live`): the steps of
// seed 000 at small scale over real sockets, with real `corput serve` and
// `corput origin` processes on loopback, counting connections at the
// origins (ground truth) and from each gateway's /metrics.
package live

import (
	"context"
	"errors"
	"io"
)

// Options configure a live run.
type Options struct {
	Out    string    // output directory; created when missing
	Seed   uint64    // seeds the load and the gateways
	Stdout io.Writer // comparison tables; progress only on a terminal
}

// Run runs every step and writes the report to o.Out.
func Run(ctx context.Context, o Options) error {
	return errors.New("lab --live: not implemented yet")
}
