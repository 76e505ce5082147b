package workload

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// builtin are the mixes known by name. "uniform" exists to show the refusal:
// it is one class and Validate rejects it with ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED.
var builtin = map[string]func() Mix{
	"default": Default,
	"uniform": func() Mix {
		return Mix{Classes: []Class{{Name: "light", Percent: 100, Latency: 15 * time.Millisecond}}}
	},
}

// Names lists the built-in mixes, sorted.
func Names() []string {
	names := make([]string, 0, len(builtin))
	for n := range builtin {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Load returns the mix that arg names: a built-in name (see Names) or the
// path of a YAML or JSON file shaped like Mix, with Go durations:
//
//	classes:
//	  - {name: light, percent: 70, latency: 15ms}
//	  - {name: heavy, percent: 30, latency: 140ms}
//
// Unknown keys are an error. Load does not call Validate: a caller that
// uses the mix as evidence must.
func Load(arg string) (Mix, error) {
	if mk, ok := builtin[arg]; ok {
		return mk(), nil
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return Mix{}, fmt.Errorf("workload %q: not a built-in name (%s) and not a readable file: %w", arg, strings.Join(Names(), ", "), err)
	}
	var m Mix
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return Mix{}, fmt.Errorf("workload file %s: %w", arg, err)
	}
	return m, nil
}
