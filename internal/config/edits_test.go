package config

import (
	"strings"
	"testing"
)

// editRoute is a config whose one route (line 2) carries keys, before the
// origin on line 3.
func editRoute(keys string) string {
	return "routes:\n  - {origin: api, " + keys + "}\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n"
}

// TestEditsRefused: corput check refuses, with the key and its line, what
// a rewrite or a header edit cannot do.
func TestEditsRefused(t *testing.T) {
	cases := []struct {
		name, src string
		want      want
	}{
		{"a regex that does not compile", editRoute(`rewrite: {regex: {pattern: "/(a", substitution: /b}}`),
			want{"routes[0].rewrite.regex.pattern", "", `"/(a" does not compile (missing closing )`, 2}},
		{"an empty regex", editRoute(`rewrite: {regex: {substitution: /b}}`),
			want{"routes[0].rewrite.regex.pattern", "", "missing; write the RE2 expression", 2}},
		{"a substitution naming a group the pattern lacks", editRoute(`rewrite: {regex: {pattern: "^/a/(.*)$", substitution: "/b/$2"}}`),
			want{"routes[0].rewrite.regex.substitution", "", "names group $2, and the pattern has 1", 2}},
		{"a substitution naming a group by a name it lacks", editRoute(`rewrite: {regex: {pattern: "^/a/(?P<id>.*)$", substitution: "/b/$1x"}}`),
			want{"routes[0].rewrite.regex.substitution", "", `names group "1x"`, 2}},
		{"a prefix rewrite on a regex route", editRoute(`path_regex: "/a/.*", rewrite: {replace_prefix: /}`),
			want{"routes[0].rewrite.replace_prefix", "", "this route matches by path_regex; use rewrite.regex", 2}},
		{"a prefix rewrite on an exact route", editRoute(`path_exact: /a, rewrite: {replace_prefix: /b}`),
			want{"routes[0].rewrite.replace_prefix", "", "this route matches by path_exact", 2}},
		{"a prefix that is not a path", editRoute(`path_prefix: /a, rewrite: {replace_prefix: b}`),
			want{"routes[0].rewrite.replace_prefix", "", `"b" must start with /`, 2}},
		{"a prefix with a query", editRoute(`path_prefix: /a, rewrite: {replace_prefix: "/b?x"}`),
			want{"routes[0].rewrite.replace_prefix", "", "is not a path", 2}},
		{"both path rewrites", editRoute(`path_prefix: /a, rewrite: {replace_prefix: /b, regex: {pattern: a, substitution: b}}`),
			want{"routes[0].rewrite.regex", "", "give one of replace_prefix and regex", 2}},
		{"an empty Host", editRoute(`rewrite: {host: ""}`),
			want{"routes[0].rewrite.host", "", `"" is not a Host`, 2}},
		{"a Host with a path", editRoute(`rewrite: {host: "a.example/x"}`),
			want{"routes[0].rewrite.host", "", "is not a Host", 2}},
		{"an edit of Content-Length", editRoute(`request_headers: {set: [{name: Content-Length, value: "1"}]}`),
			want{"routes[0].request_headers.set[0].name", "", "the body's framing", 2}},
		{"an edit of Transfer-Encoding", editRoute(`response_headers: {remove: [transfer-encoding]}`),
			want{"routes[0].response_headers.remove[0]", "", "the body's framing", 2}},
		{"an edit of Connection", editRoute(`request_headers: {add: [{name: Connection, value: close}]}`),
			want{"routes[0].request_headers.add[0].name", "", "a hop-by-hop field", 2}},
		{"an edit of Host", editRoute(`request_headers: {set: [{name: host, value: x}]}`),
			want{"routes[0].request_headers.set[0].name", "", "set the Host sent upstream with rewrite.host", 2}},
		{"an edit of the trace context", editRoute(`request_headers: {remove: [traceparent]}`),
			want{"routes[0].request_headers.remove[0]", "", "the trace context", 2}},
		{"an unknown variable", editRoute(`request_headers: {add: [{name: X-A, value: "%client_address%"}]}`),
			want{"routes[0].request_headers.add[0].value", "", "%client_address% is not a variable; use %client_ip%, %request_id%, %route%, %origin%", 2}},
		{"a lone %", editRoute(`response_headers: {set: [{name: X-A, value: "50%"}]}`),
			want{"routes[0].response_headers.set[0].value", "", "write %% for a literal %", 2}},
		{"request_id without downstream.request_id", editRoute(`request_headers: {add: [{name: X-A, value: "%request_id%"}]}`),
			want{"routes[0].request_headers.add[0].value", "", "%request_id% needs downstream.request_id", 2}},
		{"a name in set and remove", editRoute(`request_headers: {remove: [X-A], set: [{name: x-a, value: b}]}`),
			want{"routes[0].request_headers.set[0].name", "", `"x-a" is also under remove`, 2}},
		{"a bad field name", editRoute(`request_headers: {add: [{name: "X A", value: b}]}`),
			want{"routes[0].request_headers.add[0].name", "", "is not a header field name", 2}},
		{"an edit of the request id's field", "downstream: {request_id: {}}\n" + editRoute(`response_headers: {remove: [x-request-id]}`),
			want{"routes[0].response_headers.remove[0]", "", "is downstream.request_id's header", 3}},
		{"edits on a route that answers itself", "routes:\n  - {answer: {status: 503}, request_headers: {remove: [x-a]}}\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n",
			want{"routes[0].request_headers", "", "this route answers itself", 2}},
		{"a request id in a framing field", "downstream: {request_id: {header: Content-Length}}\n" + strings.TrimPrefix(minimal, "\n"),
			want{"downstream.request_id.header", "", "cannot carry the id", 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantOneError(t, c.src, c.want)
		})
	}
}

