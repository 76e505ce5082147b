package config

import (
	"strings"
	"testing"
)

// mirrorSrc is a route to api mirrored with the given mirror block, over
// two origins, api and shadow.
func mirrorSrc(mirror string) string {
	return "routes:\n  - origin: api\n    mirror:\n" + mirror + "origins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n  - name: shadow\n    endpoints: [{address: 127.0.0.1:9002}]\n"
}

// TestMirrorDiagnostics: check refuses a mirror to the route's own origin,
// to an unknown origin, a share outside (0, 100], a cap below 1 and a
// negative body bound, each at its key's file:line.
func TestMirrorDiagnostics(t *testing.T) {
	cases := []struct {
		name, mirror string
		want         want
	}{
		{"own origin", "      origin: api\n", want{"routes[0].mirror.origin", "", "the route's own origin", 4}},
		{"unknown origin", "      origin: ghost\n", want{"routes[0].mirror.origin", "", `"ghost" is not an origin`, 4}},
		{"no origin", "      percent: 5\n", want{"routes[0].mirror.origin", "", "missing", 0}},
		{"percent 0", "      origin: shadow\n      percent: 0\n", want{"routes[0].mirror.percent", "", "0 is outside (0, 100]", 5}},
		{"percent 150", "      origin: shadow\n      percent: 150\n", want{"routes[0].mirror.percent", "", "150 is outside (0, 100]", 5}},
		{"in flight 0", "      origin: shadow\n      max_in_flight: 0\n", want{"routes[0].mirror.max_in_flight", "", "at least 1", 5}},
		{"body negative", "      origin: shadow\n      max_body_bytes: -1\n", want{"routes[0].mirror.max_body_bytes", "", "-1: give 0", 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantOneError(t, mirrorSrc(c.mirror), c.want)
		})
	}
}

// TestMirrorDefaults: a mirror block naming only its origin mirrors every
// request, at most DefaultMirrorInFlight at once, bodies up to the replay
// buffer; the shadow origin counts as used (no "no route" warning).
func TestMirrorDefaults(t *testing.T) {
	cfg := mustParse(t, mirrorSrc("      origin: shadow\n"))
	m := cfg.Routes[0].Mirror
	if m == nil || *m != (Mirror{Origin: "shadow", Percent: 100, MaxInFlight: DefaultMirrorInFlight}) {
		t.Fatalf("mirror = %+v", m)
	}
	if ws := cfg.Warnings(); len(ws) != 0 {
		t.Fatalf("warnings: %v", ws)
	}
}

// TestMirrorToASplitTargetIsRefused: a split route's targets are its own
// origins too.
func TestMirrorToASplitTargetIsRefused(t *testing.T) {
	src := "routes:\n  - split: [{origin: api, weight: 9}, {origin: shadow, weight: 1}]\n    mirror: {origin: shadow}\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n  - name: shadow\n    endpoints: [{address: 127.0.0.1:9002}]\n"
	ds := parseDiags(t, src).Errors()
	if len(ds) != 1 || ds[0].Key != "routes[0].mirror.origin" || ds[0].Line != 3 || !strings.Contains(ds[0].Message, "own origin") {
		t.Fatalf("diagnostics %v", ds)
	}
}

// TestMirrorOnARouteThatAnswersItselfIsRefused: a route with a redirect or
// a fixed answer sends nothing to an origin, so a mirror there would copy
// nothing; check says so at the mirror's line instead of accepting it.
func TestMirrorOnARouteThatAnswersItselfIsRefused(t *testing.T) {
	for _, own := range []string{"redirect: {host: example.com}", "answer: {status: 503}"} {
		src := "routes:\n  - " + own + "\n    mirror:\n      origin: shadow\norigins:\n  - name: shadow\n    endpoints: [{address: 127.0.0.1:9002}]\n"
		ds := parseDiags(t, src).Errors()
		if len(ds) != 1 || ds[0].Key != "routes[0].mirror" || ds[0].Line != 3 || !strings.Contains(ds[0].Message, "answers itself") {
			t.Fatalf("%s: got %v, want one error at routes[0].mirror (test.yaml:3) saying the route answers itself", own, ds)
		}
	}
}
