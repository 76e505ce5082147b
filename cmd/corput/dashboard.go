package main

import (
	"github.com/corput/corput/internal/dashboard"
	"github.com/corput/corput/internal/telemetry"
)

// newDashboard returns the registry `corput serve` gives its gateway and the
// live dashboard sampling it, served on the admin listener at / and
// /dashboard/. The caller closes the dashboard after the gateway shut down.
func newDashboard() (*telemetry.Metrics, *dashboard.Dashboard) {
	m := telemetry.New()
	return m, dashboard.New(dashboard.Options{Metrics: m})
}
