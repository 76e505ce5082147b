package gateway

import (
	"fmt"
	"net/http"
	"strings"
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
	ReasonFDLimit         = "fd_limit" // the process is out of file descriptors: answered on the spare one
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
	errFDLimit         = gatewayError{http.StatusServiceUnavailable, ReasonFDLimit, true}
)

// raw is e as a complete HTTP/1.1 response that closes the connection,
// for a connection no server has read from.
func (e gatewayError) raw() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", e.status, http.StatusText(e.status))
	e.fields(func(name, value string) { fmt.Fprintf(&b, "%s: %s\r\n", name, value) })
	fmt.Fprintf(&b, "Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(e.body()), e.body())
	return []byte(b.String())
}
