package balance

import "time"

// Observer receives an origin's balancing events, for metrics. Ejected,
// EjectedCount and PanicMode are called with the origin's lock held, in the
// order the changes happen: they must be fast and must not call back into
// the Origin, its Pickers or its Endpoints' Status. ZonePick is called on the
// request path without any lock, once per Pick when a local zone is
// configured; it must not block or allocate.
type Observer interface {
	// Ejected reports that addr was ejected for reason (ReasonConsecutive5xx)
	// for d.
	Ejected(addr, reason string, d time.Duration)
	// EjectedCount reports the number of endpoints ejected now
	// (corput_outlier_ejected).
	EjectedCount(n int)
	// PanicMode reports entering (true) or leaving panic routing
	// (corput_panic_mode).
	PanicMode(on bool)
	// ZonePick reports that a pick went to the local zone or to another
	// (corput_zone_requests_total{locality}).
	ZonePick(local bool)
}

// ReasonConsecutive5xx is the ejection reason for a run of consecutive_5xx
// failures (the reason label of corput_outlier_ejections_total).
const ReasonConsecutive5xx = "consecutive_5xx"

// ReasonHealthCheck is the ejection reason for an endpoint that failed its
// active health checks (SetChecked): it lasts until they pass again.
const ReasonHealthCheck = "health_check"

// NopObserver ignores every event. Embed it to implement part of Observer.
type NopObserver struct{}

// Ejected implements Observer.
func (NopObserver) Ejected(string, string, time.Duration) {}

// EjectedCount implements Observer.
func (NopObserver) EjectedCount(int) {}

// PanicMode implements Observer.
func (NopObserver) PanicMode(bool) {}

// ZonePick implements Observer.
func (NopObserver) ZonePick(bool) {}
