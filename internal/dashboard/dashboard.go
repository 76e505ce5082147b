// Package dashboard is corput's live page for people (docs/contract.md, admin
// GET /): open upstream connections and connections created per second over
// the last minutes (churn shown as measured, as the connection-pool spec
// asks: gw-04 in docs/spec.md), per-endpoint active
// requests, EWMA latency, effective weight and ejection state, panic and zone
// figures, and a picture of each origin's Ringsteady ring — endpoints at
// their Van der Corput positions, coloured by subset, with the loops that
// use each subset.
//
// The page is one HTML file, a script and a style sheet embedded in the
// binary (no build step, no CDN: gateways often run without internet
// access). The script draws SVG and refreshes every second from the admin
// JSON endpoints: /admin/origins, /admin/subsets?origin=NAME and this
// package's /dashboard/history.
//
// The history comes from a sampler: every Interval on the injected clock it
// refreshes the state gauges, gathers the telemetry registry (the same
// numbers /metrics exports) and keeps the last Window of levels and rates in
// a ring buffer. A Dashboard's sampler runs from New until Close; the owner
// of the gateway closes it after the gateway has shut down.
package dashboard

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"time"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/telemetry"
)

// Default sampling: one point a second, five minutes kept.
const (
	DefaultInterval = time.Second
	DefaultWindow   = 5 * time.Minute
)

// Options configure a Dashboard.
type Options struct {
	Metrics  *telemetry.Metrics // the gateway's registry; required
	Clock    clock.Clock        // nil: the wall clock
	Interval time.Duration      // between samples; 0: DefaultInterval
	Window   time.Duration      // history kept; 0: DefaultWindow
}

//go:embed web
var web embed.FS

// Dashboard serves the page, its assets and the sampled history. Mount it
// on the admin mux for GET / and GET /dashboard/.
type Dashboard struct {
	s      *sampler
	assets http.Handler
}

// New starts sampling opts.Metrics. Call Close to stop.
func New(opts Options) *Dashboard {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	capacity := max(2, int(opts.Window/opts.Interval))
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic("dashboard: embedded assets: " + err.Error()) // the embed directive guarantees web/
	}
	return &Dashboard{
		s:      newSampler(opts.Clock, opts.Metrics, opts.Interval, capacity),
		assets: http.StripPrefix("/dashboard/", http.FileServerFS(sub)),
	}
}

// Close stops the sampler; the handler keeps serving the last history.
func (d *Dashboard) Close() { d.s.close() }

// History returns the sampled points, oldest first.
func (d *Dashboard) History() History { return d.s.history() }

// ServeHTTP serves / (the page), /dashboard/history (JSON) and the page's
// assets under /dashboard/.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := path.Clean(r.URL.Path); p {
	case "/":
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/dashboard/"
		d.assets.ServeHTTP(w, r2) // index.html
	case "/dashboard/history":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(d.History())
	case "/dashboard", "/dashboard/", "/dashboard/index.html":
		http.Redirect(w, r, "/", http.StatusFound)
	default:
		d.assets.ServeHTTP(w, r)
	}
}
