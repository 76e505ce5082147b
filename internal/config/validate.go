package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/internal/tlsfiles"
	"github.com/corput/corput/internal/workload"
	"golang.org/x/net/http/httpguts"
)

// Validate checks a config, whether parsed or built in Go, and returns the
// error-severity findings as Diagnostics, or nil.
func (c *Config) Validate() error {
	if errs := c.Diagnose().Errors(); len(errs) > 0 {
		return errs
	}
	return nil
}

// Diagnose returns every finding about the config, errors and warnings,
// sorted by line.
func (c *Config) Diagnose() Diagnostics {
	r := &reporter{file: c.file, lines: c.lines}
	c.diagnose(r)
	r.diags.Sort()
	return r.diags
}

// Ranges of the plain numeric keys.
const (
	maxLoops          = 4096
	maxConnections    = 100_000
	maxWeight         = 1_000_000
	maxRetryAttempts  = 10
	maxChoices        = 16
	minHeaderBytes    = 1 << 10
	maxHeaderBytes    = 16 << 20
	slowStartFloor    = 60 * time.Second // the seed's shortest slow start for a new endpoint (INV-LB-01)
	ejectionCapSeed   = 20               // the seed's most endpoints ejected at once, in % (INV-LB-03)
	consecutive5xxMax = 3                // the seed's consecutive 5xx that eject an endpoint (INV-LB-02)
)

func (c *Config) diagnose(r *reporter) {
	checkAddr(r, "listen", c.Listen, addrListen)
	c.checkAdmin(r)
	if c.TLS != nil {
		checkServerTLS(r, "tls", c.TLS)
	}
	checkRange(r, "loops", c.Loops, 0, maxLoops, "0 means one loop per GOMAXPROCS")
	if c.Fleet.Server != "" {
		c.checkFleetServer(r) // the position comes from there, checked as it arrives
	} else {
		c.checkNoNodeID(r)
		if checkRange(r, "fleet.size", c.Fleet.Size, 1, math.MaxInt32, "the number of gateways in the fleet") {
			checkRange(r, "fleet.instance", c.Fleet.Instance, 0, c.Fleet.Size-1, "this gateway's index, 0 ≤ instance < fleet.size")
		}
	}
	checkPositive(r, "downstream.read_header_timeout", c.Downstream.ReadHeaderTimeout, "10s")
	checkPositive(r, "downstream.idle_timeout", c.Downstream.IdleTimeout, "120s")
	checkPositive(r, "downstream.body_read_timeout", c.Downstream.BodyReadTimeout, "60s")
	checkRange(r, "downstream.max_header_bytes", c.Downstream.MaxHeaderBytes, minHeaderBytes, maxHeaderBytes, "65536 is the default")
	checkEnum(r, "downstream.underscore_headers", c.Downstream.UnderscoreHeaders, UnderscoreDrop, UnderscoreReject, UnderscoreAllow)
	checkPositive(r, "shutdown.drain_timeout", c.Shutdown.DrainTimeout, "20s")
	c.checkEdge(r)
	c.checkRequestID(r)

	c.checkLimits(r)
	names := c.checkOrigins(r)
	c.checkRoutes(r, names)
	if c.Workload != nil {
		checkWorkload(r, *c.Workload)
	}
	if c.AccessLog != nil {
		checkAccessLog(r, "access_log", c.AccessLog)
	}
	if c.Tracing != nil {
		checkTracing(r, "tracing", c.Tracing)
	}
}

// checkNoNodeID: a node id is only for a control plane.
func (c *Config) checkNoNodeID(r *reporter) {
	if c.Fleet.NodeID != "" {
		r.errorf("fleet.node_id", "is the node id to register under with fleet.server, which is not set; set fleet.server or remove fleet.node_id")
	}
	if c.Fleet.TLS != nil {
		r.errorf("fleet.tls", "is how to dial fleet.server, which is not set; set fleet.server or remove fleet.tls")
	}
}

// checkFleetServer: a control plane that assigns the fleet position is the
// only place it comes from.
func (c *Config) checkFleetServer(r *reporter) {
	if checkAddr(r, "fleet.server", c.Fleet.Server, addrDial) {
		checkXDSTransport(r, "fleet", c.Fleet.Server, c.Fleet.TLS, "anyone on the path can read this gateway's fleet position or hand it another")
	}
	for _, k := range []string{"fleet.instance", "fleet.size"} {
		if c.Written(k) {
			r.errorf(k, "the control plane at fleet.server assigns the fleet position; remove %s (or fleet.server)", k)
		}
	}
}

// checkXDSTransport checks the tls block beside an xDS server's address
// (p.server, p.tls), or warns of plaintext to a server off loopback,
// saying what risk means there.
func checkXDSTransport(r *reporter, p, server string, t *XDSTLS, risk string) {
	if t == nil {
		if !tlsfiles.Loopback(server) {
			r.warnf(p+".server", "plaintext xDS to %s, which is not on loopback: %s; add %s.tls: {ca: FILE} (the CA of the control plane's certificate; with cert and key for mTLS)", server, risk, p)
		}
		return
	}
	tp := p + ".tls"
	checkKeyPair(r, tp, t.Cert, t.Key)
	if t.CA != "" {
		checkCA(r, tp+".ca", t.CA)
	}
}

