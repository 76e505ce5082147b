package proxy

import (
	"time"

	"github.com/corput/corput/internal/cluster"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/route"
)

// limits are one request's time limits: its origin's timeouts and
// retry.per_try_timeout, with its route's overrides (docs/gateway.md,
// "Time limits").
type limits struct {
	request, responseHeader, streamIdle, grpcMax, perTry time.Duration
}

// limitsOf reads the limits of a request of route rt to origin o.
func limitsOf(o *cluster.Origin, rt *route.Route) limits {
	t, perTry := o.Timeouts()
	l := limits{request: t.Request, responseHeader: t.ResponseHeader, streamIdle: t.StreamIdle, grpcMax: t.GRPCMax, perTry: perTry}
	if rt == nil {
		return l
	}
	over := func(d *time.Duration, v time.Duration) {
		if v > 0 {
			*d = v
		}
	}
	over(&l.request, rt.Timeouts.Request)
	over(&l.responseHeader, rt.Timeouts.ResponseHeader)
	over(&l.streamIdle, rt.Timeouts.StreamIdle)
	over(&l.grpcMax, rt.Timeouts.GRPCMax)
	over(&l.perTry, rt.Timeouts.PerTry)
	return l
}

// set gives an attempt starting at now its limits: the whole request's
// deadline (timeouts.request from the attempt's start, as it always was,
// or the request's grpc-timeout, grpcBy, if sooner), the attempt's
// per-try deadline, and the durations the exchange counts itself.
func (l *limits) set(req *exchange.Request, now, grpcBy time.Time) {
	req.Start = now
	req.Deadline, req.DeadlineLimit = time.Time{}, forward.NoLimit
	if l.request > 0 {
		req.Deadline, req.DeadlineLimit = now.Add(l.request), forward.LimitRequest
	}
	if !grpcBy.IsZero() && (req.Deadline.IsZero() || grpcBy.Before(req.Deadline)) {
		req.Deadline, req.DeadlineLimit = grpcBy, forward.LimitGRPC
	}
	req.PerTry = time.Time{}
	if l.perTry > 0 {
		req.PerTry = now.Add(l.perTry)
	}
	req.HeadTimeout, req.IdleTimeout = l.responseHeader, l.streamIdle
}
