package controlplane

import "context"

// Run is `corput control-plane`'s lifetime: it starts a control plane
// with opts, serves until ctx ends, then closes it; the gateways keep
// their last assignment. Start's errors are returned as they are
// (IsConfigError tells the operator's from the others).
func Run(ctx context.Context, opts Options) error {
	cp, err := Start(opts)
	if err != nil {
		return err
	}
	<-ctx.Done()
	cp.log.Info("control plane: shutting down; gateways keep their last assignment")
	cp.Close()
	return nil
}
