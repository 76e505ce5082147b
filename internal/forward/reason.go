package forward

import (
	"net/http"
	"strconv"
	"strings"
)

// Reason is why the gateway answered a request itself: the value of
// X-Corput-Error, the reason label of corput_requests_shed_total, and the
// lab's tally of shed requests. It is the one list of them.
type Reason uint8

// The reasons.
const (
	None                 Reason = iota // the origin's response was delivered
	PendingFull                        // the endpoint has max_pending requests waiting (INV-LB-05)
	AcquireTimeout                     // no stream within pool.acquire_timeout
	NoHealthy                          // no endpoint to send to
	OverCap                            // pool at max_connections, over_cap: reject
	ConnectFailed                      // the dial failed
	UpstreamTimeout                    // timeouts.request passed
	UpstreamReset                      // the connection broke before a response
	Upstream503                        // the origin's 503, retries exhausted
	UpstreamHeadTooLarge               // the origin's response head is above pool.max_response_header_bytes
	NoRoute                            // no route matches
	BadRequest                         // malformed or refused request
	UpgradeUnsupported                 // a 101 the downstream connection cannot carry
	FDLimit                            // the process is out of file descriptors (answered on the spare one)
	SLOShed                            // the SLO guard sheds the route's priority: low traffic
	RateLimited                        // over the route's rate limit (routes[].rate_limit)
	AddressDenied                      // the client's address is refused (downstream.addresses, routes[].addresses)
	numReasons
)

var reasons = [numReasons]struct {
	name   string
	status int
	shed   bool // load shedding: Retry-After: 1
	count  bool // counted in corput_requests_shed_total
}{
	None:                 {"", 0, false, false},
	PendingFull:          {"pending_full", http.StatusServiceUnavailable, true, true},
	AcquireTimeout:       {"acquire_timeout", http.StatusServiceUnavailable, true, true},
	NoHealthy:            {"no_healthy", http.StatusServiceUnavailable, true, true},
	OverCap:              {"over_cap", http.StatusServiceUnavailable, true, true},
	ConnectFailed:        {"connect_failed", http.StatusBadGateway, false, false},
	UpstreamTimeout:      {"upstream_timeout", http.StatusGatewayTimeout, false, false},
	UpstreamReset:        {"upstream_reset", http.StatusBadGateway, false, false},
	Upstream503:          {"upstream_503", http.StatusServiceUnavailable, true, false},
	UpstreamHeadTooLarge: {"upstream_header_too_large", http.StatusBadGateway, false, false},
	NoRoute:              {"no_route", http.StatusNotFound, false, false},
	BadRequest:           {"bad_request", http.StatusBadRequest, false, false},
	UpgradeUnsupported:   {"upgrade_unsupported", http.StatusBadRequest, false, false},
	FDLimit:              {"fd_limit", http.StatusServiceUnavailable, true, false},
	SLOShed:              {"slo_shed", http.StatusServiceUnavailable, true, true},
	RateLimited:          {"rate_limited", http.StatusTooManyRequests, true, false},
	AddressDenied:        {"address_denied", http.StatusForbidden, false, false},
}

// String is the X-Corput-Error value ("" for None).
func (r Reason) String() string { return reasons[r].name }

// Status is the status the gateway answers with.
func (r Reason) Status() int { return reasons[r].status }

// Sheds reports whether the answer sheds load: it carries Retry-After: 1.
func (r Reason) Sheds() bool { return reasons[r].shed }

// Counted reports whether corput_requests_shed_total counts it.
func (r Reason) Counted() bool { return reasons[r].count }

// Reasons lists every reason but None.
func Reasons() []Reason {
	out := make([]Reason, 0, numReasons-1)
	for r := None + 1; r < numReasons; r++ {
		out = append(out, r)
	}
	return out
}

// ShedReasons lists the reasons corput_requests_shed_total counts.
func ShedReasons() []Reason {
	var out []Reason
	for _, r := range Reasons() {
		if r.Counted() {
			out = append(out, r)
		}
	}
	return out
}