func checkAccessLog(r *reporter, p string, a *AccessLog) {
	switch {
	case a.Path == "":
		r.errorf(p+".path", "missing; write stdout, or the file to append the lines to (e.g. /var/log/corput/access.log)")
	case a.Path != AccessLogStdout:
		if st, err := os.Stat(a.Path); err == nil && st.IsDir() {
			r.errorf(p+".path", "%s is a directory; name the file to append the lines to", a.Path)
		} else if st, err := os.Stat(filepath.Dir(a.Path)); err != nil || !st.IsDir() {
			r.errorf(p+".path", "the directory of %s does not exist; create it, or write stdout (relative paths are resolved against the config file's directory)", a.Path)
		}
	}
	checkEnum(r, p+".format", a.Format, AccessLogJSON, AccessLogCombined)
	if !(a.Sample > 0 && a.Sample <= 1) {
		r.errorf(p+".sample", "%v is outside (0, 1]: the share of requests logged; 1.0 (every request) is the default, 0.01 logs one in a hundred", a.Sample)
	}
}

// checkAdmin checks the admin listener and its token. Problems with the
// address are reported under admin when it was written alone and under
// admin.listen when it was written in the block.
func (c *Config) checkAdmin(r *reporter) {
	a := c.Admin
	key := "admin"
	if _, inBlock := c.lines["admin.listen"]; inBlock {
		key = "admin.listen"
	}
	if checkAddr(r, key, a.Listen, addrListen) && a.Listen == c.Listen && !strings.HasSuffix(a.Listen, ":0") {
		r.errorf(key, "%q is also the listen address; give the admin API its own port, e.g. 127.0.0.1:9901", a.Listen)
	}
	if a.TokenFile != "" {
		if _, err := a.Token(); err != nil {
			r.errorf("admin.token_file", "%v", err)
		}
		return
	}
	if _, _, err := net.SplitHostPort(a.Listen); err == nil && !a.Loopback() {
		r.warnf("admin.token_file", "not set and the admin listener %q is not on loopback: only /metrics, /healthz and /readyz are served there, and /admin/*, /debug/pprof/* and the dashboard answer 403; write admin: {listen: %s, token_file: FILE} to serve them to holders of the token", a.Listen, a.Listen)
	}
}

// checkOrigins validates every origin and returns how many routes may
// refer to each name (filled in by checkRoutes).
func (c *Config) checkOrigins(r *reporter) map[string]int {
	if len(c.Origins) == 0 {
		r.errorf("origins", "no origins; add at least one, e.g. {name: api, endpoints: [{address: 127.0.0.1:9001}]}")
	}
	names := map[string]int{}
	for i := range c.Origins {
		o := &c.Origins[i]
		p := joinIndex("origins", i)
		o.check(r, p, c.Limits)
		if o.Name == "" {
			continue
		}
		if _, dup := names[o.Name]; dup {
			r.errorf(p+".name", "origin %q is defined twice; origin names must be unique", o.Name)
		}
		names[o.Name] = 0
	}
	checkSharedXDSServers(r, c.Origins)
	return names
}

// checkSharedXDSServers: origins naming one xDS server share one stream,
// so they must dial it the same way.
func checkSharedXDSServers(r *reporter, origins []Origin) {
	first := map[string]int{}
	for i, o := range origins {
		d := o.Discovery
		if d.Type != DiscoveryXDS || d.Server == "" {
			continue
		}
		j, seen := first[d.Server]
		if !seen {
			first[d.Server] = i
			continue
		}
		if !reflect.DeepEqual(d.TLS, origins[j].Discovery.TLS) {
			r.errorf(joinIndex("origins", i)+".discovery.tls", "differs from origins[%d]'s (%s) for the same server %s: origins naming one xDS server share one stream, so give them one tls block (a YAML anchor: tls: &xds {...} on the first, tls: *xds on the others)", j, origins[j].Name, d.Server)
		}
	}
}

var hostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

func (c *Config) checkRoutes(r *reporter, origins map[string]int) {
	if len(c.Routes) == 0 {
		r.errorf("routes", "no routes; add one, e.g. {path_prefix: /, origin: NAME}")
	}
	seen := map[string]int{}
	named := map[string]int{}
	for i, rt := range c.Routes {
		p := joinIndex("routes", i)
		if rt.Name != "" && !originName.MatchString(rt.Name) {
			r.errorf(p+".name", "%q: use 1–63 letters, digits, '.', '_' or '-' (it is a metric label)", rt.Name)
		}
		// Two unnamed routes with one derived name have one host and
		// prefix: that is reported below.
		if j, dup := named[rt.RouteName()]; dup && (rt.Name != "" || c.Routes[j].Name != "") {
			r.errorf(p+".name", "%q is also routes[%d]'s name; give each route its own name", rt.RouteName(), j)
		} else if dup && matchKey(&rt) != matchKey(&c.Routes[j]) {
			r.errorf(p+".name", "missing; routes[%d] has the same host and path and other methods, headers or query, so both would be named %q: give each route its own name", j, rt.RouteName())
		} else if !dup {
			named[rt.RouteName()] = i
		}
		checkRouteHost(r, p+".host", rt.Host)
		if !strings.HasPrefix(rt.PathPrefix, "/") {
			r.errorf(p+".path_prefix", "%q must start with /, e.g. /api", rt.PathPrefix)
		}
		c.checkRouteMatch(r, p, &rt)
		c.checkAction(r, i, origins)
		c.checkSplitKey(r, p, &rt)
		if rt.Class != "" {
			switch {
			case c.Workload == nil:
				r.errorf(p+".class", "%q names a workload class, and there is no workload block; add workload.classes with a class of that name, or remove class", rt.Class)
			default:
				if _, ok := c.Workload.Index(rt.Class); !ok {
					r.errorf(p+".class", "%q is not a workload class; use one of: %s", rt.Class, strings.Join(classNames(*c.Workload), ", "))
				}
			}
		}
		c.checkRouteRetry(r, i)
		c.checkMirror(r, i, origins)
		if rt.Priority != "" && rt.Priority != PriorityNormal && rt.Priority != PriorityLow {
			r.errorf(p+".priority", "%q is not a priority; use low (shed first by the SLO guard) or normal (the default)", rt.Priority)
		}
		if rt.MaxRequestBodyBytes < 0 {
			r.errorf(p+".max_request_body_bytes", "%d is negative; use 0 (unlimited) or a size in bytes, e.g. 1048576", rt.MaxRequestBodyBytes)
		}
		for _, name := range rt.Origins() {
			if o := c.originNamed(name); o != nil && rt.Timeouts != nil {
				rt.Timeouts.check(r, p+".timeouts", o)
			}
		}
		if rt.RateLimit != nil {
			checkRateLimit(r, p+".rate_limit", rt.RateLimit)
		}
		checkAddresses(r, p+".addresses", rt.Addresses)
		c.checkEdits(r, p, &rt)
		k := strings.ToLower(rt.Host) + "\x00" + matchKey(&rt)
		if first, dup := seen[k]; dup {
			what := fmt.Sprintf("path_prefix %q", rt.PathPrefix)
			switch {
			case rt.PathExact != "":
				what = fmt.Sprintf("path_exact %q", rt.PathExact)
			case rt.PathRegex != "":
				what = fmt.Sprintf("path_regex %q", rt.PathRegex)
			}
			r.errorf(p, "same host %q, %s and matches as routes[%d]; the second route could never match", rt.Host, what, first)
		} else {
			seen[k] = i
		}
	}
	for i, o := range c.Origins {
		if n, ok := origins[o.Name]; ok && n == 0 && len(c.Routes) > 0 {
			r.warnf(joinIndex("origins", i)+".name", "origin %q has no route and gets no traffic", o.Name)
		}
	}
}

