package discovery

import (
	"strings"
	"testing"
)

func intp(n int) *int { return &n }

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestResolveFleetPrecedence(t *testing.T) {
	cases := []struct {
		name string
		in   FleetInputs
		want Fleet
	}{
		{"nothing given", FleetInputs{},
			Fleet{0, 1, "default", "default"}},
		{"config", FleetInputs{ConfigInstance: intp(2), ConfigSize: intp(4)},
			Fleet{2, 4, "config fleet.instance", "config fleet.size"}},
		{"env beats config", FleetInputs{ConfigInstance: intp(2), ConfigSize: intp(4),
			LookupEnv: env(EnvFleetInstance, "5", EnvFleetSize, " 8 ")},
			Fleet{5, 8, "env CORPUT_FLEET_INSTANCE", "env CORPUT_FLEET_SIZE"}},
		{"flags beat env", FleetInputs{FlagInstance: intp(1), FlagSize: intp(3),
			LookupEnv: env(EnvFleetInstance, "5", EnvFleetSize, "8")},
			Fleet{1, 3, "flag --fleet-instance", "flag --fleet-size"}},
		{"empty env is unset", FleetInputs{ConfigInstance: intp(2), ConfigSize: intp(4), LookupEnv: env(EnvFleetInstance, "")},
			Fleet{2, 4, "config fleet.instance", "config fleet.size"}},
		{"statefulset ordinal with size from env", FleetInputs{Hostname: "corput-7.corput.gw.svc.cluster.local", LookupEnv: env(EnvFleetSize, "12")},
			Fleet{7, 12, "hostname corput-7.corput.gw.svc.cluster.local", "env CORPUT_FLEET_SIZE"}},
		{"config instance beats hostname", FleetInputs{ConfigInstance: intp(3), ConfigSize: intp(12), Hostname: "corput-7"},
			Fleet{3, 12, "config fleet.instance", "config fleet.size"}},
		{"set name with a version", FleetInputs{Hostname: "corput-v2-0"},
			Fleet{0, 1, "hostname corput-v2-0", "default"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ResolveFleet(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestResolveFleetErrorsNameKeyAndFix(t *testing.T) {
	cases := []struct {
		name string
		in   FleetInputs
		want []string
	}{
		{"instance beyond size", FleetInputs{ConfigInstance: intp(4), ConfigSize: intp(4)},
			[]string{"fleet.instance", "4 (config fleet.instance)", "0..3", "set fleet.size"}},
		{"ordinal but no size", FleetInputs{Hostname: "corput-7"},
			[]string{"fleet.instance", "hostname corput-7", "fleet.size is 1 (default)", EnvFleetSize}},
		{"negative instance", FleetInputs{FlagInstance: intp(-1), FlagSize: intp(2)},
			[]string{"-1 (flag --fleet-instance)", "0..1"}},
		{"zero size", FleetInputs{ConfigSize: intp(0), ConfigInstance: intp(0)},
			[]string{"fleet.size", "at least 1"}},
		{"garbage env", FleetInputs{LookupEnv: env(EnvFleetSize, "ten")},
			[]string{EnvFleetSize, `"ten"`, "whole number"}},
		{"size without instance", FleetInputs{ConfigSize: intp(3)},
			[]string{"fleet.instance: not given", "fleet.size is 3", "0..2", EnvFleetInstance}},
		{"EC2 hostname is not an ordinal", FleetInputs{Hostname: "ip-10-0-1-23", ConfigSize: intp(30)},
			[]string{"fleet.instance: not given"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ResolveFleet(c.in)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestStatefulSetOrdinal(t *testing.T) {
	for host, want := range map[string]int{"corput-0": 0, "corput-12": 12, "gw-east-3.x.svc": 3, "corput-v2-5": 5} {
		if n, ok := statefulSetOrdinal(host); !ok || n != want {
			t.Errorf("%s: got %d, %v; want %d", host, n, ok, want)
		}
	}
	for _, host := range []string{"", "corput", "corput-", "-3", "ip-10-0-1-23", "10-3", "corput-x", "corput-99999999999"} {
		if n, ok := statefulSetOrdinal(host); ok {
			t.Errorf("%s: parsed %d; want no ordinal", host, n)
		}
	}
}
