package serve

import (
	"log/slog"

	"github.com/corput/corput/internal/config"
)

// EnvZone gives this gateway's zone to every origin whose zone.local the
// file leaves empty. deploy/kubernetes sets it from the pod's
// topology.kubernetes.io/zone label, which Kubernetes copies from the
// node (docs/decisions.md, "Following pods: Kubernetes EndpointSlices").
const EnvZone = "CORPUT_ZONE"

// placeInZone sets zone.local from EnvZone on the origins whose file
// leaves it empty, and returns the zone ("" when the variable is unset or
// empty: no preference, as before).
func placeInZone(cfg *config.Config, lookup func(string) (string, bool)) string {
	zone, _ := lookup(EnvZone)
	if zone == "" {
		return ""
	}
	for i := range cfg.Origins {
		if cfg.Origins[i].Zone.Local == "" {
			cfg.Origins[i].Zone.Local = zone
		}
	}
	return zone
}

// logZone says where the zone came from, once at start.
func logZone(log *slog.Logger, zone string) {
	if zone != "" {
		log.Info("zone", "local", zone, "from", "env "+EnvZone, "applies_to", "origins whose zone.local the file leaves empty")
	}
}