// checkRouteMatch checks a route's path, methods, headers and query
// matches: one path kind, a path_exact that starts with /, regular
// expressions that compile, known match types.
func (c *Config) checkRouteMatch(r *reporter, p string, rt *Route) {
	kinds := 0
	if c.Written(p + ".path_prefix") {
		kinds++
	}
	if rt.PathExact != "" {
		kinds++
		if !strings.HasPrefix(rt.PathExact, "/") {
			r.errorf(p+".path_exact", "%q must start with /, e.g. /health", rt.PathExact)
		}
	}
	if rt.PathRegex != "" {
		kinds++
		if _, err := CompileMatch(rt.PathRegex); err != nil {
			r.errorf(p+".path_regex", "%q does not compile (%v); write an RE2 expression that matches the whole path, e.g. /api/v[0-9]+/.*", rt.PathRegex, regexProblem(err))
		}
	}
	if kinds > 1 {
		key := ".path_exact"
		if rt.PathRegex != "" {
			key = ".path_regex"
		}
		r.errorf(p+key, "give one of path_prefix, path_exact and path_regex: a route matches its path one way")
	}
	for j, m := range rt.Methods {
		if m == "" || !httpguts.ValidHeaderFieldName(m) || strings.ToUpper(m) != m {
			r.errorf(joinIndex(p+".methods", j), "%q is not a method; methods are case-sensitive tokens, e.g. GET or POST", m)
		}
	}
	for j, h := range rt.Headers {
		hp := joinIndex(p+".headers", j)
		switch {
		case !httpguts.ValidHeaderFieldName(h.Name):
			r.errorf(hp+".name", "%q is not a header field name; name the field, e.g. x-canary", h.Name)
		case strings.Contains(h.Name, "_") && c.Downstream.UnderscoreHeaders != UnderscoreAllow:
			r.errorf(hp+".name", "%q has a '_': such fields are not forwarded (downstream.underscore_headers: %s), so no route should depend on one; name the field with '-', or set downstream.underscore_headers: allow", h.Name, c.Downstream.UnderscoreHeaders)
		}
		switch h.Type {
		case "", MatchExact:
		case MatchPresent, MatchAbsent:
			if h.Value != "" {
				r.errorf(hp+".value", "a %s match has no value; remove value, or use type exact or regex", h.Type)
			}
		case MatchRegex:
			if _, err := CompileMatch(h.Value); err != nil {
				r.errorf(hp+".value", "%q does not compile (%v); write an RE2 expression that matches the whole value", h.Value, regexProblem(err))
			}
		default:
			r.errorf(hp+".type", "%q is not a header match; use exact (the default), present, absent or regex", h.Type)
		}
	}
	for j, q := range rt.Query {
		qp := joinIndex(p+".query", j)
		if q.Name == "" {
			r.errorf(qp+".name", "missing; name the query parameter, e.g. debug")
		}
		switch q.Type {
		case "", MatchExact:
		case MatchPresent:
			if q.Value != "" {
				r.errorf(qp+".value", "a present match has no value; remove value, or use type exact")
			}
		default:
			r.errorf(qp+".type", "%q is not a query match; use exact (the default) or present", q.Type)
		}
	}
}

// regexProblem is what is wrong with an expression that did not compile,
// without the anchors CompileMatch wrapped it in.
func regexProblem(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return string(se.Code)
	}
	return err.Error()
}

// matchKey is a route's path and matches, as one string: two routes of
// one host with the same key match the same requests.
func matchKey(rt *Route) string {
	return fmt.Sprintf("%q %q %q %q %q %q", rt.PathPrefix, rt.PathExact, rt.PathRegex, rt.Methods, fmt.Sprint(rt.Headers), fmt.Sprint(rt.Query))
}

func checkRouteHost(r *reporter, path, host string) {
	if host == "" {
		return
	}
	h := strings.ToLower(strings.TrimPrefix(host, "*."))
	if strings.ContainsAny(host, "/:") {
		r.errorf(path, "%q must be a bare host name: no scheme, port or path (routes match the Host header without its port)", host)
		return
	}
	for _, label := range strings.Split(h, ".") {
		if !hostLabel.MatchString(label) {
			r.errorf(path, "%q is not a host name; write example.com, *.example.com, or leave it empty for any host", host)
			return
		}
	}
}

