package cluster

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/pool"
	"github.com/corput/corput/internal/slo"
	"github.com/corput/corput/internal/subset"
	"github.com/corput/corput/internal/upstream"
)

// OriginView is /admin/origins' description of one origin.
type OriginView struct {
	Name              string                   `json:"name"`
	Policy            balance.Policy           `json:"policy"`
	SubsetAlgorithm   string                   `json:"subset_algorithm"`
	Subsets           int                      `json:"subsets"`
	Placement         string                   `json:"placement"` // PlacementShared or PlacementLocal
	Panic             bool                     `json:"panic"`
	Ejected           int                      `json:"ejected"`
	MembershipChanges uint64                   `json:"membership_changes"`
	SourceError       string                   `json:"source_error,omitempty"`
	Endpoints         []balance.EndpointStatus `json:"endpoints"`
	Loops             []LoopView               `json:"loops"`
	// ZoneSpill: every local endpoint reports a load above 80 %
	// (endpoint-load-metrics), and the zone rule spills to the sibling
	// zones.
	ZoneSpill bool `json:"zone_spill"`
	// SLO is the SLO guard's and the workload-mix monitor's state; absent
	// without a workload block.
	SLO *slo.View `json:"slo,omitempty"`
}

// LoopView is one loop's view of an origin.
type LoopView struct {
	Loop int `json:"loop"`
	// Requests placed on the loop, and their share of the origin's.
	Requests   uint64              `json:"requests"`
	Share      float64             `json:"share"`
	Subset     []string            `json:"subset"`
	Candidates []string            `json:"candidates"` // what the picker chooses among now
	Pools      map[string]PoolView `json:"pools"`
}

// PoolView is one (endpoint, loop) pool's state.
type PoolView struct {
	Protocol  string  `json:"protocol"`
	Open      int     `json:"open"`
	Idle      int     `json:"idle"`
	Busy      int     `json:"busy"`
	Capacity  int     `json:"capacity"`
	Pending   int     `json:"pending"`
	Dialing   int     `json:"dialing"`
	Temporary int     `json:"temporary"`
	Failures  int     `json:"dial_failures"`
	Util      float64 `json:"utilization"`
}

func poolView(s pool.Stats) PoolView {
	return PoolView{Protocol: s.Protocol, Open: s.Open, Idle: s.Idle, Busy: s.Busy, Capacity: s.Capacity,
		Pending: s.Pending, Dialing: s.Dialing, Temporary: s.Temporary, Failures: s.Failures, Util: s.Utilization()}
}

// View describes the origin for /admin/origins.
func (o *Origin) View() OriginView {
	st := o.bal.Status()
	o.mu.Lock()
	v := OriginView{
		Name: o.name, Policy: st.Policy, Panic: st.Panic, Ejected: st.Ejected,
		SubsetAlgorithm: string(o.conf.Load().Subset.Algorithm), MembershipChanges: o.changes,
		SourceError: o.sourceErrorLocked(), Endpoints: st.Endpoints, Subsets: 1, Placement: o.mode,
	}
	v.Subsets = o.placement.Snapshot().Subsets()
	v.ZoneSpill, v.SLO = o.bal.ZoneSpilling(), o.SLOView()
	o.health.Fill(v.Endpoints)
	subsets := make([][]string, len(o.loops))
	for i, ol := range o.loops {
		subsets[i] = append([]string(nil), ol.subset...)
	}
	o.mu.Unlock()
	var total uint64
	for i, ol := range o.loops {
		lv := LoopView{Loop: ol.idx, Subset: subsets[i], Candidates: ol.picker.Candidates(), Pools: map[string]PoolView{},
			Requests: counted(o.m.requests[ol.idx])}
		total += lv.Requests
		for addr, p := range *ol.pools.Load() {
			lv.Pools[addr] = poolView(p.Stats())
		}
		v.Loops = append(v.Loops, lv)
	}
	for i := range v.Loops {
		if total > 0 {
			v.Loops[i].Share = float64(v.Loops[i].Requests) / float64(total)
		}
	}
	return v
}

