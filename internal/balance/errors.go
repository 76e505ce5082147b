package balance

// The reasons a request is shed by the balancer, as the gateway reports them
// in X-Corput-Error and in corput_requests_shed_total{reason}.
const (
	ReasonPendingFull = "pending_full"
	ReasonNoHealthy   = "no_healthy"
)

// ShedError is a request the balancer cannot place. The gateway answers it
// at once with 503, Retry-After: 1 and X-Corput-Error: Reason; it never
// queues it.
type ShedError struct {
	Reason string
}

func (e *ShedError) Error() string {
	switch e.Reason {
	case ReasonPendingFull:
		return "balance: " + e.Reason + ": the endpoint already has max_pending requests waiting; retry after 1s"
	case ReasonNoHealthy:
		return "balance: " + e.Reason + ": the origin has no endpoint to send the request to; retry after 1s"
	}
	return "balance: request shed: " + e.Reason
}

// The shed errors. Compare with errors.Is, or read Reason via errors.As.
var (
	// ErrPendingFull is for a request whose picked endpoint refused
	// admission (Endpoint.TryAdmit returned false). The balancer does not
	// return it itself; it is here so that every shed reason has one value.
	ErrPendingFull error = &ShedError{Reason: ReasonPendingFull}
	// ErrNoHealthy is returned by Picker.Pick when the origin has no
	// endpoint the loop may use.
	ErrNoHealthy error = &ShedError{Reason: ReasonNoHealthy}
)