// TestEditsAccepted: the forms the docs show pass check, and
// downstream.request_id's header defaults to X-Request-ID.
func TestEditsAccepted(t *testing.T) {
	src := `downstream: {request_id: {}}
routes:
  - {name: a, path_prefix: /a/, origin: api, rewrite: {replace_prefix: /, host: api.internal:8443}}
  - name: b
    path_regex: "/b/.*"
    origin: api
    rewrite: {regex: {pattern: "^/b/(?P<rest>.*)$", substitution: "/v2/${rest}$$"}}
    request_headers:
      remove: [Cookie]
      set: [{name: X-Env, value: prod}]
      add: [{name: X-Via, value: "%route% %origin% %client_ip% %request_id% 100%%"}, {name: x-via, value: again}]
    response_headers: {remove: [Server], add: [{name: X-Request-Origin, value: "%origin%"}]}
origins:
  - name: api
    endpoints: [{address: 127.0.0.1:9001}]
`
	cfg := mustParse(t, src)
	if id := cfg.Downstream.RequestID; id == nil || id.Header != DefaultRequestIDHeader || id.ReturnToClient {
		t.Fatalf("downstream.request_id = %+v, want header X-Request-ID, return_to_client false", id)
	}
}

func TestParseTemplate(t *testing.T) {
	parts, err := ParseTemplate("a%route%%%b%client_ip%")
	if err != nil {
		t.Fatal(err)
	}
	want := []TemplatePart{{Lit: "a"}, {Var: VarRoute}, {Lit: "%b"}, {Var: VarClientIP}}
	if len(parts) != len(want) {
		t.Fatalf("parts %+v, want %+v", parts, want)
	}
	for i := range want {
		if parts[i] != want[i] {
			t.Fatalf("parts %+v, want %+v", parts, want)
		}
	}
}

// TestEditsOfAConfigBuiltInGo: a reload's config built in Go, without
// lines, is checked the same.
func TestEditsOfAConfigBuiltInGo(t *testing.T) {
	cfg := mustParse(t, minimal)
	cfg.Routes[0].Rewrite = &Rewrite{ReplacePrefix: "x", Host: "a b"}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "routes[0].rewrite.replace_prefix") || !strings.Contains(err.Error(), "routes[0].rewrite.host") {
		t.Fatalf("Validate: %v; want replace_prefix and host refused", err)
	}
}
