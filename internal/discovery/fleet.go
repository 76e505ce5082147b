package discovery

import (
	"fmt"
	"strconv"
	"strings"
)

// The environment variables that place a gateway in its fleet.
const (
	EnvFleetInstance = "CORPUT_FLEET_INSTANCE"
	EnvFleetSize     = "CORPUT_FLEET_SIZE"
)

// Fleet is this gateway's position among its peers: dense (0..Size-1) and
// stable across restarts, which is what Ringsteady's frontend spreading
// needs.
type Fleet struct {
	Instance int
	Size     int
	// Where each value came from, for the startup log: "flag
	// --fleet-instance", "env CORPUT_FLEET_INSTANCE", "config
	// fleet.instance", "hostname corput-7" or "default".
	InstanceFrom, SizeFrom string
}

// FleetInputs are the places a fleet position can come from. A nil pointer
// is "not given".
type FleetInputs struct {
	FlagInstance, FlagSize     *int // --fleet-instance, --fleet-size
	ConfigInstance, ConfigSize *int // fleet.instance, fleet.size, when written in the file
	// LookupEnv reads the environment (os.LookupEnv); nil reads nothing.
	LookupEnv func(string) (string, bool)
	// Hostname is os.Hostname(); a StatefulSet pod name ending in -N
	// gives the instance N when nothing else does. "" skips it.
	Hostname string
}

// ResolveFleet decides this gateway's fleet position. Each of instance and
// size is taken from the first place that gives it: flags, then the
// environment (CORPUT_FLEET_INSTANCE, CORPUT_FLEET_SIZE), then the config
// file; an instance may finally come from a StatefulSet ordinal in the
// hostname (corput-7 → 7). Size defaults to 1, and instance to 0 only when
// the size is 1: a fleet of several gateways that all believe they are
// instance 0 would share one set of subsets.
func ResolveFleet(in FleetInputs) (Fleet, error) {
	var f Fleet
	size, sizeFrom, err := firstOf(in.FlagSize, "flag --fleet-size", EnvFleetSize, in.LookupEnv, in.ConfigSize, "config fleet.size")
	if err != nil {
		return f, err
	}
	if sizeFrom == "" {
		size, sizeFrom = 1, "default"
	}
	inst, instFrom, err := firstOf(in.FlagInstance, "flag --fleet-instance", EnvFleetInstance, in.LookupEnv, in.ConfigInstance, "config fleet.instance")
	if err != nil {
		return f, err
	}
	if instFrom == "" {
		if n, ok := statefulSetOrdinal(in.Hostname); ok {
			inst, instFrom = n, "hostname "+in.Hostname
		}
	}
	if instFrom == "" {
		if size != 1 {
			return f, fmt.Errorf("fleet.instance: not given, but fleet.size is %d (%s); give every gateway its own index 0..%d "+
				"with fleet.instance, --fleet-instance or %s (in Kubernetes, run a StatefulSet or set it from the pod-index label)",
				size, sizeFrom, size-1, EnvFleetInstance)
		}
		inst, instFrom = 0, "default"
	}
	f = Fleet{Instance: inst, Size: size, InstanceFrom: instFrom, SizeFrom: sizeFrom}
	if size < 1 {
		return f, fmt.Errorf("fleet.size: %d (%s) must be at least 1; set it to the number of gateways in the fleet", size, sizeFrom)
	}
	if inst < 0 || inst >= size {
		return f, fmt.Errorf("fleet.instance: %d (%s) must be in 0..%d because fleet.size is %d (%s); "+
			"set fleet.size (or --fleet-size, %s) to the number of gateways in the fleet", inst, instFrom, size-1, size, sizeFrom, EnvFleetSize)
	}
	return f, nil
}

// firstOf returns the first of a flag, an environment variable and a config
// value that is given, with where it came from; "" when none is.
func firstOf(flag *int, flagName, env string, lookup func(string) (string, bool), conf *int, confName string) (int, string, error) {
	if flag != nil {
		return *flag, flagName, nil
	}
	if lookup != nil {
		if s, ok := lookup(env); ok && strings.TrimSpace(s) != "" {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return 0, "", fmt.Errorf("env %s=%q is not a whole number; set it to a number or unset it", env, s)
			}
			return n, "env " + env, nil
		}
	}
	if conf != nil {
		return *conf, confName, nil
	}
	return 0, "", nil
}

// statefulSetOrdinal parses the ordinal of a StatefulSet pod name,
// <set>-<ordinal>, from the first label of a hostname. It refuses names
// whose <set> part itself ends in a number (ip-10-0-1-23), which are
// addresses, not StatefulSet pods.
func statefulSetOrdinal(hostname string) (int, bool) {
	name, _, _ := strings.Cut(hostname, ".")
	set, ord, ok := cutLast(name, "-")
	if !ok || set == "" || !allDigits(ord) || len(ord) > 9 {
		return 0, false
	}
	if allDigits(set[strings.LastIndex(set, "-")+1:]) {
		return 0, false
	}
	n, err := strconv.Atoi(ord)
	return n, err == nil
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