// knownOrigin reports whether name is one of the origins (the keys of
// origins, which count the routes naming each); when not, it reports key
// as naming no origin.
func (c *Config) knownOrigin(r *reporter, key, name string, origins map[string]int) bool {
	if _, ok := origins[name]; !ok {
		r.errorf(key, "%q is not an origin; define it under origins or use one of: %s", name, strings.Join(originNames(c.Origins), ", "))
		return false
	}
	return true
}

func originNames(origins []Origin) []string {
	out := make([]string, 0, len(origins))
	for _, o := range origins {
		out = append(out, strconv.Quote(o.Name))
	}
	return out
}

var originName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func (o *Origin) check(r *reporter, p string, limits Limits) {
	switch {
	case o.Name == "":
		r.errorf(p+".name", "missing; every origin needs a name that routes refer to")
	case !originName.MatchString(o.Name):
		r.errorf(p+".name", "%q: use 1–63 letters, digits, '.', '_' or '-' (it is a metric label)", o.Name)
	}
	o.checkProtocol(r, p)
	o.checkMembership(r, p)
	checkNonNegative(r, p+".debounce", o.Debounce, "2s")
	o.checkSubset(r, p+".subset")
	o.checkBalancer(r, p+".balancer")
	o.checkPool(r, p+".pool")
	o.checkHealth(r, p)
	checkRetry(r, p+".retry", o.Retry, limits)
	o.checkTimeouts(r, p)
	if o.SLO != nil {
		o.SLO.check(r, p+".slo")
	}
	if o.HealthCheck != nil {
		o.checkHealthCheck(r, p+".health_check")
	}
}

// checkHealthCheck covers the health_check block.
func (o *Origin) checkHealthCheck(r *reporter, p string) {
	h := o.HealthCheck
	if !strings.HasPrefix(h.Path, "/") || strings.ContainsAny(h.Path, " \t\r\n") {
		r.errorf(p+".path", "%q is not a request target; write an absolute path such as /healthz", h.Path)
	}
	if h.Method != "GET" && h.Method != "HEAD" {
		r.errorf(p+".method", "%q: use GET or HEAD (a probe must be safe to repeat)", h.Method)
	}
	for i, s := range h.ExpectedStatuses {
		if s < 100 || s > 599 {
			r.errorf(fmt.Sprintf("%s.expected_statuses[%d]", p, i), "%d is not an HTTP status; use 100 to 599, e.g. [200, 204]", s)
		}
	}
	intervalOK := checkPositive(r, p+".interval", h.Interval, "5s")
	if checkNonNegative(r, p+".jitter", h.Jitter, "500ms") && intervalOK && h.Jitter > h.Interval {
		r.errorf(p+".jitter", "%v is longer than interval (%v); use at most the interval, a tenth of it is usual", h.Jitter, h.Interval)
	}
	if checkPositive(r, p+".timeout", h.Timeout, "1s") && intervalOK && h.Timeout > h.Interval {
		r.errorf(p+".timeout", "%v is longer than interval (%v); use at most the interval, so one probe ends before the next is due", h.Timeout, h.Interval)
	}
	checkRange(r, p+".unhealthy_threshold", h.UnhealthyThreshold, 1, 100, "3 is the default")
	checkRange(r, p+".healthy_threshold", h.HealthyThreshold, 1, 100, "2 is the default")
	if h.GRPC != nil && !multiplexed(o) {
		r.errorf(p+".grpc", "the gRPC health protocol needs HTTP/2, and protocol %s over %s may not give it; set protocol: h2c (plaintext) or h2 (with tls)", o.Protocol, tlsWord(o))
	}
}

// multiplexed reports whether o's connections speak HTTP/2 for sure.
func multiplexed(o *Origin) bool {
	return o.Protocol == ProtocolH2C || (o.Protocol == ProtocolH2 && o.TLS != nil)
}

func tlsWord(o *Origin) string {
	if o.TLS != nil {
		return "TLS"
	}
	return "plaintext"
}

func (o *Origin) checkProtocol(r *reporter, p string) {
	checkEnum(r, p+".protocol", o.Protocol, ProtocolAuto, ProtocolH1, ProtocolH2, ProtocolH2C)
	switch {
	case o.Protocol == ProtocolH2 && o.TLS == nil:
		r.errorf(p+".protocol", "h2 is HTTP/2 over TLS and this origin has no tls block; add tls: {} (system roots) or use h2c for cleartext HTTP/2")
	case o.Protocol == ProtocolH2C && o.TLS != nil:
		r.errorf(p+".protocol", "h2c is cleartext HTTP/2 but a tls block is set; use h2 (or auto) over TLS, or remove tls")
	}
	if o.TLS != nil {
		checkClientTLS(r, p+".tls", o.TLS, "the origin's certificate is not verified; anyone on the path can impersonate it. Set tls.ca instead")
	}
}

// checkClientTLS checks a tls block towards a server; insecure is the
// warning for insecure_skip_verify.
func checkClientTLS(r *reporter, p string, t *ClientTLS, insecure string) {
	checkKeyPair(r, p, t.Cert, t.Key)
	if t.CA != "" {
		checkCA(r, p+".ca", t.CA)
	}
	if t.InsecureSkipVerify {
		r.warnf(p+".insecure_skip_verify", "%s", insecure)
	}
}

// unusedTLS: a tls block in a discovery of another type than xds.
func unusedTLS(r *reporter, dp string, d Discovery) {
	if d.TLS != nil {
		r.errorf(dp+".tls", "only used with discovery type xds, but the type is %s; remove it", d.Type)
	}
}

