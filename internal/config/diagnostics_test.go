package config

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// origin returns a valid one-origin config with extra appended inside the
// origin block; the first line of extra is line 5 of the result.
func origin(extra string) string {
	return "routes: [{origin: api}]\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n" + indent(extra, "    ")
}

// bare returns a one-origin config without endpoints, extra appended
// inside the origin block from line 4.
func bare(extra string) string {
	return "routes: [{origin: api}]\norigins:\n  - name: api\n" + indent(extra, "    ")
}

// top returns a valid config with extra as its first lines.
func top(extra string) string {
	return extra + "\n" + strings.TrimPrefix(minimal, "\n")
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// want is one expected error diagnostic.
type want struct {
	key  string
	code string
	text string // a substring of the message
	line int    // 0: not checked
}

// wantOneError checks that src is refused with exactly one error, w, in
// test.yaml.
func wantOneError(t *testing.T, src string, w want) {
	t.Helper()
	ds := parseDiags(t, src).Errors()
	if len(ds) != 1 {
		t.Fatalf("got %d errors, want 1:\n%v\n--- source ---\n%s", len(ds), ds, src)
	}
	d := ds[0]
	if d.Key != w.key || !strings.Contains(d.Message, w.text) || (w.line != 0 && d.Line != w.line) || d.File != "test.yaml" {
		t.Errorf("got %s (line %d)\nwant %s at test.yaml:%d, message containing %q", d, d.Line, w.key, w.line, w.text)
	}
}

func TestDiagnostics(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []want
	}{
		// Strict keys.
		{"unknown top-level key", top("lisen: 127.0.0.1:8080"),
			[]want{{"lisen", "", `unknown key "lisen" at the top level; did you mean "listen"?`, 1}}},
		{"unknown nested key", origin("pool:\n  max_pendng: 10"),
			[]want{{"origins[0].pool.max_pendng", "", `did you mean "max_pending"? (known keys: max_connections, max_pending,`, 6}}},
		{"unknown key without suggestion", origin("colour: blue"),
			[]want{{"origins[0].colour", "", `unknown key "colour" in origins[0] (known keys: name, protocol,`, 5}}},
		{"duplicate key", origin("debounce: 1s\ndebounce: 2s"),
			[]want{{"origins[0].debounce", "", "duplicate key (first set on line 5)", 6}}},
		{"merge cycle", origin("pool: &p {<<: *p}"),
			[]want{{"origins[0].pool", "", "a merge key (<<) brings in a mapping that contains it", 5}}},
		{"merge of a scalar", origin("pool: {<<: 3}"),
			[]want{{"origins[0].pool", "", "a merge key (<<) takes an alias to a mapping", 5}}},
		{"non-scalar key", origin("? [a]\n: 1"),
			[]want{{"origins[0]", "", "a key must be a plain name", 0}}},

		// Types.
		{"mapping expected", origin("pool: [1, 2]"),
			[]want{{"origins[0].pool", "", "want a mapping with keys max_connections, max_pending", 5}}},
		{"list expected", origin("retry: {on: connect-failure}"),
			[]want{{"origins[0].retry.on", "", `want a list, got "connect-failure"`, 5}}},
		{"whole number expected", top("loops: 1.5"),
			[]want{{"loops", "", `want a whole number, got "1.5"`, 1}}},
		{"number expected", origin("slow_start: {aggression: fast}"),
			[]want{{"origins[0].slow_start.aggression", "", `want a number, got "fast"`, 5}}},
		{"bool expected", origin("tls: {insecure_skip_verify: maybe}"),
			[]want{{"origins[0].tls.insecure_skip_verify", "", `want true or false, got "maybe"`, 5}}},
		{"string expected", origin("zone: {local: [a]}"),
			[]want{{"origins[0].zone.local", "", "want a string, got a list", 5}}},
		{"duration without unit", origin("pool: {idle_timeout: 60}"),
			[]want{{"origins[0].pool.idle_timeout", "", `"60" has no unit; write a Go duration such as 60s or 60ms`, 5}}},
		{"duration garbage", origin("timeouts:\n  connect: abc"),
			[]want{{"origins[0].timeouts.connect", "", `"abc" is not a duration; write a Go duration such as 250ms`, 6}}},
		{"cidr without length", top("downstream: {trusted_proxies: [10.0.0.1]}"),
			[]want{{"downstream.trusted_proxies[0]", "", `"10.0.0.1" is not a CIDR prefix; write e.g. 10.0.0.0/8, or 10.0.0.1/32`, 1}}},

		// ERR_UNBOUNDED_QUEUE_REJECTED in every spelling.
		{"max_pending zero", origin("pool: {max_pending: 0}"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, "0 is not a bounded pending queue", 5}}},
		{"max_pending negative", origin("pool: {max_pending: -1}"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, `"-1" is not a bounded`, 5}}},
		{"max_pending above ceiling", origin("pool: {max_pending: 51}"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, "51 is not a bounded pending queue; the ceiling is 50", 5}}},
		{"max_pending huge", origin("pool: {max_pending: 100000}"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, "100000", 5}}},
		{"max_pending unlimited", origin("pool: {max_pending: unlimited}"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, `"unlimited" is not a bounded`, 5}}},
		{"max_pending Unlimited", origin("pool: {max_pending: Unlimited}"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, `"Unlimited"`, 5}}},
		{"max_pending quoted -1", origin(`pool: {max_pending: "-1"}`),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, `"-1" is not a bounded`, 5}}},
		{"max_pending inf", origin("pool: {max_pending: inf}"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, `"inf"`, 5}}},
		{"max_pending .inf", origin("pool: {max_pending: .inf}"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, `".inf"`, 5}}},
		{"max_pending null", origin("pool:\n  max_pending:"),
			[]want{{"origins[0].pool.max_pending", CodeUnboundedQueue, "an empty value is not a bounded", 6}}},
		{"max_pending text", origin("pool: {max_pending: lots}"),
			[]want{{"origins[0].pool.max_pending", "", `want a whole number, got "lots"`, 5}}},

		// ERR_AVERAGE_ONLY_TARGET_REJECTED and SLO shape.
		{"slo average only", origin("slo: {average: 20ms}"),
			[]want{{"origins[0].slo.average", CodeAverageOnly, "an average target without p90 or p99 hides the tail", 5}}},
		{"slo average and p50", origin("slo: {average: 20ms, p50: 8ms}"),
			[]want{{"origins[0].slo.average", CodeAverageOnly, "without p90 or p99", 5}}},
		{"slo average, p50 and max", origin("slo: {average: 20ms, p50: 8ms, max: 1s}"),
			[]want{{"origins[0].slo.average", CodeAverageOnly, "", 5}}},
		{"slo empty", origin("slo: {}"),
			[]want{{"origins[0].slo", "", "no percentile target; set at least p90 or p99", 5}}},
		{"slo max only", origin("slo: {max: 100ms}"),
			[]want{{"origins[0].slo", "", "no percentile target", 5}}},
		{"slo decreasing", origin("slo: {p50: 8ms, p90: 30ms, p99: 20ms}"),
			[]want{{"origins[0].slo.p99", "", "20ms is below p90 (30ms)", 5}}},
		{"slo max below p99", origin("slo: {p99: 20ms, max: 10ms}"),
			[]want{{"origins[0].slo.max", "", "10ms is below p99 (20ms)", 5}}},
		{"slo negative", origin("slo: {p99: -5ms}"),
			[]want{{"origins[0].slo", "", "no percentile target", 5}, {"origins[0].slo.p99", "", "-5ms is negative", 5}}},

		// ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED.
		{"workload one class", top("workload: {classes: [{name: ping, percent: 100, latency: 4ms}]}"),
			[]want{{"workload.classes", CodeNoWorkloadSkew, "every workload class costs 4ms", 1}}},
		{"workload equal latencies", top("workload:\n  classes:\n    - {name: a, percent: 70, latency: 15ms}\n    - {name: b, percent: 30, latency: 15ms}"),
			[]want{{"workload.classes", CodeNoWorkloadSkew, "uniform-cost benchmark is not evidence", 2}}},
		{"workload no classes", top("workload: {classes: []}"),
			[]want{{"workload.classes", CodeNoWorkloadSkew, "workload has no classes", 1}}},
		{"workload empty block", top("workload: {}"),
			[]want{{"workload.classes", CodeNoWorkloadSkew, "workload has no classes", 1}}},
		{"workload percents", top("workload:\n  classes:\n    - {name: a, percent: 60, latency: 15ms}\n    - {name: b, percent: 30, latency: 140ms}"),
			[]want{{"workload.classes", "", "percents add up to 90, want 100", 2}}},
		{"workload bad class", top("workload:\n  classes:\n    - {name: a, percent: 70, latency: 15ms}\n    - {name: b, percent: 130, latency: 140ms}"),
			[]want{{"workload.classes[1].percent", "", "130 is outside (0, 100]", 4}}},
		{"workload unknown key", top("workload: {classes: [{name: a, percent: 100, latency: 1ms, weight: 3}]}"),
			[]want{{"workload.classes", CodeNoWorkloadSkew, "", 1}, {"workload.classes[0].weight", "", `unknown key "weight"`, 1}}},
		{"workload cost and match", top("workload: {classes: [{name: a, percent: 70, latency: 1ms, cost: 0}, {name: b, percent: 30, latency: 9ms}]}"),
			[]want{{"workload.classes[0].cost", "", "0 is outside (0, 1000]", 1}}},
		{"workload empty match", top("workload: {classes: [{name: a, percent: 70, latency: 1ms}, {name: b, percent: 30, latency: 9ms, match: {}}]}"),
			[]want{{"workload.classes[1].match", "", "empty; give methods, path_prefix or path_suffix", 1}}},
		{"workload bad method", top("workload: {classes: [{name: a, percent: 70, latency: 1ms}, {name: b, percent: 30, latency: 9ms, match: {methods: [GET, 'P O']}}]}"),
			[]want{{"workload.classes[1].match.methods[1]", "", `"P O" is not an HTTP method token`, 1}}},
		{"workload slo without p99", top("workload: {classes: [{name: a, percent: 70, latency: 1ms, slo: {p90: 5ms}}, {name: b, percent: 30, latency: 9ms}]}"),
			[]want{{"workload.classes[0].slo.p99", "", "missing or not positive", 1}}},
		{"workload slo order", top("workload: {classes: [{name: a, percent: 70, latency: 1ms, slo: {p50: 9ms, p90: 5ms, p99: 20ms}}, {name: b, percent: 30, latency: 9ms}]}"),
			[]want{{"workload.classes[0].slo.p50", "", "9ms is above p90 (5ms)", 1}}},
		{"workload scale_out percent", top("workload: {classes: [{name: a, percent: 70, latency: 1ms}, {name: b, percent: 30, latency: 9ms}], scale_out: {above_percent: 120}}"),
			[]want{{"workload.scale_out.above_percent", "", "120 is outside (0, 100)", 1}}},
		{"workload scale_out webhook", top("workload: {classes: [{name: a, percent: 70, latency: 1ms}, {name: b, percent: 30, latency: 9ms}], scale_out: {webhook: 'ftp://x'}}"),
			[]want{{"workload.scale_out.webhook", "", "is not an http:// or https:// URL", 1}}},
		{"proxy_protocol without from", top("downstream: {proxy_protocol: {other: plain}}"),
			[]want{{"downstream.proxy_protocol.from", "", "is empty; list the load balancers' addresses", 1}}},
		{"proxy_protocol other unknown", top("downstream: {proxy_protocol: {from: [10.0.0.0/8], other: drop}}"),
			[]want{{"downstream.proxy_protocol.other", "", `"drop": use refuse`, 1}}},
		{"proxy_protocol from not a prefix", top("downstream: {proxy_protocol: {from: [lb.example]}}"),
			[]want{{"downstream.proxy_protocol.from[0]", "", "", 1}}},
		{"rate limit below one a second", "routes: [{origin: api, rate_limit: {requests_per_second: 0.5}}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].rate_limit.requests_per_second", "", "use a rate from 1 to 1e9", 1}}},
		{"rate limit key unknown", "routes: [{origin: api, rate_limit: {requests_per_second: 10, key: cookie}}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].rate_limit.key", "", `"cookie": use none`, 1}}},
		{"rate limit header key without a name", "routes: [{origin: api, rate_limit: {requests_per_second: 10, key: \"header:\"}}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].rate_limit.key", "", "header:NAME needs a header name", 1}}},
		{"rate limit max_keys too small", "routes: [{origin: api, rate_limit: {requests_per_second: 10, key: client_address, max_keys: 8}}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].rate_limit.max_keys", "", "", 1}}},
		{"redirect_http on listen's address", top("listen: 127.0.0.1:8080\nredirect_http: {listen: 127.0.0.1:8080}"),
			[]want{{"redirect_http.listen", "", "is listen's address too", 2}}},
		{"redirect_http status not a redirect", top("redirect_http: {listen: 127.0.0.1:8081, status: 200}"),
			[]want{{"redirect_http.status", "", "200 is not a redirect; use 308", 1}}},
		{"route priority unknown", "routes: [{origin: api, priority: high}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].priority", "", `"high" is not a priority; use low`, 1}}},
		{"route class unknown", "workload: {classes: [{name: a, percent: 70, latency: 1ms}, {name: b, percent: 30, latency: 9ms}]}\nroutes: [{origin: api, class: c}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].class", "", `"c" is not a workload class; use one of: a, b`, 2}}},
		{"route class without workload", "routes: [{origin: api, class: c}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].class", "", "there is no workload block", 1}}},

		// Routes and origins.
		{"no routes or origins", "listen: 127.0.0.1:8080\n",
			[]want{{"origins", "", "no origins; add at least one", 0}, {"routes", "", "no routes; add one", 0}}},
		{"route to unknown origin", "routes: [{origin: api}, {path_prefix: /x, origin: nope}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[1].origin", "", `"nope" is not an origin; define it under origins or use one of: "api"`, 1}}},
		{"route without origin", "routes: [{origin: api}, {path_prefix: /x}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[1].origin", "", "missing; name the origin", 1}}},
		{"route prefix without slash", "routes: [{path_prefix: api, origin: api}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].path_prefix", "", `"api" must start with /`, 1}}},
		{"route host with port", "routes: [{host: example.com:8080, origin: api}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].host", "", "must be a bare host name: no scheme, port or path", 1}}},
		{"route host with scheme", "routes: [{host: \"http://example.com\", origin: api}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].host", "", "bare host name", 1}}},
		{"route host bad label", "routes: [{host: exa_mple.com, origin: api}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].host", "", "is not a host name", 1}}},
		{"duplicate route", "routes:\n  - {host: A.com, origin: api}\n  - {host: a.com, path_prefix: /, origin: api}\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[1]", "", "as routes[0]; the second route could never match", 3}}},
		{"route path_regex does not compile", "routes:\n  - origin: api\n    path_regex: /v[0-9+\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].path_regex", "", `"/v[0-9+" does not compile (missing closing ]); write an RE2 expression`, 3}}},
		{"route header regex does not compile", "routes: [{origin: api, headers: [{name: x-v, type: regex, value: 'a(b'}]}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].headers[0].value", "", "does not compile (missing closing )", 1}}},
		{"route two path kinds", "routes: [{origin: api, path_prefix: /a, path_exact: /a}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].path_exact", "", "give one of path_prefix, path_exact and path_regex", 1}}},
		{"route path_exact without slash", "routes: [{origin: api, path_exact: health}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].path_exact", "", `"health" must start with /`, 1}}},
		{"route method lower case", "routes: [{origin: api, methods: [GET, post]}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].methods[1]", "", `"post" is not a method; methods are case-sensitive`, 1}}},
		{"route header match type", "routes: [{origin: api, headers: [{name: x-a, type: prefix, value: a}]}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].headers[0].type", "", `"prefix" is not a header match; use exact (the default), present, absent or regex`, 1}}},
		{"route header present with value", "routes: [{origin: api, headers: [{name: x-a, type: present, value: a}]}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].headers[0].value", "", "a present match has no value", 1}}},
		{"route header name with underscore", "routes: [{origin: api, headers: [{name: x_canary}]}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].headers[0].name", "", `"x_canary" has a '_': such fields are not forwarded (downstream.underscore_headers: drop)`, 1}}},
		{"route query without name", "routes: [{origin: api, query: [{value: a}]}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].query[0].name", "", "missing; name the query parameter", 1}}},
		{"route query match type", "routes: [{origin: api, query: [{name: a, type: absent}]}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].query[0].type", "", `"absent" is not a query match; use exact (the default) or present`, 1}}},
		{"duplicate route matches", "routes:\n  - {path_exact: /a, methods: [GET], origin: api}\n  - {path_exact: /a, methods: [GET], origin: api}\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[1]", "", `same host "", path_exact "/a" and matches as routes[0]; the second route could never match`, 3}}},
		{"unnamed routes differing in matches", "routes:\n  - {path_prefix: /a, origin: api}\n  - {path_prefix: /a, methods: [POST], origin: api}\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[1].name", "", `missing; routes[0] has the same host and path and other methods, headers or query, so both would be named "any/a"`, 3}}},
		{"route bad name", "routes: [{name: 'a b', origin: api}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].name", "", "use 1–63 letters", 1}}},
		{"duplicate route name", "routes:\n  - {name: pay, path_prefix: /a, origin: api}\n  - {name: pay, path_prefix: /b, origin: api}\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[1].name", "", `"pay" is also routes[0]'s name`, 3}}},
		{"duplicate origin", "routes: [{origin: api}]\norigins:\n  - {name: api, endpoints: [{address: 127.0.0.1:1}]}\n  - {name: api, endpoints: [{address: 127.0.0.1:2}]}",
			[]want{{"origins[1].name", "", `origin "api" is defined twice`, 4}}},
		{"origin without name", "routes: [{origin: api}]\norigins:\n  - {name: api, endpoints: [{address: 127.0.0.1:1}]}\n  - {endpoints: [{address: 127.0.0.1:2}]}",
			[]want{{"origins[1].name", "", "missing; every origin needs a name", 4}}},
		{"origin bad name", "routes: [{origin: api}]\norigins:\n  - {name: api, endpoints: [{address: 127.0.0.1:1}]}\n  - {name: 'a b', endpoints: [{address: 127.0.0.1:2}]}",
			[]want{{"origins[1].name", "", "use 1–63 letters", 4}}},

		// Membership.
		{"static without endpoints", "routes: [{origin: api}]\norigins:\n  - name: api",
			[]want{{"origins[0].endpoints", "", "no endpoints; list at least one", 3}}},
		{"endpoint without port", bare("zone: {local: a}\nendpoints: [{address: localhost, zone: a}]"),
			[]want{{"origins[0].endpoints[0].address", "", `"localhost" is not host:port`, 5}}},
		{"endpoint port zero", bare("endpoints: [{address: \"127.0.0.1:0\"}]"),
			[]want{{"origins[0].endpoints[0].address", "", "must be a number from 1 to 65535", 4}}},
		{"endpoint named port", bare("endpoints: [{address: \"127.0.0.1:http\"}]"),
			[]want{{"origins[0].endpoints[0].address", "", `port "http"`, 4}}},
		{"endpoint without host", bare("endpoints: [{address: \":9000\"}]"),
			[]want{{"origins[0].endpoints[0].address", "", "has no host", 4}}},
		{"endpoint weight zero", bare("endpoints: [{address: 127.0.0.1:1, weight: 0}]"),
			[]want{{"origins[0].endpoints[0].weight", "", "0 is out of range; use 1 to 1000000", 4}}},
		{"duplicate endpoint", bare("endpoints:\n  - {address: 127.0.0.1:1}\n  - {address: 127.0.0.1:1}"),
			[]want{{"origins[0].endpoints[1].address", "", "listed twice (first as endpoints[0])", 6}}},
		{"file discovery without path", "routes: [{origin: api}]\norigins:\n  - name: api\n    discovery: {type: file}",
			[]want{{"origins[0].discovery.path", "", "discovery type file needs the path", 4}}},
		{"xds without server or cluster", "routes: [{origin: api}]\norigins:\n  - name: api\n    discovery: {type: xds, path: x.yaml}",
			[]want{
				{"origins[0].discovery.cluster", "", "needs the EDS cluster name", 4},
				{"origins[0].discovery.path", "", "only used with discovery type file, but the type is xds", 4},
				{"origins[0].discovery.server", "", "needs the host:port of the xDS server", 4},
			}},
		{"xds with static endpoints", origin("discovery: {type: xds, server: 127.0.0.1:18000, cluster: api}"),
			[]want{{"origins[0].endpoints", "", "static endpoints are not used with discovery type xds", 4}}},
		{"static with xds keys", origin("discovery: {server: 127.0.0.1:18000}"),
			[]want{{"origins[0].discovery.server", "", "only used with discovery type xds, but the type is static", 5}}},
		{"discovery type", origin("discovery: {type: dns}"),
			[]want{{"origins[0].discovery.type", "", `"dns" is not one of: static, file, xds`, 5}}},

		// Enums and protocol.
		{"protocol", origin("protocol: h3"),
			[]want{{"origins[0].protocol", "", `"h3" is not one of: auto, h1, h2, h2c`, 5}}},
		{"h2 without tls", origin("protocol: h2"),
			[]want{{"origins[0].protocol", "", "h2 is HTTP/2 over TLS and this origin has no tls block", 5}}},
		{"h2c with tls", origin("protocol: h2c\ntls: {}"),
			[]want{{"origins[0].protocol", "", "h2c is cleartext HTTP/2 but a tls block is set", 5}}},
		{"policy", origin("balancer: {policy: least_conn}"),
			[]want{{"origins[0].balancer.policy", "", `"least_conn" is not one of: peak_ewma, least_work, least_request, p2c, round_robin, random`, 5}}},
		{"subset algorithm", origin("subset: {algorithm: maglev}"),
			[]want{{"origins[0].subset.algorithm", "", "is not one of: ringsteady, none, hashmod, random, rendezvous", 5}}},
		{"over_cap", origin("pool: {over_cap: block}"),
			[]want{{"origins[0].pool.over_cap", "", "is not one of: queue, temporary, reject", 5}}},
		{"retry on", origin("retry: {on: [connect-failure, 500]}"),
			[]want{{"origins[0].retry.on[1]", "", `"500" is not one of: connect-failure, refused-stream, 502, 503, 504, gateway-error`, 5}}},
		{"retry on twice", origin("retry: {on: [\"503\", 503]}"),
			[]want{{"origins[0].retry.on[1]", "", "listed twice", 5}}},
		{"retry gateway-error and a status", origin("retry: {on: [gateway-error, \"502\"]}"),
			[]want{{"origins[0].retry.on", "", "gateway-error is 502, 503 and 504 together", 5}}},
		{"retry replay buffer unbounded", origin("retry: {replay_buffer: -1}"),
			[]want{{"origins[0].retry.replay_buffer", "", "an unbounded replay buffer is refused (INV-LB-05)", 5}}},
		{"retry replay buffer too large", origin("retry: {replay_buffer: 20000000}"),
			[]want{{"origins[0].retry.replay_buffer", "", "is over 16777216 bytes", 5}}},
		{"retry replay buffer over the gateway's", "limits: {replay_buffers_bytes: 1000}\n" + origin("retry: {replay_buffer: 2000}"),
			[]want{{"origins[0].retry.replay_buffer", "", "over limits.replay_buffers_bytes (1000)", 6}}},
		{"replay buffers unbounded", "limits: {replay_buffers_bytes: 0}\n" + origin(""),
			[]want{{"limits.replay_buffers_bytes", "", "all replay buffers together need a bound (INV-LB-05)", 1}}},
		{"retry backoff max below base", origin("retry: {backoff: {base: 100ms, max: 10ms}}"),
			[]want{{"origins[0].retry.backoff.max", "", "is below backoff.base (100ms)", 5}}},
		{"retry idempotency header", origin("retry: {idempotency_header: \"Idempotency Key\"}"),
			[]want{{"origins[0].retry.idempotency_header", "", "is not a header field name", 5}}},
		{"route retries sent POSTs without a key", "workload: {classes: [{name: inq, percent: 70, latency: 1ms, match: {methods: [GET]}}, {name: auth, percent: 30, latency: 9ms, match: {methods: [POST]}}]}\nroutes: [{origin: api, class: auth, retry: {on: [connect-failure, \"502\"]}}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].retry.on", "", "matches only POST, which is not idempotent", 2}}},
		{"route retry attempts", "routes: [{origin: api, retry: {attempts: 11}}]\norigins: [{name: api, endpoints: [{address: 127.0.0.1:1}]}]",
			[]want{{"routes[0].retry.attempts", "", "11 is out of range", 1}}},

		// Ranges.
		{"panic percent", origin("panic_threshold_percent: 101"),
			[]want{{"origins[0].panic_threshold_percent", "", "101 is out of range; use 0 to 100", 5}}},
		{"local percent", origin("zone: {local_percent: -1}"),
			[]want{{"origins[0].zone.local_percent", "", "-1 is out of range", 5}}},
		{"ejection percent", origin("outlier: {max_ejection_percent: 150}"),
			[]want{{"origins[0].outlier.max_ejection_percent", "", "150 is out of range; use 0 to 100", 5}}},
		{"retry budget", origin("retry: {budget_percent: 200, attempts: 11}"),
			[]want{{"origins[0].retry.attempts", "", "11 is out of range", 5}, {"origins[0].retry.budget_percent", "", "200 is out of range", 5}}},
		{"consecutive_5xx zero", origin("outlier: {consecutive_5xx: 0}"),
			[]want{{"origins[0].outlier.consecutive_5xx", "", "0 is out of range", 5}}},
		{"ejection times", origin("outlier: {base_ejection_time: 30s, max_ejection_time: 10s}"),
			[]want{{"origins[0].outlier.max_ejection_time", "", "10s is shorter than base_ejection_time (30s)", 5}}},
		{"choices", origin("balancer: {choices: 1}"),
			[]want{{"origins[0].balancer.choices", "", "1 is out of range; use 2 to 16", 5}}},
		{"ewma decay", origin("balancer: {ewma_decay: 0s}"),
			[]want{{"origins[0].balancer.ewma_decay", "", "0s must be positive, e.g. 10s", 5}}},
		{"max_connections", origin("pool: {max_connections: 0}"),
			[]want{{"origins[0].pool.max_connections", "", "0 is out of range", 5}}},
		{"prewarm above cap", origin("pool: {max_connections: 2, prewarm: 3}"),
			[]want{{"origins[0].pool.prewarm", "", "3 is out of range; use 0 to 2", 5}}},
		{"negative idle", origin("pool: {idle_timeout: -1s}"),
			[]want{{"origins[0].pool.idle_timeout", "", "-1s is negative", 5}}},
		{"acquire beyond response_header", origin("pool: {acquire_timeout: 20s}"),
			[]want{{"origins[0].pool.acquire_timeout", "", "20s is not shorter than timeouts.response_header (15s)", 5}}},
		{"connect beyond response_header", origin("timeouts: {connect: 5s, response_header: 2s}"),
			[]want{{"origins[0].timeouts.connect", "", "5s is longer than timeouts.response_header (2s)", 5}}},
		{"zero response_header", origin("timeouts: {response_header: 0s}"),
			[]want{{"origins[0].timeouts.response_header", "", "0s must be positive", 5}}},
		{"negative request timeout", origin("timeouts: {request: -1s}"),
			[]want{{"origins[0].timeouts.request", "", "-1s is negative", 5}}},
		{"negative stream_idle", origin("timeouts: {stream_idle: -1s}"),
			[]want{{"origins[0].timeouts.stream_idle", "", "-1s is negative", 5}}},
		{"per-try above request", origin("timeouts: {request: 2s}\nretry: {per_try_timeout: 3s}"),
			[]want{{"origins[0].retry.per_try_timeout", "", "3s is above origins[0].timeouts.request (2s)", 6}}},
		{"body read timeout", top("downstream: {body_read_timeout: 0s}"),
			[]want{{"downstream.body_read_timeout", "", "0s must be positive, e.g. 60s", 1}}},
		{"route body limit", "routes:\n  - origin: api\n    max_request_body_bytes: -1\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n",
			[]want{{"routes[0].max_request_body_bytes", "", "-1 is negative", 3}}},
		{"route per-try above request", "routes:\n  - origin: api\n    timeouts:\n      request: 1s\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n    retry: {per_try_timeout: 2s}\n",
			[]want{{"routes[0].timeouts.request", "", "2s is above routes[0].timeouts.request (1s)", 4}}},
		{"route's own per-try above its origin's request", "routes:\n  - origin: api\n    retry:\n      per_try_timeout: 3s\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n    timeouts: {request: 2s}\n",
			[]want{{"routes[0].retry.per_try_timeout", "", "3s is above the route's timeouts.request (2s)", 4}}},
		{"route response_header under acquire", "routes:\n  - origin: api\n    timeouts: {response_header: 50ms}\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n    timeouts: {connect: 10ms}\n",
			[]want{{"routes[0].timeouts.response_header", "", "50ms is not longer than the origin's pool.acquire_timeout (100ms)", 3}}},
		{"route connect", "routes:\n  - origin: api\n    timeouts: {connect: 1s}\norigins:\n  - name: api\n    endpoints: [{address: 127.0.0.1:9001}]\n",
			[]want{{"routes[0].timeouts.connect", "", "", 3}}},
		{"subset sizes", origin("subset: {min_size: 40, max_size: 30}"),
			[]want{{"origins[0].subset.max_size", "", "30 is out of range; use 40 to", 5}}},
		{"aggression", origin("slow_start: {aggression: 0}"),
			[]want{{"origins[0].slow_start.aggression", "", "0 is out of range; use a number in (0, 100]", 5}}},
		{"min weight", origin("slow_start: {min_weight_percent: 0}"),
			[]want{{"origins[0].slow_start.min_weight_percent", "", "0 is out of range", 5}}},

		// Top-level keys.
		{"listen not host:port", top("listen: 8080"),
			[]want{{"listen", "", `"8080" is not host:port`, 1}}},
		{"listen empty", top(`listen: ""`),
			[]want{{"listen", "", "missing; give a host:port", 1}}},
		{"admin equals listen", top("listen: 127.0.0.1:8080\nadmin: 127.0.0.1:8080"),
			[]want{{"admin", "", "is also the listen address", 2}}},
		{"fleet instance", top("fleet: {instance: 4, size: 4}"),
			[]want{{"fleet.instance", "", "4 is out of range; use 0 to 3", 1}}},
		{"fleet size", top("fleet: {size: 0}"),
			[]want{{"fleet.size", "", "0 is out of range; use at least 1", 1}}},
		{"fleet server with a size", top("fleet: {server: cp:18000, size: 3}"),
			[]want{{"fleet.size", "", "the control plane at fleet.server assigns the fleet position; remove fleet.size", 1}}},
		{"fleet server with an instance", top("fleet:\n  server: cp:18000\n  instance: 1"),
			[]want{{"fleet.instance", "", "remove fleet.instance (or fleet.server)", 3}}},
		{"fleet server not host:port", top("fleet: {server: cp}"),
			[]want{{"fleet.server", "", `"cp" is not host:port`, 1}}},
		{"fleet node id without a server", top("fleet: {node_id: gw-a}"),
			[]want{{"fleet.node_id", "", "fleet.server, which is not set", 1}}},
		{"loops", top("loops: -1"),
			[]want{{"loops", "", "-1 is out of range; use 0 to 4096", 1}}},
		{"header bytes", top("downstream: {max_header_bytes: 10}"),
			[]want{{"downstream.max_header_bytes", "", "10 is out of range", 1}}},
		{"underscore headers", top("downstream: {underscore_headers: strip}"),
			[]want{{"downstream.underscore_headers", "", `"strip" is not one of: drop, reject, allow`, 1}}},
		{"drain", top("shutdown: {drain_timeout: 0s}"),
			[]want{{"shutdown.drain_timeout", "", "0s must be positive", 1}}},
		{"downstream tls without key", top("tls: {cert: a.pem}"),
			[]want{{"tls", "", "HTTPS needs both cert and key", 1}, {"tls.key", "", "missing: cert is set", 1}}},
		{"access log without path", top("access_log: {format: json}"),
			[]want{{"access_log.path", "", "missing; write stdout, or the file", 1}}},
		{"access log format", top("access_log: {path: stdout, format: clf}"),
			[]want{{"access_log.format", "", `"clf" is not one of: json, combined`, 1}}},
		{"access log sample zero", top("access_log: {path: stdout, sample: 0}"),
			[]want{{"access_log.sample", "", "0 is outside (0, 1]", 1}}},
		{"access log sample above one", top("access_log:\n  path: stdout\n  sample: 1.5"),
			[]want{{"access_log.sample", "", "1.5 is outside (0, 1]", 3}}},
		{"access log in a missing directory", top("access_log: {path: no-such-dir/access.log}"),
			[]want{{"access_log.path", "", "the directory of no-such-dir/access.log does not exist", 1}}},
		{"access log path is a directory", top("access_log: {path: /}"),
			[]want{{"access_log.path", "", "/ is a directory", 1}}},
		{"origin tls key without cert", origin("tls: {key: k.pem}"),
			[]want{{"origins[0].tls.cert", "", "missing: key is set, so cert must name", 5}}},
		{"origin tls files missing", origin("tls: {cert: nope.pem, key: nope.key, ca: nope-ca.pem}"),
			[]want{
				{"origins[0].tls.ca", "", "cannot read nope-ca.pem: no such file or directory", 5},
				{"origins[0].tls.cert", "", "cannot read nope.pem", 5},
				{"origins[0].tls.key", "", "cannot read nope.key", 5},
			}},

		// Sticky policies.
		{"sticky without a key", origin("balancer: {policy: maglev}"),
			[]want{{"origins[0].balancer.hash_on", "", `missing; policy maglev needs the request's key: "header NAME"`, 0}}},
		{"bad key source", origin("balancer: {policy: ring_hash, hash_on: \"query id\"}"),
			[]want{{"origins[0].balancer.hash_on", "", `"query id" is not a key source; write "header NAME", "cookie NAME" or "source_ip"`, 0}}},
		{"sticky fallback", origin("balancer: {policy: maglev, hash_on: source_ip, fallback: ring_hash}"),
			[]want{{"origins[0].balancer.fallback", "", "ring_hash needs a key too; the fallback routes requests without one: use peak_ewma", 0}}},
		{"balance factor below 1", origin("balancer: {policy: maglev, hash_on: source_ip, balance_factor: 0.9}"),
			[]want{{"origins[0].balancer.balance_factor", "", "0.9 is outside 1..100", 0}}},
		{"table size not prime", origin("balancer: {policy: maglev, hash_on: source_ip, table_size: 65536}"),
			[]want{{"origins[0].balancer.table_size", "", "65536 is not a prime", 0}}},
		{"table size too small", origin("balancer: {policy: maglev, hash_on: source_ip, table_size: 13}"),
			[]want{{"origins[0].balancer.table_size", "", "13 is below 100 × the 1 endpoints; use a prime of at least 100 (keys per endpoint then stay within 1 %), e.g. 101", 0}}},

		{"cookie block with another key", origin("balancer: {policy: maglev, hash_on: source_ip, cookie: {ttl: 1h}}"),
			[]want{{"origins[0].balancer.cookie", "", `only used with hash_on: "cookie NAME"`, 0}}},
		{"cookie path", origin("balancer: {policy: maglev, hash_on: \"cookie sid\", cookie: {path: pay}}"),
			[]want{{"origins[0].balancer.cookie.path", "", `"pay" is not a cookie path; write one that starts with /`, 0}}},

		// Active health checks.
		{"health check path", origin("health_check: {path: healthz}"),
			[]want{{"origins[0].health_check.path", "", `"healthz" is not a request target; write an absolute path such as /healthz`, 5}}},
		{"health check method", origin("health_check:\n  method: POST"),
			[]want{{"origins[0].health_check.method", "", `"POST": use GET or HEAD`, 6}}},
		{"health check status", origin("health_check: {expected_statuses: [200, 42]}"),
			[]want{{"origins[0].health_check.expected_statuses[1]", "", "42 is not an HTTP status; use 100 to 599", 5}}},
		{"health check interval", origin("health_check: {interval: 0s}"),
			[]want{{"origins[0].health_check.interval", "", "0s must be positive, e.g. 5s", 5}}},
		{"health check jitter above interval", origin("health_check: {interval: 1s, jitter: 2s}"),
			[]want{{"origins[0].health_check.jitter", "", "2s is longer than interval (1s); use at most the interval", 5}}},
		{"health check timeout above interval", origin("health_check: {interval: 1s, timeout: 3s}"),
			[]want{{"origins[0].health_check.timeout", "", "3s is longer than interval (1s); use at most the interval", 5}}},
		{"health check thresholds", origin("health_check: {unhealthy_threshold: 0, healthy_threshold: 101}"),
			[]want{
				{"origins[0].health_check.healthy_threshold", "", "101 is out of range; use 1 to 100 (2 is the default)", 5},
				{"origins[0].health_check.unhealthy_threshold", "", "0 is out of range; use 1 to 100 (3 is the default)", 5},
			}},
		{"grpc health check over HTTP/1.1", origin("health_check:\n  grpc: {service: pay}"),
			[]want{{"origins[0].health_check.grpc", "", "the gRPC health protocol needs HTTP/2, and protocol auto over plaintext may not give it; set protocol: h2c", 6}}},

		// Whole-file problems.
		{"empty file", "", []want{{"", "", "the file is empty", 0}}},
		{"comments only", "# nothing\n", []want{{"", "", "the file is empty", 0}}},
		{"not a mapping", "- a\n- b\n", []want{{"", "", "want a mapping with keys listen, tls, admin", 1}}},
		{"yaml syntax", "listen: [\n", []want{{"", "", "YAML syntax:", 0}}},
		{"yaml syntax with line", "routes:\n  - a\n b: c\n", []want{{"", "", "YAML syntax: did not find expected key", 2}}},
		{"two documents", minimal + "---\nloops: 2\n", []want{{"", "", "a second YAML document", 6}}},
		{"tab indentation", "routes:\n\t- {origin: api}\n", []want{{"", "", "YAML syntax:", 2}}},
		{"unknown anchor", "routes: *nope\n", []want{{"", "", "YAML syntax:", 0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := parseDiags(t, c.src).Errors()
			if len(ds) != len(c.want) {
				t.Fatalf("got %d errors, want %d:\n%v\n--- source ---\n%s", len(ds), len(c.want), ds, c.src)
			}
			for i, w := range c.want {
				d := ds[i]
				if d.Key != w.key || d.Code != w.code || !strings.Contains(d.Message, w.text) || (w.line != 0 && d.Line != w.line) {
					t.Errorf("diagnostic %d:\n got %s (line %d)\nwant %s with code %q, line %d, message containing %q",
						i, d, d.Line, w.key, w.code, w.line, w.text)
				}
				if d.File != "test.yaml" {
					t.Errorf("diagnostic %d names file %q", i, d.File)
				}
			}
		})
	}
}

