package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// routesWith is a config whose routes list starts on line 2 with the
// routes given (one per line, each a flow mapping), then the origin api.
func routesWith(routes ...string) string {
	return "listen: 127.0.0.1:8080\nroutes:\n  - " + strings.Join(routes, "\n  - ") +
		"\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n"
}

// TestRouteActionsRefused: corput check refuses, with the key and line, a
// route with none or two of origin/redirect/answer, a redirect status
// outside 301/302/303/307/308, an answer status outside 200–599, an
// answer body over 64 KiB, bad paths and fields, and a redirect that
// would send the client back to its own route.
func TestRouteActionsRefused(t *testing.T) {
	big := strings.Repeat("x", MaxAnswerBody+1)
	cases := []struct {
		name string
		src  string
		want []want
	}{
		{"no action", routesWith("{path_prefix: /a}"),
			[]want{{"routes[0].origin", "", "missing; name the origin this route sends to (or split it between origins: split: [{origin: v1, weight: 95}, {origin: v2, weight: 5}]; or give it a redirect or an answer)", 3}}},
		{"origin and redirect", routesWith("{path_prefix: /a, origin: api, redirect: {host: x.example}}"),
			[]want{{"routes[0].redirect", "", "the route has both origin and redirect; give exactly one of origin, split, redirect and answer", 3}}},
		{"redirect and answer", routesWith("{origin: api}", "{path_prefix: /a,\n     redirect: {host: x.example},\n     answer: {status: 503}}"),
			[]want{{"routes[1].answer", "", "both redirect and answer", 6}}},
		{"redirect status", routesWith("{origin: api}", "{path_prefix: /a, redirect: {host: x.example, status: 304}}"),
			[]want{{"routes[1].redirect.status", "", "304 is not a redirect status; use 301, 302 (the default), 303, 307 or 308", 4}}},
		{"redirect scheme", routesWith("{origin: api}", "{path_prefix: /a, redirect: {scheme: ftp}}"),
			[]want{{"routes[1].redirect.scheme", "", `"ftp": use http or https`, 4}}},
		{"redirect host with a port", routesWith("{origin: api}", "{path_prefix: /a, redirect: {host: \"x.example:80\"}}"),
			[]want{{"routes[1].redirect.host", "", "must be a bare host name", 4}}},
		{"redirect port", routesWith("{origin: api}", "{path_prefix: /a, redirect: {host: x.example, port: 70000}}"),
			[]want{{"routes[1].redirect.port", "", "70000", 4}}},
		{"redirect path", routesWith("{origin: api}", "{path_prefix: /a, redirect: {path: \"/b?c=d\"}}"),
			[]want{{"routes[1].redirect.path", "", "is not a path", 4}}},
		{"redirect path and prefix", routesWith("{origin: api}", "{path_prefix: /a, redirect: {path: /b, prefix: /c}}"),
			[]want{{"routes[1].redirect.prefix", "", "give one of path", 4}}},
		{"prefix on an exact route", routesWith("{origin: api}", "{path_exact: /a, redirect: {prefix: /c}}"),
			[]want{{"routes[1].redirect.prefix", "", "use path instead", 4}}},
		{"redirect that keeps everything", routesWith("{origin: api}", "{path_prefix: /a, redirect: {status: 301}}"),
			[]want{{"routes[1].redirect", "", "loops: it keeps the path, so its Location is the request's own URL", 4}}},
		{"redirect to its own path", routesWith("{origin: api}", "{host: gw.example, path_prefix: /a, redirect: {host: gw.example, path: /a/b}}"),
			[]want{{"routes[1].redirect", "", "loops: its Location's path /a/b is matched by this route again", 4}}},
		{"redirect to a longer prefix of its own", routesWith("{origin: api}", "{path_prefix: /old, redirect: {prefix: /older}}"),
			[]want{{"routes[1].redirect", "", "loops", 4}}},
		{"redirect to its own port", routesWith("{origin: api}", "{path_prefix: /a, redirect: {port: 8080, path: /a/x}}"),
			[]want{{"routes[1].redirect", "", "loops", 4}}},
		{"answer status", routesWith("{origin: api}", "{path_prefix: /a, answer: {status: 199}}"),
			[]want{{"routes[1].answer.status", "", "199: give a status from 200 to 599", 4}}},
		{"answer status above 599", routesWith("{origin: api}", "{path_prefix: /a, answer: {status: 600}}"),
			[]want{{"routes[1].answer.status", "", "600", 4}}},
		{"answer body over the cap", routesWith("{origin: api}", "{path_prefix: /a, answer: {status: 200, body: "+big+"}}"),
			[]want{{"routes[1].answer.body", "", "is 65537 bytes; a fixed answer's body is at most 65536 bytes", 4}}},
		{"answer body on 204", routesWith("{origin: api}", "{path_prefix: /a, answer: {status: 204, body: x}}"),
			[]want{{"routes[1].answer.body", "", "a 204 answer has no body", 4}}},
		{"answer framing field", routesWith("{origin: api}", "{path_prefix: /a, answer: {status: 200, headers: [{name: Content-Length, value: '3'}]}}"),
			[]want{{"routes[1].answer.headers[0].name", "", "Content-Length cannot be set here", 4}}},
		{"answer field value", routesWith("{origin: api}", "{path_prefix: /a, answer: {status: 200, headers: [{name: X-A, value: \"a\\nb\"}]}}"),
			[]want{{"routes[1].answer.headers[0].value", "", "is not a field value", 4}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := parseDiags(t, c.src).Errors()
			if len(ds) != len(c.want) {
				t.Fatalf("got %d errors, want %d:\n%v\n--- source ---\n%s", len(ds), len(c.want), ds, c.src)
			}
			for i, w := range c.want {
				d := ds[i]
				if d.Key != w.key || !strings.Contains(d.Message, w.text) || (w.line != 0 && d.Line != w.line) {
					t.Errorf("diagnostic %d:\n got %s (line %d)\nwant %s, line %d, message containing %q", i, d, d.Line, w.key, w.line, w.text)
				}
			}
		})
	}
}

