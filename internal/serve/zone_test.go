package serve

import (
	"testing"

	"github.com/corput/corput/internal/config"
)

// CORPUT_ZONE gives the zone to the origins whose file leaves zone.local
// empty; an origin that names its own keeps it, and without the variable
// nothing changes.
func TestPlaceInZone(t *testing.T) {
	const text = `listen: 127.0.0.1:0
routes: [{path_prefix: /, origin: a}]
origins:
  - {name: a, endpoints: [{address: 127.0.0.1:1}]}
  - {name: b, zone: {local: z9}, endpoints: [{address: 127.0.0.1:2, zone: z9}]}
`
	parse := func() *config.Config {
		cfg, err := config.Parse([]byte(text), "corput.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := parse()
	env := func(k string) (string, bool) { return map[string]string{EnvZone: "z2"}[k], k == EnvZone }
	if zone := placeInZone(cfg, env); zone != "z2" || cfg.Origins[0].Zone.Local != "z2" || cfg.Origins[1].Zone.Local != "z9" {
		t.Fatalf("zone %q, origins' zone.local %q and %q; want z2 for a, b's own z9", zone, cfg.Origins[0].Zone.Local, cfg.Origins[1].Zone.Local)
	}
	cfg = parse()
	if zone := placeInZone(cfg, func(string) (string, bool) { return "", false }); zone != "" || cfg.Origins[0].Zone.Local != "" {
		t.Fatalf("without %s: zone %q, a's zone.local %q; want none", EnvZone, zone, cfg.Origins[0].Zone.Local)
	}
}
