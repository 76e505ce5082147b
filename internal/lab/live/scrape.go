package live

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/corput/corput/internal/origin"
)

// The gateway metrics a sample reads (docs/contract.md).
const (
	metricCreated = "corput_upstream_connections_created_total"
	metricOpen    = "corput_upstream_connections_open"
	metricClosed  = "corput_upstream_connections_closed_total"
	metricReloads = "corput_config_reloads_total"
	metricSubset  = "corput_subset_size"
)

// scraper reads the two sides of the count: each origin's /origin/stats
// (ground truth: TCP connections the origin accepted and has open) and
// each gateway's /metrics.
//
// Reading an origin's stats takes a connection to that origin, which the
// origin counts too. The scraper keeps one keep-alive connection per origin
// and counts its own dials, so it removes itself exactly: the connection
// carrying the stats request is open while the origin counts, and every
// dial it made was accepted.
type scraper struct {
	client *http.Client
	mu     sync.Mutex       // guards following
	dials  map[string]int64 // connections the scraper opened, by address
}

func newScraper() *scraper {
	s := &scraper{dials: map[string]int64{}}
	d := &net.Dialer{Timeout: 2 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				s.mu.Lock()
				s.dials[addr]++
				s.mu.Unlock()
			}
			return c, err
		},
		MaxConnsPerHost:     1,
		MaxIdleConnsPerHost: 1,
		MaxIdleConns:        1024,
	}
	s.client = &http.Client{Transport: tr, Timeout: 5 * time.Second}
	return s
}

// close drops the scraper's idle connections.
func (s *scraper) close() { s.client.CloseIdleConnections() }

// originCount is one origin's connections, without the scraper's own.
type originCount struct {
	Open, Accepted int64
}

// origin reads the origin serving at addr.
func (s *scraper) origin(ctx context.Context, addr string) (originCount, error) {
	var st origin.Stats
	if err := s.get(ctx, "http://"+addr+origin.StatsPath, func(r io.Reader) error {
		return json.NewDecoder(r).Decode(&st)
	}); err != nil {
		return originCount{}, err
	}
	s.mu.Lock()
	mine := s.dials[addr]
	s.mu.Unlock()
	return originCount{Open: st.Connections.Open - 1, Accepted: st.Connections.Accepted - mine}, nil
}

// gatewayCount is what one gateway's /metrics says about its upstream
// connections, summed over origins, loops and protocols.
type gatewayCount struct {
	Open, Created float64
	Closed        map[string]float64 // by reason
	// ReloadsOK and ReloadsRejected are corput_config_reloads_total by
	// result.
	ReloadsOK, ReloadsRejected float64
	// Pools is corput_subset_size summed: the (loop, endpoint) pools of
	// the loops' subsets.
	Pools float64
}

// gateway scrapes the gateway whose admin listener is at admin.
func (s *scraper) gateway(ctx context.Context, admin string) (gatewayCount, error) {
	var fams map[string]*dto.MetricFamily
	err := s.get(ctx, "http://"+admin+"/metrics", func(r io.Reader) error {
		var err error
		fams, err = parseMetrics(r)
		return err
	})
	if err != nil {
		return gatewayCount{}, err
	}
	gc := gatewayCount{Closed: map[string]float64{}}
	for _, m := range fams[metricOpen].GetMetric() {
		gc.Open += m.GetGauge().GetValue()
	}
	for _, m := range fams[metricCreated].GetMetric() {
		gc.Created += m.GetCounter().GetValue()
	}
	for _, m := range fams[metricSubset].GetMetric() {
		gc.Pools += m.GetGauge().GetValue()
	}
	for _, m := range fams[metricReloads].GetMetric() {
		for _, l := range m.GetLabel() {
			switch {
			case l.GetName() != "result":
			case l.GetValue() == "ok":
				gc.ReloadsOK += m.GetCounter().GetValue()
			case l.GetValue() == "rejected":
				gc.ReloadsRejected += m.GetCounter().GetValue()
			}
		}
	}
	for _, m := range fams[metricClosed].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				gc.Closed[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return gc, nil
}

// origins sums the origins' counts.
func (s *scraper) origins(ctx context.Context, parts []*part) (originCount, error) {
	return sumOver(parts, originCount{}, func(p *part) (originCount, error) { return s.origin(ctx, p.addr) })
}

// gateways sums the gateways' counts.
func (s *scraper) gateways(ctx context.Context, parts []*part) (gatewayCount, error) {
	return sumOver(parts, gatewayCount{Closed: map[string]float64{}}, func(p *part) (gatewayCount, error) { return s.gateway(ctx, p.admin) })
}

// sumOver reads every part and adds the readings to zero.
func sumOver[T interface{ plus(T) T }](parts []*part, zero T, read func(*part) (T, error)) (T, error) {
	sum := zero
	for _, p := range parts {
		c, err := read(p)
		if err != nil {
			return sum, fmt.Errorf("%s: %w", p.name, err)
		}
		sum = sum.plus(c)
	}
	return sum, nil
}

func (a originCount) plus(b originCount) originCount {
	return originCount{Open: a.Open + b.Open, Accepted: a.Accepted + b.Accepted}
}

// plus adds b's counts; a's Closed map is updated in place.
func (a gatewayCount) plus(b gatewayCount) gatewayCount {
	a.Open += b.Open
	a.Created += b.Created
	a.ReloadsOK += b.ReloadsOK
	a.ReloadsRejected += b.ReloadsRejected
	a.Pools += b.Pools
	for k, v := range b.Closed {
		a.Closed[k] += v
	}
	return a
}

// ready reports whether the gateway's /readyz answers 200.
func (s *scraper) ready(ctx context.Context, admin string) bool {
	return s.get(ctx, "http://"+admin+"/readyz", func(io.Reader) error { return nil }) == nil
}

// get fetches url and hands a 200 body to read.
func (s *scraper) get(ctx context.Context, url string, read func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := read(resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	io.Copy(io.Discard, resp.Body) // keep the connection reusable
	return nil
}

func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}