// TestRouteActionsAccepted: redirects that do not come back to their
// route, fixed answers, and their defaults.
func TestRouteActionsAccepted(t *testing.T) {
	cfg := mustParse(t, routesWith(
		"{origin: api}",
		"{name: moved, path_prefix: /old/, redirect: {prefix: /new/}}",
		"{name: secure, path_prefix: /s, redirect: {scheme: https}}",
		"{name: other, host: a.example, path_prefix: /, redirect: {host: b.example}}",
		"{name: query, path_prefix: /q, query: [{name: old}], redirect: {strip_query: true}}",
		"{name: longer, path_prefix: /x, redirect: {path: /x/y}}",
		"{name: taken, path_prefix: /x/y, origin: api}",
		"{name: maint, path_prefix: /pay, answer: {status: 503, body: down}}",
		"{name: empty, path_exact: /e, answer: {status: 204}}",
	))
	if ws := cfg.Warnings(); len(ws) != 0 {
		t.Fatalf("warnings: %v", ws)
	}
	if s := cfg.Routes[1].Redirect.RedirectStatus(); s != 302 {
		t.Errorf("default redirect status %d, want 302", s)
	}
	if ct := cfg.Routes[7].Answer.AnswerContentType(); ct != "text/plain; charset=utf-8" {
		t.Errorf("default content type %q", ct)
	}
	if ct := cfg.Routes[8].Answer.AnswerContentType(); ct != "" {
		t.Errorf("an empty answer's content type %q, want none", ct)
	}
}

// TestOwnRouteWarnsOfOriginKeys: keys about an origin's requests on a
// route that answers itself have no effect, and say so.
func TestOwnRouteWarnsOfOriginKeys(t *testing.T) {
	cfg := mustParse(t, routesWith("{origin: api}", "{path_prefix: /a, answer: {status: 503}, priority: low}"))
	ws := cfg.Warnings()
	if len(ws) != 1 || ws[0].Key != "routes[1].priority" || !strings.Contains(ws[0].Message, "has no effect") {
		t.Fatalf("warnings = %v", ws)
	}
}

// TestCheckPrintsRouteActionsAtTheirLines: `corput check` (Check) prints
// each refused redirect and answer as file:line: key: message.
func TestCheckPrintsRouteActionsAtTheirLines(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gw.yaml")
	src := routesWith("{origin: api}",
		"{path_prefix: /a, redirect: {status: 305, path: /b}}",
		"{path_prefix: /c, answer: {status: 700}}",
		"{path_prefix: /d, redirect: {prefix: /d/e}}",
		"{path_prefix: /f}")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if _, ok := Check(file, &out); ok {
		t.Fatal("Check accepted it")
	}
	want := []string{
		file + ":4: routes[1].redirect.status: 305 is not a redirect status",
		file + ":5: routes[2].answer.status: 700: give a status from 200 to 599",
		file + ":6: routes[3].redirect: loops:",
		file + ":7: routes[4].origin: missing;",
		file + ": invalid: 4 error(s), 0 warning(s)",
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("Check printed:\n%s", out.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start with %q", i, lines[i], w)
		}
	}
}
