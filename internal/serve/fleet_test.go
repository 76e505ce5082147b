package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	keepProcs(t)
	two, zero := 2, 0
	for _, c := range []struct {
		instance, size *int
		env            string
		want           string
	}{
		{nil, &two, "", "--fleet-size: the control plane at fleet.server assigns"},
		{&zero, nil, "", "remove --fleet-instance"},
		{nil, nil, discovery.EnvFleetInstance, "remove " + discovery.EnvFleetInstance},
	} {
		if c.env != "" {
			t.Setenv(c.env, "1")
		}
		var log strings.Builder
		err := Run(context.Background(), Options{Config: file, Instance: c.instance, Size: c.size,
			Logger: slog.New(slog.NewTextHandler(&log, nil)), Diagnostics: io.Discard})
		if !IsConfigError(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("instance %v, size %v, %s: %v; want a config error with %q", c.instance, c.size, c.env, err, c.want)
		}
		if strings.Contains(log.String(), "waiting for the control plane") {
			t.Errorf("instance %v, size %v, %s: followed the control plane before refusing:\n%s", c.instance, c.size, c.env, log.String())
		}
	}
}

// TestARefusedMoveIsRetried: a move the gateway refuses is tried again
// after moveRetry, at the newest position, until one is applied; a
// position that arrives meanwhile is the one tried.
func TestARefusedMoveIsRetried(t *testing.T) {
	tick := make(chan time.Time)
	var asked []time.Duration
	f := &cpFleet{log: slog.New(slog.NewTextHandler(io.Discard, nil)), moved: make(chan struct{}, 1),
		after: func(d time.Duration) <-chan time.Time { asked = append(asked, d); return tick }}
	type move struct{ instance, size int }
	moves := make(chan move)
	results := make(chan error)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.apply(ctx, func(instance, size int) error {
			moves <- move{instance, size}
			return <-results
		})
	}()
	defer func() { cancel(); <-done }()

	f.set(discovery.Fleet{Instance: 1, Size: 3})
	if m := <-moves; m != (move{1, 3}) {
		t.Fatalf("first move %v, want 1 of 3", m)
	}
	results <- errors.New("refused")
	f.set(discovery.Fleet{Instance: 0, Size: 2}) // arrives while the retry waits
	if m := <-moves; m != (move{0, 2}) {
		t.Fatalf("after the refusal %v, want the newest, 0 of 2", m)
	}
	results <- errors.New("refused again")
	tick <- time.Time{} // the retry's wait ends
	if m := <-moves; m != (move{0, 2}) {
		t.Fatalf("the retry %v, want 0 of 2", m)
	}
	results <- nil
	if len(asked) != 2 || asked[0] != moveRetry {
		t.Fatalf("waits asked for %v, want two of %v", asked, moveRetry)
	}
	select {
	case m := <-moves:
		t.Fatalf("moved again (%v) after a move was applied", m)
	case <-time.After(50 * time.Millisecond):
	}
}
