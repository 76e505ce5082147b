package controlplane

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// klogOnce routes client-go's log (klog, process-wide, to be set before
// any use) into the first control plane's.
var klogOnce sync.Once

// Run is `corput control-plane`'s lifetime: it starts a control plane
// with opts, serves until ctx ends, then closes it; the gateways keep
// their last assignment. client-go's log goes to opts.Logger. Start's errors are returned as they are
// (IsConfigError tells the operator's from the others).
func Run(ctx context.Context, opts Options) error {
	if opts.Logger != nil {
		klogOnce.Do(func() { klog.SetLogger(logr.FromSlogHandler(opts.Logger.Handler())) })
	}
	cp, err := Start(opts)
	if err != nil {
		return err
	}
	<-ctx.Done()
	cp.log.Info("control plane: shutting down; gateways keep their last assignment")
	cp.Close()
	return nil
}
