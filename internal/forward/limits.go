package forward

// Limit names the time limit that ended an exchange (docs/gateway.md,
// "Time limits"): the detail of a 504 upstream_timeout in the access log
// and the trace, and what tells a per-try timeout, which a retry may
// follow, from the others.
type Limit uint8

// The limits.
const (
	NoLimit             Limit = iota
	LimitResponseHeader       // timeouts.response_header: the request sent, no response head
	LimitPerTry               // retry.per_try_timeout: the attempt began, no response head
	LimitRequest              // timeouts.request: the whole exchange
	LimitGRPC                 // the request's grpc-timeout (capped by timeouts.grpc_max)
	LimitStreamIdle           // timeouts.stream_idle: no byte either way after the head
	LimitBodyRead             // downstream.body_read_timeout: the client's body stalled
)

var limitNames = [...]string{"", "response_header", "per_try", "request", "grpc-timeout", "stream_idle", "body_read"}

// String is the limit's name as the access log and the trace give it ("" for none).
func (l Limit) String() string { return limitNames[l] }

// Expired records the limit that ends the current attempt's exchange; the
// caller then reports the step (Failed with Timeout or HeadTimeout, or
// after the head IdleTimedOut).
func (a *Attempt) Expired(l Limit) { a.limit = l }

// Limit is the time limit that ended the request's latest attempt's
// exchange, NoLimit when none did (Pick clears it). It stays readable
// after Finish, until Start.
func (a *Attempt) Limit() Limit { return a.limit }

// IdleTimedOut reports an exchange whose response head was relayed and
// whose stream then stayed silent for timeouts.stream_idle: the caller
// ended it (the connection closed, or the stream reset) and aborted the
// client's response. It is counted (the Observer hears
// UpstreamIdleTimeout) and the request's log reason is
// UpstreamIdleTimeout; the caller then Settles as usual.
func (a *Attempt) IdleTimedOut() {
	a.limit, a.idleCut = LimitStreamIdle, true
	if obs := a.pol.Observer; obs != nil {
		obs.Answered(UpstreamIdleTimeout)
	}
}

// IdleCut reports whether the request's relayed response was ended by
// timeouts.stream_idle (IdleTimedOut).
func (a *Attempt) IdleCut() bool { return a.idleCut }
