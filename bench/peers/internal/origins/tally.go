package origins

import "github.com/corput/corput/internal/origin"

// Tally is what a group of origins counted, at one moment.
type Tally struct {
	Accepted int64 // connections accepted
	// Open is the connections open now, the runner's own stats
	// connection to each origin left out.
	Open      int64
	InService int64 // requests in service now
	Raw       int64 // raw (tiny) requests finished
	// Class is the class requests (light, heavy, …) finished, by origin
	// id: raw ones are health checks and the raw loads.
	Class map[string]int64
	// Endpoint is the requests that arrived on each listener, of every
	// class, by its address; Requests is their sum.
	Endpoint map[string]int64
	Requests int64
	// Full and Resumed are the TLS handshakes; Negotiated counts them by
	// version, suite and application protocol.
	Full, Resumed int64
	Negotiated    map[string]int64
}

// Tally reads every origin of g.
func (g Group) Tally() (Tally, error) {
	t := Tally{Class: map[string]int64{}, Endpoint: map[string]int64{}, Negotiated: map[string]int64{}}
	for _, o := range g {
		st, err := o.Stats()
		if err != nil {
			return t, err
		}
		t.Accepted += st.Connections.Accepted
		t.Open += st.Connections.Open - 1
		t.InService += st.Concurrency.Current
		t.Raw += st.Requests[origin.RawClass].Total()
		t.Class[o.ID] = ClassRequests(st)
		for _, l := range st.Listeners {
			t.Endpoint[l.Address] = l.Requests
			t.Requests += l.Requests
		}
		if st.TLS != nil {
			t.Full += st.TLS.Full
			t.Resumed += st.TLS.Resumed
			for k, v := range st.TLS.Negotiated {
				t.Negotiated[k] += v
			}
		}
	}
	return t, nil
}

// Since is what the origins counted between t0 and t; Open and InService
// are t's.
func (t Tally) Since(t0 Tally) Tally {
	d := Tally{Accepted: t.Accepted - t0.Accepted, Open: t.Open, InService: t.InService, Raw: t.Raw - t0.Raw,
		Class: map[string]int64{}, Endpoint: map[string]int64{}, Requests: t.Requests - t0.Requests,
		Full: t.Full - t0.Full, Resumed: t.Resumed - t0.Resumed, Negotiated: map[string]int64{}}
	for id, n := range t.Class {
		d.Class[id] = n - t0.Class[id]
	}
	for a, n := range t.Endpoint {
		d.Endpoint[a] = n - t0.Endpoint[a]
	}
	for k, v := range t.Negotiated {
		if n := v - t0.Negotiated[k]; n > 0 {
			d.Negotiated[k] = n
		}
	}
	return d
}

// ClassRequests counts an origin's finished class requests (light,
// heavy): raw ones are health checks and the raw loads.
func ClassRequests(st origin.Stats) int64 {
	var n int64
	for name, c := range st.Requests {
		if name != origin.RawClass {
			n += c.Total()
		}
	}
	return n
}

// ClassTotal is the class requests of every origin in t.
func (t Tally) ClassTotal() int64 {
	var n int64
	for _, k := range t.Class {
		n += k
	}
	return n
}

// During runs f and returns what the origins of g counted meanwhile: a
// Tally before f and one after, and their difference.
func (g Group) During(f func() error) (Tally, error) {
	t0, err := g.Tally()
	if err != nil {
		return Tally{}, err
	}
	if err := f(); err != nil {
		return Tally{}, err
	}
	t1, err := g.Tally()
	if err != nil {
		return Tally{}, err
	}
	return t1.Since(t0), nil
}