func (o *Origin) checkMembership(r *reporter, p string) {
	dp := p + ".discovery"
	d := o.Discovery
	checkEnum(r, dp+".type", d.Type, DiscoveryStatic, DiscoveryFile, DiscoveryXDS)
	unused := func(key, value string, usedBy DiscoveryType) {
		if value != "" {
			r.errorf(dp+"."+key, "only used with discovery type %s, but the type is %s; remove it", usedBy, d.Type)
		}
	}
	switch d.Type {
	case DiscoveryStatic:
		if len(o.Endpoints) == 0 {
			r.errorf(p+".endpoints", "no endpoints; list at least one {address: host:port}, or use discovery type file or xds")
		}
		unused("path", d.Path, DiscoveryFile)
		unused("server", d.Server, DiscoveryXDS)
		unused("cluster", d.Cluster, DiscoveryXDS)
		unused("node_id", d.NodeID, DiscoveryXDS)
		unusedTLS(r, dp, d)
	case DiscoveryFile:
		if d.Path == "" {
			r.errorf(dp+".path", "missing; discovery type file needs the path of the watched endpoints file")
		}
		unused("server", d.Server, DiscoveryXDS)
		unused("cluster", d.Cluster, DiscoveryXDS)
		unused("node_id", d.NodeID, DiscoveryXDS)
		unusedTLS(r, dp, d)
	case DiscoveryXDS:
		if d.Server == "" {
			r.errorf(dp+".server", "missing; discovery type xds needs the host:port of the xDS server")
		} else if checkAddr(r, dp+".server", d.Server, addrDial) {
			checkXDSTransport(r, dp, d.Server, d.TLS, "anyone on the path can read the membership, or forge it by posing as the control plane")
		}
		if d.Cluster == "" {
			r.errorf(dp+".cluster", "missing; discovery type xds needs the EDS cluster name")
		}
		unused("path", d.Path, DiscoveryFile)
	}
	if (d.Type == DiscoveryFile || d.Type == DiscoveryXDS) && len(o.Endpoints) > 0 {
		r.errorf(p+".endpoints", "static endpoints are not used with discovery type %s; remove them or use type static", d.Type)
	}
	seen := map[string]int{}
	zones := map[string]bool{}
	for i, e := range o.Endpoints {
		ep := joinIndex(p+".endpoints", i)
		checkAddr(r, ep+".address", e.Address, addrDial)
		checkRange(r, ep+".weight", e.Weight, 1, maxWeight, "weights are relative; 1 is the default")
		if first, dup := seen[e.Address]; dup {
			r.errorf(ep+".address", "%q is listed twice (first as endpoints[%d]); list each endpoint once and use weight", e.Address, first)
		} else {
			seen[e.Address] = i
		}
		zones[e.Zone] = true
	}
	if o.Zone.Local != "" && d.Type == DiscoveryStatic && len(o.Endpoints) > 0 && !zones[o.Zone.Local] {
		r.warnf(p+".zone.local", "no endpoint is in zone %q, so every request goes to a remote zone", o.Zone.Local)
	}
}

func (o *Origin) checkSubset(r *reporter, p string) {
	s := o.Subset
	checkEnum(r, p+".algorithm", s.Algorithm, SubsetRingsteady, SubsetNone, SubsetHashmod, SubsetRandom, SubsetRendezvous)
	checkRange(r, p+".size", s.Size, 0, maxConnections, "0 sizes the subset automatically between min_size and max_size")
	if checkRange(r, p+".min_size", s.MinSize, 1, maxConnections, "25 is the default") {
		checkRange(r, p+".max_size", s.MaxSize, s.MinSize, maxConnections, "at least min_size; 50 is the default")
	}
	if s.Algorithm == SubsetNone && s.Size > 0 {
		r.warnf(p+".size", "ignored: algorithm none uses every endpoint")
	}
}

func (o *Origin) checkBalancer(r *reporter, p string) {
	b := o.Balancer
	checkEnum(r, p+".policy", b.Policy, PolicyPeakEWMA, PolicyLeastWork, PolicyLeastRequest, PolicyP2C, PolicyRoundRobin, PolicyRandom, PolicyMaglev, PolicyRingHash)
	o.checkSticky(r, p)
	checkRange(r, p+".choices", b.Choices, 2, maxChoices, "2 (power of two choices) is the default")
	checkPositive(r, p+".ewma_decay", b.EWMADecay, "10s")
	checkPositive(r, p+".default_rtt", b.DefaultRTT, "30ms")
	if !(b.TieRatio >= 1 && b.TieRatio <= 10) {
		r.errorf(p+".tie_ratio", "%v is outside 1..10: the factor by which two endpoints' mean latencies must differ before peak_ewma prefers the faster; 1.5 is the default, 1 always compares latency", b.TieRatio)
	}
}