// Fields calls f with each header field of the gateway's answer: both
// serving paths write the same ones.
func (r Reason) Fields(f func(name, value string)) {
	f("Cache-Control", "no-store")
	f("Content-Type", "text/plain; charset=utf-8")
	if r.Sheds() {
		f("Retry-After", "1")
	}
	f("X-Corput-Error", r.String())
}

// Body is the answer's body: the status text and the reason, never an
// internal error's text.
func (r Reason) Body() string { return http.StatusText(r.Status()) + ": " + r.String() + "\n" }

// Raw is the answer as a complete HTTP/1.1 response that closes the
// connection, for a connection no server has read from (a client accepted
// at the descriptor limit).
func (r Reason) Raw() []byte {
	b := []byte("HTTP/1.1 " + strconv.Itoa(r.Status()) + " " + http.StatusText(r.Status()) + "\r\n")
	r.Fields(func(name, value string) { b = append(b, name+": "+value+"\r\n"...) })
	body := r.Body()
	b = append(b, "Connection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body...)
	return b
}

// GRPC reports whether a request's Content-Type is gRPC's
// (application/grpc, application/grpc+proto, application/grpc;...), whose
// client is answered in gRPC's terms (GRPCFields). gRPC-Web
// (application/grpc-web...) is not: its clients read the HTTP status.
func GRPC(contentType []byte) bool {
	const t = "application/grpc"
	if len(contentType) < len(t) || !strings.EqualFold(string(contentType[:len(t)]), t) {
		return false
	}
	return len(contentType) == len(t) || contentType[len(t)] == '+' || contentType[len(t)] == ';'
}

// GRPCCode is the gRPC status code a gRPC client is answered with for the
// reason: a time limit that ran out is DEADLINE_EXCEEDED (4), a body over
// its limit RESOURCE_EXHAUSTED (8), and the rest follow gRPC's mapping of
// an HTTP status to a code (doc/http-grpc-status-mapping.md): 400
// INTERNAL (13), 401 UNAUTHENTICATED (16), 403 PERMISSION_DENIED (7), 404
// UNIMPLEMENTED (12), 429, 502 and 503 UNAVAILABLE (14), anything else
// UNKNOWN (2); gRPC's table has 504 UNAVAILABLE too, but the gateway's 504
// is its own time limit. It goes by the reason's status, so a reason added
// later gets a code without a row here.
func (r Reason) GRPCCode() uint32 { return grpcCodeOf(r.Status()) }

// grpcCodeOf is GRPCCode's mapping of the gateway's statuses.
func grpcCodeOf(status int) uint32 {
	switch status {
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return 4 // DEADLINE_EXCEEDED: the gateway's time limits
	case http.StatusRequestEntityTooLarge:
		return 8 // RESOURCE_EXHAUSTED
	case http.StatusBadRequest:
		return 13 // INTERNAL
	case http.StatusUnauthorized:
		return 16 // UNAUTHENTICATED
	case http.StatusForbidden:
		return 7 // PERMISSION_DENIED
	case http.StatusNotFound:
		return 12 // UNIMPLEMENTED
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable:
		return 14 // UNAVAILABLE
	}
	return 2 // UNKNOWN
}

// GRPCMessage is the answer's grpc-message: the status text and the
// reason, as the plain answer's body says them. It is printable ASCII
// without '%', so it needs no percent-encoding.
func (r Reason) GRPCMessage() string { return http.StatusText(r.Status()) + ": " + r.String() }

// GRPCFields calls f with each header field of the gateway's answer to a
// gRPC client: a trailers-only response (status 200, no body) whose
// grpc-status and grpc-message say what the plain answer's status and body
// say, with the same X-Corput-Error and Retry-After.
func (r Reason) GRPCFields(f func(name, value string)) {
	f("Cache-Control", "no-store")
	f("Content-Type", "application/grpc")
	f("Grpc-Status", strconv.FormatUint(uint64(r.GRPCCode()), 10))
	f("Grpc-Message", r.GRPCMessage())
	if r.Sheds() {
		f("Retry-After", "1")
	}
	f("X-Corput-Error", r.String())
}
