package balance

import "errors"

// ErrAllTried is returned by Picker.PickAvoiding when every endpoint the
// loop may use is one the request already tried.
var ErrAllTried = errors.New("balance: every candidate endpoint was already tried")

// avoidDraws is how many times PickAvoiding asks the policy before it
// falls back to a scan. Envoy's previous_hosts retry predicate rejects and
// redraws the same way (host_selection_retry_max_attempts); the scan makes
// the answer certain: an endpoint that just failed fast carries no new
// latency and few requests, so Peak EWMA often prefers it, and with a few
// endpoints tried three redraws alone miss an untried one too often.
const avoidDraws = 3

// PickAvoiding is Pick for a retry: it chooses as Pick does, but never an
// endpoint in avoid (the endpoints the request already tried) while the
// loop has another candidate. The policy's choice is taken when it is not
// in avoid, within avoidDraws draws; failing that, the first candidate not
// in avoid from a random position (either zone). It returns ErrAllTried
// when every candidate is in avoid, ErrNoHealthy as Pick does. Like Pick it
// takes no lock and allocates nothing; a successful PickAvoiding must be
// followed by exactly one Done.
func (p *Picker) PickAvoiding(avoid []*Endpoint) (*Endpoint, error) {
	ep, _, err := p.pickAvoiding(avoid, workScale, false)
	return ep, err
}

// PickCostAvoiding is PickAvoiding for a request of the given cost, as
// PickCost is Pick: it ends with End(ticket, …).
func (p *Picker) PickCostAvoiding(avoid []*Endpoint, cost float64) (*Endpoint, Ticket, error) {
	return p.pickAvoiding(avoid, workUnits(cost), true)
}

func (p *Picker) pickAvoiding(avoid []*Endpoint, units int64, timed bool) (*Endpoint, Ticket, error) {
	s := p.snap.Load()
	all := s.candidates()
	if all == 0 {
		return nil, Ticket{}, ErrNoHealthy
	}
	var now int64
	if s.clock {
		now = p.origin.nowNs()
	}
	for range avoidDraws {
		g := s.group(p.rand)
		if len(g.entries) == 0 {
			break
		}
		if e := s.choose.choose(g, now, p.rand, units); !tried(avoid, e.ep) {
			ep, t := p.place(s, e, units, now, timed)
			return ep, t, nil
		}
	}
	start := p.rand.IntN(all)
	for k := range all {
		i := (start + k) % all
		e := s.entryAt(i)
		if !tried(avoid, e.ep) {
			ep, t := p.place(s, e, units, now, timed)
			return ep, t, nil
		}
	}
	return nil, Ticket{}, ErrAllTried
}

// candidates is the number of candidates of every group.
func (s *snapshot) candidates() int {
	n := 0
	for i := range s.groups {
		n += len(s.groups[i].entries)
	}
	return n
}

// entryAt is the i-th candidate of the snapshot, group 0 first.
func (s *snapshot) entryAt(i int) *entry {
	for g := range s.groups {
		if n := len(s.groups[g].entries); i >= n {
			i -= n
			continue
		}
		return &s.groups[g].entries[i]
	}
	panic("balance: entryAt out of range")
}

func tried(avoid []*Endpoint, e *Endpoint) bool {
	for _, a := range avoid {
		if a == e {
			return true
		}
	}
	return false
}
