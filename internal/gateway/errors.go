package gateway

import (
	"net/http"
)

// Reasons a gateway-made response gives in X-Corput-Error.
const (
	ReasonPendingFull     = "pending_full"
	ReasonAcquireTimeout  = "acquire_timeout"
	ReasonNoHealthy       = "no_healthy"
	ReasonOverCap         = "over_cap"
	ReasonConnectFailed   = "connect_failed"
	ReasonUpstreamTimeout = "upstream_timeout"
	ReasonUpstreamReset   = "upstream_reset"
	ReasonNoRoute         = "no_route"
	ReasonBadRequest      = "bad_request"
)

// gatewayError is a response the gateway makes itself. The body names the
// reason only: never an internal error text.
type gatewayError struct {
	status int
	reason string
	shed   bool // load shedding: adds Retry-After: 1
}

func (e gatewayError) write(w http.ResponseWriter) {
	h := w.Header()
	e.fields(func(name, value string) { h.Set(name, value) })
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(e.body()))
}

// fields calls f with each header field of the response (both request
// paths write the same ones).
func (e gatewayError) fields(f func(name, value string)) {
	f("Cache-Control", "no-store")
	f("Content-Type", "text/plain; charset=utf-8")
	if e.shed {
		f("Retry-After", "1")
	}
	f("X-Corput-Error", e.reason)
}

// body is the response body: the status and the reason, never an internal
// error text.
func (e gatewayError) body() string {
	return http.StatusText(e.status) + ": " + e.reason + "\n"
}

var (
	errPendingFull     = gatewayError{http.StatusServiceUnavailable, ReasonPendingFull, true}
	errAcquireTimeout  = gatewayError{http.StatusServiceUnavailable, ReasonAcquireTimeout, true}
	errNoHealthy       = gatewayError{http.StatusServiceUnavailable, ReasonNoHealthy, true}
	errOverCap         = gatewayError{http.StatusServiceUnavailable, ReasonOverCap, true}
	errConnectFailed   = gatewayError{http.StatusBadGateway, ReasonConnectFailed, false}
	errUpstreamReset   = gatewayError{http.StatusBadGateway, ReasonUpstreamReset, false}
	errUpstreamTimeout = gatewayError{http.StatusGatewayTimeout, ReasonUpstreamTimeout, false}
	errNoRoute         = gatewayError{http.StatusNotFound, ReasonNoRoute, false}
	errBadRequest      = gatewayError{http.StatusBadRequest, ReasonBadRequest, false}
)