// SubsetsView is /admin/subsets' description of one origin's ring.
type SubsetsView struct {
	Origin    string         `json:"origin"`
	Algorithm string         `json:"algorithm"`
	Subsets   int            `json:"subsets"`
	Placement string         `json:"placement"` // PlacementShared or PlacementLocal
	Fleet     subset.Fleet   `json:"fleet"`
	Gateway   int            `json:"gateway"` // this gateway's fleet.instance
	Endpoints []RingEndpoint `json:"endpoints"`
}

// RingEndpoint is an endpoint at its ring position with the frontends that
// use it.
type RingEndpoint struct {
	subset.Endpoint
	Users []subset.Frontend `json:"users"`
}

// Subsets describes the origin's ring for /admin/subsets.
func (o *Origin) Subsets() SubsetsView {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := SubsetsView{Origin: o.name, Algorithm: string(o.conf.Load().Subset.Algorithm), Subsets: 1, Placement: o.mode,
		Fleet: o.subsetFleet(o.fleet), Gateway: o.fleet.Instance}
	snap := o.placement.Snapshot()
	v.Subsets = snap.Subsets()
	for _, e := range snap.Endpoints() {
		v.Endpoints = append(v.Endpoints, RingEndpoint{Endpoint: e, Users: snap.Users(e.Subset)})
	}
	return v
}

// RefreshGauges brings the origin's state gauges up to date before a
// scrape.
func (o *Origin) RefreshGauges() {
	m := o.env.Metrics
	{
		st := o.bal.Status()
		m.OutlierEjected.WithLabelValues(o.name).Set(float64(st.Ejected))
		panicMode := 0.0
		if st.Panic {
			panicMode = 1
		}
		m.PanicMode.WithLabelValues(o.name).Set(panicMode)
		if v := o.SLOView(); v != nil {
			for _, c := range v.Classes {
				m.SLOGuardActive.WithLabelValues(o.name, c.Name).Set(b2f(c.Guarded))
			}
			m.ScaleOutSignal.WithLabelValues(o.name).Set(b2f(v.ScaleOut.Signal))
		}
		m.RequestsActive.DeletePartialMatch(prometheus.Labels{"origin": o.name})
		for _, e := range st.Endpoints {
			m.RequestsActive.WithLabelValues(o.name, e.Address).Set(float64(e.Active))
		}
		o.mu.Lock()
		sizes := make([]int, len(o.loops))
		for i, ol := range o.loops {
			sizes[i] = len(ol.subset)
		}
		mode := o.mode
		o.mu.Unlock()
		for _, md := range []string{PlacementShared, PlacementLocal} {
			in := 0.0
			if md == mode {
				in = 1
			}
			m.SubsetPlacement.WithLabelValues(o.name, md).Set(in)
		}
		for i, ol := range o.loops {
			loop := strconv.Itoa(ol.idx)
			var open [2]int
			busy, capacity := 0, 0
			for _, p := range *ol.pools.Load() {
				s := p.Stats()
				open[protoIndex(s.Protocol)] += s.Open + s.Temporary
				busy += s.Busy
				capacity += s.Capacity
			}
			m.ConnectionsOpen.WithLabelValues(o.name, loop, upstream.ProtoH1).Set(float64(open[0]))
			m.ConnectionsOpen.WithLabelValues(o.name, loop, upstream.ProtoH2).Set(float64(open[1]))
			util := 0.0
			if capacity > 0 {
				util = float64(busy) / float64(capacity)
			}
			m.PoolUtilization.WithLabelValues(o.name, loop).Set(util)
			m.SubsetSize.WithLabelValues(o.name, loop).Set(float64(sizes[i]))
		}
	}
}

// counted reads a counter's value.
func counted(c prometheus.Counter) uint64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	return uint64(m.GetCounter().GetValue())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