// checkSticky covers the keys of maglev and ring_hash: where the key comes
// from, the bound, the fallback and the table size.
func (o *Origin) checkSticky(r *reporter, p string) {
	b := o.Balancer
	if !b.Sticky() {
		if b.HashOn != "" {
			r.warnf(p+".hash_on", "ignored: only policies maglev and ring_hash route by a key; the policy is %s", b.Policy)
		}
		if b.Cookie != nil {
			r.warnf(p+".cookie", "ignored: only policies maglev and ring_hash set a key cookie; the policy is %s", b.Policy)
		}
		return
	}
	var h HashOn
	if b.HashOn == "" {
		r.errorf(p+".hash_on", "missing; policy %s needs the request's key: \"header NAME\", \"cookie NAME\" or \"source_ip\"", b.Policy)
	} else if k, err := ParseHashOn(b.HashOn); err != nil {
		r.errorf(p+".hash_on", "%v", err)
	} else {
		h = k
	}
	if c := b.Cookie; c != nil {
		switch {
		case h.Kind != HashCookie && b.HashOn != "":
			r.errorf(p+".cookie", "only used with hash_on: \"cookie NAME\" (the cookie to set), but hash_on is %q; remove cookie", b.HashOn)
		case c.TTL < 0:
			r.errorf(p+".cookie.ttl", "%v is negative; use 0 (a session cookie) or a duration such as 1h", c.TTL)
		case c.Path != "" && (c.Path[0] != '/' || strings.ContainsAny(c.Path, ";\r\n")):
			r.errorf(p+".cookie.path", "%q is not a cookie path; write one that starts with / and has no ';', e.g. /", c.Path)
		}
	}
	if !(b.BalanceFactor >= 1 && b.BalanceFactor <= 100) {
		r.errorf(p+".balance_factor", "%v is outside 1..100: an endpoint takes a key's request while its load stays under balance_factor × the mean; 1.25 is the default", b.BalanceFactor)
	}
	if b.Fallback.Sticky() {
		r.errorf(p+".fallback", "%s needs a key too; the fallback routes requests without one: use peak_ewma (the default), least_work, least_request, p2c, round_robin or random", b.Fallback)
	} else {
		checkEnum(r, p+".fallback", b.Fallback, PolicyPeakEWMA, PolicyLeastWork, PolicyLeastRequest, PolicyP2C, PolicyRoundRobin, PolicyRandom)
	}
	if b.Policy == PolicyMaglev {
		n := len(o.Endpoints)
		switch {
		case b.TableSize < 2 || b.TableSize > MaxTableSize || !IsPrime(b.TableSize):
			r.errorf(p+".table_size", "%d is not a prime in 2..%d; maglev's table size must be prime, %d is the default", b.TableSize, MaxTableSize, DefaultTableSize)
		case b.TableSize < 100*n:
			r.errorf(p+".table_size", "%d is below 100 × the %d endpoints; use a prime of at least %d (keys per endpoint then stay within 1 %%), e.g. %d", b.TableSize, n, 100*n, NextPrime(100*n))
		}
	}
	sp := parentPath(p) + ".subset"
	if _, written := r.lines[sp]; (written || o.Subset != DefaultOrigin().Subset) && o.Subset.Algorithm != SubsetNone {
		r.warnf(sp, "ignored: policy %s builds its table over the whole origin so that a key reaches the same endpoint from every loop and gateway; every loop holds a pool per endpoint (see corput plan). Remove subset, or use a non-sticky policy to keep subsets", b.Policy)
	}
}

// MaxTableSize bounds balancer.table_size (a table of 4-byte entries: 16 MiB).
const MaxTableSize = 1<<22 - 3

// IsPrime reports whether n is prime.
func IsPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// NextPrime is the least prime ≥ n.
func NextPrime(n int) int {
	for !IsPrime(n) {
		n++
	}
	return n
}

func (o *Origin) checkPool(r *reporter, p string) {
	pl := o.Pool
	capOK := checkRange(r, p+".max_connections", pl.MaxConnections, 1, maxConnections, "64 is the default")
	if pl.MaxPending <= 0 || pl.MaxPending > MaxPendingCeiling {
		r.codedf(p+".max_pending", CodeUnboundedQueue, "%s", unboundedMessage(strconv.Itoa(int(pl.MaxPending))))
	}
	checkEnum(r, p+".over_cap", pl.OverCap, OverCapQueue, OverCapTemporary, OverCapReject)
	if checkPositive(r, p+".acquire_timeout", pl.AcquireTimeout, "100ms") && pl.AcquireTimeout >= o.Timeouts.ResponseHeader && o.Timeouts.ResponseHeader > 0 {
		r.errorf(p+".acquire_timeout", "%v is not shorter than timeouts.response_header (%v); a request would time out while still waiting for a connection", pl.AcquireTimeout, o.Timeouts.ResponseHeader)
	}
	checkNonNegative(r, p+".idle_timeout", pl.IdleTimeout, "60s")
	checkNonNegative(r, p+".max_lifetime", pl.MaxLifetime, "10m")
	checkNonNegative(r, p+".keepalive", pl.Keepalive, "15s")
	checkRange(r, p+".max_response_header_bytes", pl.MaxResponseHeaderBytes, 1<<10, 16<<20, "65536 (64 KiB) is the default")
	if capOK {
		checkRange(r, p+".prewarm", pl.Prewarm, 0, pl.MaxConnections, "at most max_connections; 1 is the default")
	}
}

// checkHealth covers slow start, outlier detection, panic and zones.
func (o *Origin) checkHealth(r *reporter, p string) {
	ss := o.SlowStart
	if checkNonNegative(r, p+".slow_start.window", ss.Window, "60s") && ss.Window < slowStartFloor {
		r.warnf(p+".slow_start.window", "%v is shorter than the seed's mandatory %v ramp for new endpoints (INV-LB-01); cold endpoints get full traffic sooner", ss.Window, slowStartFloor)
	}
	checkRange(r, p+".slow_start.min_weight_percent", ss.MinWeightPercent, 1, 100, "10 is the default")
	if !(ss.Aggression > 0 && ss.Aggression <= 100) {
		r.errorf(p+".slow_start.aggression", "%v is out of range; use a number in (0, 100], 1.0 (linear) is the default", ss.Aggression)
	}

	od := o.Outlier
	if checkRange(r, p+".outlier.consecutive_5xx", od.Consecutive5xx, 1, 1000, "3 is the default") && od.Consecutive5xx > consecutive5xxMax {
		r.warnf(p+".outlier.consecutive_5xx", "%d is above the seed's %d (INV-LB-02); a failing endpoint keeps receiving requests longer", od.Consecutive5xx, consecutive5xxMax)
	}
	checkPositive(r, p+".outlier.base_ejection_time", od.BaseEjectionTime, "30s")
	if od.MaxEjectionTime < od.BaseEjectionTime {
		r.errorf(p+".outlier.max_ejection_time", "%v is shorter than base_ejection_time (%v); use at least the base, 300s is the default", od.MaxEjectionTime, od.BaseEjectionTime)
	}
	if checkRange(r, p+".outlier.max_ejection_percent", od.MaxEjectionPercent, 0, 100, "20 is the default") && od.MaxEjectionPercent > ejectionCapSeed {
		r.warnf(p+".outlier.max_ejection_percent", "%d %% is above the seed's ceiling of %d %% (INV-LB-03); ejections may remove more capacity than the rest can carry", od.MaxEjectionPercent, ejectionCapSeed)
	}
	checkRange(r, p+".panic_threshold_percent", o.PanicThresholdPercent, 0, 100, "80 is the default")
	checkRange(r, p+".zone.local_percent", o.Zone.LocalPercent, 0, 100, "85 is the default")
}