// TestAllDiagnosticsAtOnce: independent mistakes in different places are
// all reported by one Parse, in line order.
func TestAllDiagnosticsAtOnce(t *testing.T) {
	src := `listen: nowhere
loops: many
routes: [{origin: ghost}]
origins:
  - name: api
    protocol: h3
    endpoints: [{address: 127.0.0.1:9001, weight: 0}]
    pool: {max_pending: 500, idle_timeout: 60, max_pendnig: 1}
    slo: {average: 25ms}
workload: {classes: [{name: ping, percent: 100, latency: 1ms}]}
`
	ds := parseDiags(t, src)
	var got []string
	for _, d := range ds {
		got = append(got, fmt.Sprintf("%d %s %s", d.Line, d.Key, d.Code))
	}
	wantLines := []string{
		"1 listen ",
		"2 loops ",
		"3 routes[0].origin ",
		"5 origins[0].name ",
		"6 origins[0].protocol ",
		"7 origins[0].endpoints[0].weight ",
		"8 origins[0].pool.idle_timeout ",
		"8 origins[0].pool.max_pending " + CodeUnboundedQueue,
		"8 origins[0].pool.max_pendnig ",
		"9 origins[0].slo.average " + CodeAverageOnly,
		"10 workload.classes " + CodeNoWorkloadSkew,
	}
	if strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s\n--- full ---\n%v", strings.Join(got, "\n"), strings.Join(wantLines, "\n"), ds)
	}
	for _, code := range []string{CodeUnboundedQueue, CodeAverageOnly, CodeNoWorkloadSkew} {
		if !ds.HasCode(code) {
			t.Errorf("HasCode(%s) = false", code)
		}
	}
	if ds.HasCode("ERR_NOT_A_CODE") {
		t.Error("HasCode reported a code no diagnostic carries")
	}
	if n := strings.Count(ds.Error(), "\n") + 1; n != len(ds) {
		t.Errorf("Error() has %d lines for %d diagnostics", n, len(ds))
	}
}

