package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/discovery"
)

// TestPlaceInFleet: the fleet keys the file writes, and only those, take
// their place in the precedence (flags, environment, file, hostname). A
// file that writes the size alone leaves the instance to the environment
// or a StatefulSet hostname; a file's instance yields to the environment's.
func TestPlaceInFleet(t *testing.T) {
	const top = "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nroutes: [{path_prefix: /, origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]\n"
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	size := 4
	for _, c := range []struct {
		name    string
		fleet   string
		in      discovery.FleetInputs
		want    config.Fleet
		wantErr string
	}{
		{"size from the file, instance from the hostname", "fleet: {size: 3}\n", discovery.FleetInputs{Hostname: "corput-2"}, config.Fleet{Instance: 2, Size: 3}, ""},
		{"size from the file, instance from the environment", "fleet: {size: 3}\n", discovery.FleetInputs{LookupEnv: env(discovery.EnvFleetInstance, "1"), Hostname: "corput-2"}, config.Fleet{Instance: 1, Size: 3}, ""},
		{"the file's instance yields to the environment's", "fleet: {instance: 0, size: 3}\n", discovery.FleetInputs{LookupEnv: env(discovery.EnvFleetInstance, "2")}, config.Fleet{Instance: 2, Size: 3}, ""},
		{"the file's instance 0 is given", "fleet: {instance: 0, size: 3}\n", discovery.FleetInputs{Hostname: "corput-2"}, config.Fleet{Instance: 0, Size: 3}, ""},
		{"the flag's size wins over the file's", "fleet: {instance: 3, size: 8}\n", discovery.FleetInputs{FlagSize: &size}, config.Fleet{Instance: 3, Size: 4}, ""},
		{"no fleet block: a lone gateway", "", discovery.FleetInputs{}, config.Fleet{Instance: 0, Size: 1}, ""},
		{"a size with no instance anywhere", "fleet: {size: 3}\n", discovery.FleetInputs{Hostname: "gateway"}, config.Fleet{}, "fleet.instance: not given"},
		{"the file's instance outside the flag's size", "fleet: {instance: 5, size: 8}\n", discovery.FleetInputs{FlagSize: &size}, config.Fleet{}, "fleet.instance: 5"},
	} {
		file := filepath.Join(t.TempDir(), "corput.yaml")
		if err := os.WriteFile(file, []byte(top+c.fleet), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(file)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err = placeInFleet(cfg, c.in)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want one naming %q", c.name, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case cfg.Fleet != c.want:
			t.Errorf("%s: placed at %+v, want %+v", c.name, cfg.Fleet, c.want)
		}
	}
}

// TestAControlPlanesPositionRefusesOthers: with fleet.server the control
// plane is the only place the position comes from; a flag or environment
// variable that gives one is refused at start, naming it, before anything
// is dialled.
func TestAControlPlanesPositionRefusesOthers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "corput.yaml")
	cfg := "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nfleet: {server: 127.0.0.1:1}\nroutes: [{path_prefix: /, origin: a}]\norigins: [{name: a, endpoints: [{address: 127.0.0.1:1}]}]\n"
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--fleet-size", "2"}, "", "--fleet-size: the control plane at fleet.server assigns"},
		{[]string{"--fleet-instance", "0"}, "", "remove --fleet-instance"},
		{nil, discovery.EnvFleetInstance, "remove " + discovery.EnvFleetInstance},
	} {
		if c.env != "" {
			t.Setenv(c.env, "1")
		}
		var stderr strings.Builder
		if code := runServe(append([]string{"--config", file}, c.args...), io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v %s: exit %d, stderr %q; want 2 and %q", c.args, c.env, code, stderr.String(), c.want)
		}
	}
}
