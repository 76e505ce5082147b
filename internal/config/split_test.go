package config

import (
	"strings"
	"testing"
)

// splitConfig is a config of two origins, v1 and v2, and one route whose
// lines from line 2 are route (indented under "  - ").
func splitConfig(route string) string {
	return "routes:\n" + indent(route, "  ") +
		"origins:\n  - name: v1\n    endpoints: [{address: 127.0.0.1:9001}]\n  - name: v2\n    endpoints: [{address: 127.0.0.1:9002}]\n"
}

// TestSplitRefusals: corput check refuses a bad split with its file:line
// and key.
func TestSplitRefusals(t *testing.T) {
	cases := []struct {
		name  string
		route string
		want  want
	}{
		{"weights sum to zero", "- path_prefix: /\n  split:\n    - {origin: v1, weight: 0}\n    - {origin: v2, weight: 0}\n",
			want{"routes[0].split", "", "weights sum to 0", 3}},
		{"negative weight", "- path_prefix: /\n  split:\n    - {origin: v1, weight: 100}\n    - {origin: v2, weight: -5}\n",
			want{"routes[0].split[1].weight", "", "-5 is negative", 5}},
		{"unknown origin", "- path_prefix: /\n  split:\n    - {origin: v1, weight: 95}\n    - {origin: v3, weight: 5}\n",
			want{"routes[0].split[1].origin", "", `"v3" is not an origin; define it under origins or use one of: "v1", "v2"`, 5}},
		{"split and origin", "- path_prefix: /\n  origin: v1\n  split:\n    - {origin: v1, weight: 95}\n    - {origin: v2, weight: 5}\n",
			want{"routes[0].split", "", "the route has both origin and split; give exactly one of origin, split, redirect and answer", 4}},
		{"neither", "- path_prefix: /\n  name: none\n",
			want{"routes[0].origin", "", "missing; name the origin this route sends to (or split it between origins", 2}},
		{"empty split", "- path_prefix: /\n  split: []\n",
			want{"routes[0].split", "", "is empty", 3}},
		{"duplicate target", "- path_prefix: /\n  split:\n    - {origin: v1, weight: 95}\n    - {origin: v1, weight: 5}\n",
			want{"routes[0].split[1].origin", "", `"v1" is also split[0]`, 5}},
		{"hash_on without split", "- path_prefix: /\n  origin: v1\n  split_hash_on: header x-user\n",
			want{"routes[0].split_hash_on", "", "the route has no split", 4}},
		{"bad hash_on", "- path_prefix: /\n  split_hash_on: header\n  split:\n    - {origin: v1, weight: 95}\n    - {origin: v2, weight: 5}\n",
			want{"routes[0].split_hash_on", "", "is not a key source", 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantOneError(t, splitConfig(c.route), c.want)
		})
	}
}

// TestSplitParses: a valid split parses; its route has no single origin,
// both targets count as routed (no "no route" warning), and the route's
// own retry block is completed per target with that target's origin's
// keys.
func TestSplitParses(t *testing.T) {
	src := "routes:\n  - path_prefix: /\n    split_hash_on: header X-User\n    split: [{origin: v1, weight: 95}, {origin: v2, weight: 5}]\n    retry: {attempts: 2}\n" +
		"origins:\n  - name: v1\n    endpoints: [{address: 127.0.0.1:9001}]\n    retry: {budget_percent: 10}\n  - name: v2\n    endpoints: [{address: 127.0.0.1:9002}]\n    retry: {budget_percent: 30}\n"
	cfg := mustParse(t, src)
	rt := cfg.Routes[0]
	if rt.Origin != "" || len(rt.Split) != 2 || rt.Split[1].Origin != "v2" || rt.Split[1].Weight != 5 {
		t.Fatalf("route = %+v", rt)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Fatalf("warnings: %v", w)
	}
	for i, budget := range []int{10, 30} {
		r := cfg.TargetRetry(0, i)
		if r == nil || r.Attempts != 2 || r.BudgetPercent != budget {
			t.Errorf("target %d retry = %+v; want attempts 2 (the route's) and budget %v (its origin's)", i, r, budget)
		}
	}
	if got := strings.Join(rt.Origins(), ","); got != "v1,v2" {
		t.Errorf("Origins = %s", got)
	}
}

// TestSplitRedacted: /admin/config's dump (Redacted) shows a route's
// split and its key, and not the per-target retry Parse derived.
func TestSplitRedacted(t *testing.T) {
	src := splitConfig("- path_prefix: /\n  split_hash_on: cookie canary\n  split:\n    - {origin: v1, weight: 95}\n    - {origin: v2, weight: 5}\n")
	m := mustParse(t, src).Redacted()
	rt := m["routes"].([]any)[0].(map[string]any)
	sp, ok := rt["split"].([]any)
	if !ok || len(sp) != 2 || rt["split_hash_on"] != "cookie canary" {
		t.Fatalf("route dump %v", rt)
	}
	second := sp[1].(map[string]any)
	if second["origin"] != "v2" || second["weight"] != 5 || len(second) != 2 {
		t.Fatalf("split[1] dump %v; want {origin: v2, weight: 5}", second)
	}
}