// TestWarnings: departures from the seeds' invariants are accepted with a
// warning that names the invariant.
func TestWarnings(t *testing.T) {
	cases := []struct {
		name string
		src  string
		key  string
		text string
	}{
		{"short slow start", origin("slow_start: {window: 10s}"), "origins[0].slow_start.window", "INV-LB-01"},
		{"slow start off", origin("slow_start: {window: 0s}"), "origins[0].slow_start.window", "INV-LB-01"},
		{"lax outlier", origin("outlier: {consecutive_5xx: 5}"), "origins[0].outlier.consecutive_5xx", "INV-LB-02"},
		{"ejection cap", origin("outlier: {max_ejection_percent: 50}"), "origins[0].outlier.max_ejection_percent", "INV-LB-03"},
		{"p50 only", origin("slo: {p50: 8ms}"), "origins[0].slo", "INV-LB-04"},
		{"insecure origin", origin("tls: {insecure_skip_verify: true}"), "origins[0].tls.insecure_skip_verify", "not verified"},
		{"public admin", top("admin: 0.0.0.0:9901"), "admin.token_file", "answer 403"},
		{"remote-only zone", origin("zone: {local: us-east-1a}"), "origins[0].zone.local", "no endpoint is in zone"},
		{"unused origin", minimal + "  - {name: spare, endpoints: [{address: 127.0.0.1:2}]}\n", "origins[1].name", "has no route"},
		{"subset size with none", origin("subset: {algorithm: none, size: 8}"), "origins[0].subset.size", "ignored"},
		{"sticky origin with a subset", origin("balancer: {policy: maglev, hash_on: \"header X-Merchant\"}\nsubset: {size: 8}"), "origins[0].subset", "builds its table over the whole origin"},
		{"sticky origin with the default subset written", origin("balancer: {policy: ring_hash, hash_on: source_ip}\nsubset: {algorithm: ringsteady}"), "origins[0].subset", "builds its table over the whole origin"},
		{"key without a sticky policy", origin("balancer: {hash_on: source_ip}"), "origins[0].balancer.hash_on", "ignored: only policies maglev and ring_hash"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, c.src)
			ws := cfg.Warnings()
			if len(ws) != 1 || ws[0].Key != c.key || ws[0].Severity != SeverityWarning || !strings.Contains(ws[0].Message, c.text) {
				t.Fatalf("warnings = %v, want one on %s mentioning %q", ws, c.key, c.text)
			}
			if !strings.Contains(ws[0].String(), ": warning: ") {
				t.Errorf("a warning must read as one: %s", ws[0])
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("warnings must not fail Validate: %v", err)
			}
		})
	}
}