// check rejects a target without percentiles (seed ADV-AO-01, INV-LB-04).
func (s *SLO) check(r *reporter, p string) {
	keys := []struct {
		name string
		v    time.Duration
	}{{"p50", s.P50}, {"p90", s.P90}, {"p95", s.P95}, {"p99", s.P99}, {"max", s.Max}, {"average", s.Average}}
	for _, k := range keys {
		checkNonNegative(r, p+"."+k.name, k.v, "20ms")
	}
	anyPercentile := s.P50 > 0 || s.P90 > 0 || s.P95 > 0 || s.P99 > 0
	switch {
	case s.Average > 0 && s.P90 == 0 && s.P99 == 0:
		r.codedf(p+".average", CodeAverageOnly, "an average target without p90 or p99 hides the tail: a 70/30 mix of 15ms and 140ms requests averages about 52ms while its p99 runs far above (seed ADV-AO-01, INV-LB-04); set p90 and p99, e.g. {p50: 8ms, p90: 14ms, p99: 20ms}")
	case !anyPercentile:
		r.errorf(p, "no percentile target; set at least p90 or p99, e.g. {p50: 8ms, p90: 14ms, p99: 20ms}, or remove slo")
	case s.P90 == 0 && s.P99 == 0:
		r.warnf(p, "no p90 or p99 target; the seed judges latency at p90 and p99 (INV-LB-04)")
	}
	// Targets that are set must not decrease with the percentile (max is
	// the 100th).
	prev := keys[0]
	for _, k := range keys[:5] {
		if k.v <= 0 {
			continue
		}
		if prev.v > k.v {
			r.errorf(p+"."+k.name, "%v is below %s (%v); a higher percentile cannot have a lower target", k.v, prev.name, prev.v)
		}
		prev = k
	}
}

func classNames(m workload.Mix) []string {
	out := make([]string, len(m.Classes))
	for i, c := range m.Classes {
		out[i] = c.Name
	}
	return out
}

func checkWorkload(r *reporter, m workload.Mix) {
	err := m.Validate()
	if err == nil {
		return
	}
	if errors.Is(err, workload.ErrNoSkew) {
		r.codedf("workload.classes", CodeNoWorkloadSkew, "%s", strings.TrimPrefix(err.Error(), workload.CodeNoSkew+": "))
		return
	}
	// workload's messages start with the key path: "workload.classes[1].percent: ...".
	key, msg, ok := strings.Cut(err.Error(), ": ")
	if !ok || !strings.HasPrefix(key, "workload") {
		key, msg = "workload", err.Error()
	}
	r.errorf(key, "%s", msg)
}

// checkServerTLS reports what edgetls finds in the tls block: it reads
// every file the block names, as a reload will.
func checkServerTLS(r *reporter, p string, t *ServerTLS) {
	for _, f := range t.Check() {
		key := p
		if f.Key != "" {
			key += "." + f.Key
		}
		if f.Warning {
			r.warnf(key, "%s", f.Message)
		} else {
			r.errorf(key, "%s", f.Message)
		}
	}
}

// checkKeyPair checks that cert and key are set together, readable, and
// belong to each other.
func checkKeyPair(r *reporter, p, cert, key string) {
	switch {
	case cert == "" && key == "":
		return
	case key == "":
		r.errorf(p+".key", "missing: cert is set, so key must name its private key file")
		return
	case cert == "":
		r.errorf(p+".cert", "missing: key is set, so cert must name its certificate file")
		return
	}
	okCert := checkReadable(r, p+".cert", cert)
	okKey := checkReadable(r, p+".key", key)
	if okCert && okKey {
		if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
			r.errorf(p+".cert", "%s and %s do not load as a certificate and its key: %v", cert, key, err)
		}
	}
}

func checkCA(r *reporter, p, file string) {
	if !checkReadable(r, p, file) {
		return
	}
	pem, _ := os.ReadFile(file)
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		r.errorf(p, "%s holds no PEM certificate; give a file with one or more CERTIFICATE blocks", file)
	}
}

