package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and its two outcomes are consistent: a
// config it returns passes Validate, and an error is always a non-empty
// Diagnostics whose every entry has a message and a line inside the input.
func FuzzParse(f *testing.F) {
	examples, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	for _, p := range examples {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		minimal,
		origin("pool: {max_pending: unlimited}"),
		origin("slo: {average: 20ms}"),
		origin("pool: {<<: {max_connections: 3}, over_cap: reject}"),
		top("workload: {classes: [{name: a, percent: 100, latency: 1ms}]}"),
		"a: &a [*a]",
		"? [x]\n: y\n",
		"origins: [{name: api, endpoints: [{address: 127.0.0.1:1}], pool: {max_pending: ~}}]",
		"",
		"---\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config and nil error")
			}
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("Parse accepted a config that Validate refuses: %v", verr)
			}
			return
		}
		if cfg != nil {
			t.Fatal("config returned with an error")
		}
		var ds Diagnostics
		if !errors.As(err, &ds) || len(ds.Errors()) == 0 {
			t.Fatalf("error is not Diagnostics with an error: %v", err)
		}
		// YAML breaks lines at \n, \r\n and a lone \r.
		text := strings.ReplaceAll(string(data), "\r\n", "\n")
		lines := strings.Count(text, "\n") + strings.Count(text, "\r") + 2
		for _, d := range ds {
			if d.Message == "" || d.Line < 0 || d.Line > lines {
				t.Fatalf("bad diagnostic %+v for %d lines", d, lines)
			}
		}
	})
}