// TestErrorsKeepWarnings: a refused config lists its warnings too, after
// sorting, so the user sees everything at once.
func TestErrorsKeepWarnings(t *testing.T) {
	ds := parseDiags(t, origin("slow_start: {window: 5s}\npool: {max_pending: 0}"))
	if len(ds.Errors()) != 1 || len(ds.Warnings()) != 1 || ds[0].Line != 5 || ds[1].Line != 6 {
		t.Fatalf("diagnostics = %v", ds)
	}
}

// TestMergeBomb: merge keys that expand exponentially are refused after
// a bounded amount of work.
func TestMergeBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x0: &m0 {max_connections: 1}\n")
	for i := 1; i <= 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d, ", i-1), 10), ", ")
		fmt.Fprintf(&b, "x%d: &m%d {<<: [%s]}\n", i, i, refs)
	}
	src := b.String() + strings.TrimPrefix(minimal, "\n") + "    pool: {<<: *m9}\n"
	ds := parseDiags(t, src)
	found := false
	for _, d := range ds {
		found = found || strings.Contains(d.Message, "through aliases and merge keys")
	}
	if !found {
		t.Fatalf("merge bomb not refused: %v", ds)
	}
}

// DecodeNode holds another file to the config's rules: the problems come
// sorted by line with their key paths, a key left out keeps its value, and
// the lines of the keys met are returned.
func TestDecodeNodeDecodesAnyFileStrictly(t *testing.T) {
	type item struct {
		Name string `yaml:"name"`
		Size int    `yaml:"size"`
	}
	var v struct {
		Items []item `yaml:"items"`
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("items:\n  - {name: a, size: big}\n  - name: b\n    sise: 2\n  - name: c\n"), &doc); err != nil {
		t.Fatal(err)
	}
	lines, problems := DecodeNode(doc.Content[0], &v)
	var got []string
	for _, d := range problems {
		got = append(got, d.String())
	}
	want := []string{
		`line 2: items[0].size: want a whole number, got "big"`,
		`line 4: items[1].sise: unknown key "sise" in items[1]; did you mean "size"? (known keys: name, size)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(v.Items) != 3 || v.Items[2].Name != "c" || v.Items[2].Size != 0 {
		t.Errorf("decoded %+v", v.Items)
	}
	if lines["items[2]"] != 5 || lines["items[1].name"] != 3 {
		t.Errorf("lines %v", lines)
	}
	if _, written := lines["items[2].size"]; written {
		t.Errorf("a key left out has a line: %v", lines)
	}
}