func checkReadable(r *reporter, p, file string) bool {
	st, err := os.Stat(file)
	switch {
	case err != nil:
		r.errorf(p, "cannot read %s: %v (relative paths are resolved against the config file's directory)", file, unwrapPathError(err))
		return false
	case !st.Mode().IsRegular():
		r.errorf(p, "%s is not a regular file", file)
		return false
	}
	return true
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// addrKind says what an address is for.
type addrKind int

const (
	addrListen addrKind = iota // host may be empty (all interfaces), port may be 0 (any free port)
	addrDial                   // host and a non-zero port required
)

// checkAddr checks a host:port address.
func checkAddr(r *reporter, p, addr string, kind addrKind) bool {
	example := "127.0.0.1:9001"
	if kind == addrListen {
		example = "127.0.0.1:8080 or :8080"
	}
	if addr == "" {
		r.errorf(p, "missing; give a host:port such as %s", example)
		return false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		r.errorf(p, "%q is not host:port; write e.g. %s (IPv6 as [::1]:9001)", addr, example)
		return false
	}
	n, err := strconv.Atoi(port)
	lowest := 1
	if kind == addrListen {
		lowest = 0
	}
	if err != nil || n < lowest || n > 65535 {
		r.errorf(p, "port %q in %q must be a number from %d to 65535", port, addr, lowest)
		return false
	}
	if kind == addrDial && host == "" {
		r.errorf(p, "%q has no host; write e.g. %s", addr, example)
		return false
	}
	if strings.ContainsAny(host, " /") {
		r.errorf(p, "%q has an invalid host %q", addr, host)
		return false
	}
	return true
}

// checkEnum checks that v is one of allowed and lists them if not.
func checkEnum[T ~string](r *reporter, p string, v T, allowed ...T) bool {
	if slices.Contains(allowed, v) {
		return true
	}
	list := make([]string, len(allowed))
	for i, a := range allowed {
		list[i] = string(a)
	}
	r.errorf(p, "%q is not one of: %s", v, strings.Join(list, ", "))
	return false
}

// checkRange checks lo ≤ v ≤ hi; hint says what the key means.
func checkRange(r *reporter, p string, v, lo, hi int, hint string) bool {
	if v >= lo && v <= hi {
		return true
	}
	if hi == math.MaxInt32 {
		r.errorf(p, "%d is out of range; use at least %d (%s)", v, lo, hint)
	} else {
		r.errorf(p, "%d is out of range; use %d to %d (%s)", v, lo, hi, hint)
	}
	return false
}

func checkPositive(r *reporter, p string, d time.Duration, example string) bool {
	if d > 0 {
		return true
	}
	r.errorf(p, "%v must be positive, e.g. %s", d, example)
	return false
}

func checkNonNegative(r *reporter, p string, d time.Duration, example string) bool {
	if d >= 0 {
		return true
	}
	r.errorf(p, "%v is negative; use 0 or a positive duration, e.g. %s", d, example)
	return false
}

// checkEdge checks the ingress edge's listener keys: PROXY protocol, the
// listener's address rules and the redirecting listener.
func (c *Config) checkEdge(r *reporter) {
	if pp := c.Downstream.ProxyProtocol; pp != nil {
		if len(pp.From) == 0 {
			r.errorf("downstream.proxy_protocol.from", "is empty; list the load balancers' addresses (e.g. [10.0.0.0/8]): only their connections may carry a PROXY header")
		}
		switch pp.Other {
		case "", ProxyOtherRefuse, ProxyOtherPlain:
		default:
			r.errorf("downstream.proxy_protocol.other", "%q: use refuse (close connections from outside from, the default) or plain (serve them with their own address)", pp.Other)
		}
	}
	checkAddresses(r, "downstream.addresses", c.Downstream.Addresses)
	if rh := c.RedirectHTTP; rh != nil {
		if checkAddr(r, "redirect_http.listen", rh.Listen, addrListen) && rh.Listen == c.Listen && !strings.HasSuffix(rh.Listen, ":0") {
			r.errorf("redirect_http.listen", "%q is listen's address too; give the redirecting listener its own port (e.g. :80)", rh.Listen)
		}
		switch rh.Status {
		case 0, 301, 302, 307, 308:
		default:
			r.errorf("redirect_http.status", "%d is not a redirect; use 308 (the default), 301, 302 or 307", rh.Status)
		}
		if rh.HTTPSPort != 0 {
			checkRange(r, "redirect_http.https_port", rh.HTTPSPort, 1, 65535, "the HTTPS port written into Location; 443 is left out")
		}
		if c.TLS == nil {
			r.warnf("redirect_http", "redirects to HTTPS, and this gateway's listener has no tls block; the HTTPS side is then some other server's")
		}
	}
}

// maxRateKeys bounds routes[].rate_limit.max_keys (16 bytes a key).
const maxRateKeys = 1 << 24

func checkRateLimit(r *reporter, p string, rl *RateLimit) {
	if rl.RequestsPerSecond < 1 || math.IsInf(rl.RequestsPerSecond, 0) || rl.RequestsPerSecond > 1e9 {
		r.errorf(p+".requests_per_second", "%v: use a rate from 1 to 1e9 requests a second (a slower one would need a Retry-After above 1 s)", rl.RequestsPerSecond)
	}
	if rl.Burst < 0 || rl.Burst > 1e9 {
		r.errorf(p+".burst", "%d: use 1 or more requests (0: as many as requests_per_second)", rl.Burst)
	}
	switch k := rl.Key; {
	case k == "", k == RateKeyNone, k == RateKeyClientAddress:
	case strings.HasPrefix(k, RateKeyHeaderPrefix):
		if name := strings.TrimPrefix(k, RateKeyHeaderPrefix); !validHeaderName(name) {
			r.errorf(p+".key", "%q: header:NAME needs a header name (letters, digits and -), e.g. header:X-Api-Key", k)
		}
	default:
		r.errorf(p+".key", "%q: use none (one bucket for the route), client_address or header:NAME", k)
	}
	if rl.MaxKeys != 0 {
		checkRange(r, p+".max_keys", rl.MaxKeys, 64, maxRateKeys, "65536 is the default")
	}
}

// validHeaderName reports whether name is an HTTP field name (a token).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func checkAddresses(r *reporter, p string, a Addresses) {
	for i, pr := range a.Allow {
		for _, d := range a.Deny {
			if d.Bits() <= pr.Bits() && d.Contains(pr.Addr()) {
				r.warnf(joinIndex(p+".allow", i), "%s lies inside deny's %s, which wins: no client of it is allowed", pr, d)
				break
			}
		}
	}
}
