// Package config owns corput's configuration file: the Go types for every
// key of the contract in docs/contract.md, the seeds' defaults, a strict YAML
// decoder and the validation that `corput check` and `corput serve` share.
// The decoder also reads corput's other YAML files (DecodeNode: the
// discovery package's endpoints file), so that every file corput reads is
// held to the same rules.
//
// Invariants:
//   - Unknown keys, duplicate keys, wrong types, malformed durations and
//     out-of-range values are errors that name the key path
//     (origins[0].pool.max_pending) and the line; Parse reports all of them
//     at once, never only the first.
//   - A key left out takes the seed's default (Default, DefaultOrigin); a key
//     written explicitly is never silently replaced by a default.
//   - A Config returned without error passes Validate: the gateway may use
//     it without re-checking ranges.
//   - The three configurations the second seed rejects (LB-PAY-001 in
//     docs/spec.md) carry their codes exactly: an unbounded pending queue,
//     ERR_UNBOUNDED_QUEUE_REJECTED (at most 50 pending requests per host:
//     ADV-UQ-01, INV-LB-05); a latency target given as an average alone,
//     ERR_AVERAGE_ONLY_TARGET_REJECTED (targets are percentiles: ADV-AO-01,
//     INV-LB-04); and a workload without cost skew,
//     ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED (ADV-BW-01, via
//     workload.Mix.Validate).
//   - Relative file paths (TLS files, discovery.path, access_log.path) are
//     resolved against the directory of the config file, as Prometheus
//     does.
//
// docs/configuration.md documents every key; keep the two in step.
package config

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/corput/corput/internal/edgetls"
	"github.com/corput/corput/internal/tlsfiles"
	"github.com/corput/corput/internal/workload"
	"golang.org/x/net/http/httpguts"
)

// The diagnostic codes the contract fixes (docs/contract.md).
const (
	CodeUnboundedQueue = "ERR_UNBOUNDED_QUEUE_REJECTED"
	CodeAverageOnly    = "ERR_AVERAGE_ONLY_TARGET_REJECTED"
	CodeNoWorkloadSkew = workload.CodeNoSkew // ERR_BENCHMARK_WITHOUT_WORKLOAD_REJECTED
)

// MaxPendingCeiling is the seed's bound on pending requests per host
// (INV-LB-05). A larger, zero, negative or "unlimited" bound is rejected.
const MaxPendingCeiling = 50

// Config is one gateway's configuration file.
type Config struct {
	Listen     string     `yaml:"listen"`     // downstream address; HTTP/1.1 and h2c, HTTPS with h2 when TLS is set
	TLS        *ServerTLS `yaml:"tls"`        // nil: plaintext downstream
	Admin      Admin      `yaml:"admin"`      // the admin API's listener and its access: /metrics, /admin/*, /healthz, /readyz
	Loops      int        `yaml:"loops"`      // 0 = GOMAXPROCS; see LoopCount
	Fleet      Fleet      `yaml:"fleet"`      // this gateway's place among its peers
	Downstream Downstream `yaml:"downstream"` // limits on client connections (additive)
	Shutdown   Shutdown   `yaml:"shutdown"`   // graceful drain (additive)
	Routes     []Route    `yaml:"routes"`
	Origins    []Origin   `yaml:"origins"`
	// Workload is the request mix of a lab or load run (additive); nil when
	// the file has none. A mix without cost skew is rejected.
	Workload *workload.Mix `yaml:"workload"`
	// AccessLog writes a line per request (additive); nil, the default,
	// writes none.
	AccessLog *AccessLog `yaml:"access_log"`
	// Tracing exports spans over OTLP (additive); nil, the default,
	// traces nothing.
	Tracing *Tracing `yaml:"tracing"`
	// RedirectHTTP, when set, opens a second, cleartext listener that
	// redirects every request to HTTPS (additive); nil opens none.
	RedirectHTTP *RedirectHTTP `yaml:"redirect_http"`
	// Limits are gateway-wide bounds (additive).
	Limits Limits `yaml:"limits"`

	file     string         // the name diagnostics are reported under
	source   []byte         // the bytes Parse read (the reload's hash)
	lines    map[string]int // key path → line, filled by Parse
	warnings Diagnostics    // from the last Parse
}

// ServerTLS turns on HTTPS (with h2 by ALPN) on the downstream listener:
// the default certificate, certificates by server name, the version,
// suite, key-exchange and ALPN policy, client certificates, OCSP stapling
// and the fleet's session ticket keys. Its keys, defaults and checks are
// internal/edgetls's, the package that enforces them.
type ServerTLS = edgetls.Settings

// Admin is the admin API's listener and who may use it. The key is
// written either as the address alone (`admin: 127.0.0.1:9901`, the
// original form) or as a block (`admin: {listen: ADDR, token_file: FILE}`,
// additive).
//
// Every admin path except /metrics, /healthz and /readyz is protected
// (docs/contract.md §4): with a token file it needs `Authorization: Bearer
// <token>`, on any listener; without one it is served only on a loopback
// listener and refused (403) on any other.
type Admin struct {
	Listen    string `yaml:"listen"`     // host:port
	TokenFile string `yaml:"token_file"` // holds the bearer token; "": no token
}

// Loopback reports whether Listen's host is a loopback address or
// localhost. An empty host (every interface) is not.
func (a Admin) Loopback() bool { return tlsfiles.Loopback(a.Listen) }

// maxTokenBytes bounds an admin token file.
const maxTokenBytes = 4096

// Token reads the bearer token from TokenFile: the file's content with the
// white space around it trimmed. It is "" without an error when no token
// file is set. An unreadable or empty file, or a token that is not one
// word of visible ASCII (RFC 6750's b64token is narrower still), is an
// error; no error quotes the file's content.
func (a Admin) Token() (string, error) {
	if a.TokenFile == "" {
		return "", nil
	}
	f, err := os.Open(a.TokenFile)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %v (relative paths are resolved against the config file's directory)", a.TokenFile, unwrapPathError(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", a.TokenFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("cannot read %s: %v", a.TokenFile, unwrapPathError(err))
	case len(data) > maxTokenBytes:
		return "", fmt.Errorf("%s is larger than %d bytes; is it the token file?", a.TokenFile, maxTokenBytes)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("%s is empty; write a token into it, e.g. openssl rand -hex 32 > %s", a.TokenFile, a.TokenFile)
	}
	if strings.IndexFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return "", fmt.Errorf("%s holds white space, control or non-ASCII characters inside the token; a bearer token is one word of visible ASCII, e.g. from openssl rand -hex 32", a.TokenFile)
	}
	return token, nil
}

// Fleet places this gateway among its peers so that subsets are balanced
// across the fleet (Ringsteady needs dense, stable instance indices).
type Fleet struct {
	Instance int `yaml:"instance"` // 0 ≤ instance < size
	Size     int `yaml:"size"`     // gateways in the fleet
	// Server is the host:port of a corput control plane that assigns the
	// position by node id (docs/control-plane.md): with it, instance and
	// size come from there only, and follow the fleet as it changes.
	Server string `yaml:"server"`
	// NodeID is the node id this gateway registers under with Server;
	// empty: the hostname (a pod's name).
	NodeID string `yaml:"node_id"`
	// TLS dials Server over TLS; nil: plaintext.
	TLS *XDSTLS `yaml:"tls"`
}

// Downstream bounds what clients may cost the gateway.
type Downstream struct {
	ReadHeaderTimeout time.Duration  `yaml:"read_header_timeout"`
	IdleTimeout       time.Duration  `yaml:"idle_timeout"`
	MaxHeaderBytes    int            `yaml:"max_header_bytes"`
	TrustedProxies    []netip.Prefix `yaml:"trusted_proxies"` // X-Forwarded-* kept only from these peers
	// FastPath serves simple cleartext HTTP/1.1 requests to HTTP/1.1
	// origins on corput's own byte-level loop (default true); false serves
	// every request through net/http.
	FastPath bool `yaml:"fast_path"`
	// BodyReadTimeout bounds the wait for each read of a client's request
	// body (additive; nginx's client_body_timeout): a client that sends
	// nothing for this long is answered 408 and its upstream request cut.
	BodyReadTimeout time.Duration `yaml:"body_read_timeout"`
	// UnderscoreHeaders is what a request field whose name has a '_'
	// meets: "drop" (the default, as nginx), "reject" (400) or "allow".
	// Whatever it is, a name that is a protected one once '_' is read as
	// '-' (h1.Disguised) is refused with 400.
	UnderscoreHeaders UnderscoreHeaders `yaml:"underscore_headers"`
	// ProxyProtocol, when set, reads a PROXY protocol header (v1 or v2)
	// on the connections of its from list; its address is the client's
	// everywhere (internal/proxyproto).
	ProxyProtocol *ProxyProtocol `yaml:"proxy_protocol"`
	// Addresses are the listener's address rules: a client outside them
	// gets 403 address_denied on every route.
	Addresses Addresses `yaml:"addresses"`
	// Forwarded adds the Forwarded field (RFC 7239) beside X-Forwarded-*
	// (additive, default false): a trusted proxy's is appended to,
	// anyone else's replaced.
	Forwarded bool `yaml:"forwarded"`
	// RequestID gives every request an id (additive; nil: none).
	RequestID *RequestID `yaml:"request_id"`
}

// ProxyProtocol is downstream.proxy_protocol.
type ProxyProtocol struct {
	// From are the load balancers: a connection from one must start with
	// a PROXY header.
	From []netip.Prefix `yaml:"from"`
	// Other is what a connection from elsewhere gets: ProxyOtherRefuse
	// (closed at once, the default) or ProxyOtherPlain (served as it is,
	// with its own address).
	Other string `yaml:"other"`
}

// The values of downstream.proxy_protocol.other.
const (
	ProxyOtherRefuse = "refuse"
	ProxyOtherPlain  = "plain"
)

// Addresses are allow and deny lists of client address prefixes
// (downstream.addresses, routes[].addresses). A client in deny is refused;
// when allow is not empty, a client outside it is refused too.
type Addresses struct {
	Allow []netip.Prefix `yaml:"allow"`
	Deny  []netip.Prefix `yaml:"deny"`
}

// Empty reports whether there is no rule.
func (a Addresses) Empty() bool { return len(a.Allow) == 0 && len(a.Deny) == 0 }

// RateLimit is routes[].rate_limit: a token bucket per key.
type RateLimit struct {
	// RequestsPerSecond is the bucket's refill rate, at least 1.
	RequestsPerSecond float64 `yaml:"requests_per_second"`
	// Burst is the bucket's size: the requests let through at once after
	// a quiet time. Default: RequestsPerSecond, rounded up.
	Burst int `yaml:"burst"`
	// Key is whose bucket a request takes from: RateKeyNone (one bucket
	// for the route, the default), RateKeyClientAddress, or
	// "header:NAME" (the value of that request header; a request without
	// it takes from the bucket of the empty value).
	Key string `yaml:"key"`
	// MaxKeys bounds the keyed buckets (default 65536): beyond it the
	// least recently used key of a set gives its place up.
	MaxKeys int `yaml:"max_keys"`
}

// The values of routes[].rate_limit.key (besides "header:NAME").
const (
	RateKeyNone          = "none"
	RateKeyClientAddress = "client_address"
	RateKeyHeaderPrefix  = "header:"
)

// RedirectHTTP is redirect_http: a cleartext listener that answers every
// request with a redirect to the same host and target over HTTPS.
type RedirectHTTP struct {
	Listen string `yaml:"listen"`
	// Status is the redirect's status: 301, 302, 307 or 308 (the default:
	// permanent, and the method and body are kept).
	Status int `yaml:"status"`
	// HTTPSPort, when not 443, is written into the Location's authority.
	HTTPSPort int `yaml:"https_port"`
}

// UnderscoreHeaders is downstream.underscore_headers.
type UnderscoreHeaders string

// The downstream.underscore_headers actions.
const (
	UnderscoreDrop   UnderscoreHeaders = "drop"   // not forwarded
	UnderscoreReject UnderscoreHeaders = "reject" // the request is answered 400
	UnderscoreAllow  UnderscoreHeaders = "allow"  // forwarded as it is
)

// Shutdown is the graceful drain on SIGTERM/SIGINT.
type Shutdown struct {
	DrainTimeout time.Duration `yaml:"drain_timeout"`
}

// AccessLog is the access log: one line per (sampled) request, written off
// the request path (internal/accesslog).
type AccessLog struct {
	// Path is "stdout" or a file, appended to (relative: to the config
	// file's directory); SIGUSR1 reopens it.
	Path   string          `yaml:"path"`
	Format AccessLogFormat `yaml:"format"`
	Sample float64         `yaml:"sample"` // the share of requests logged, in (0, 1]
}

// AccessLogStdout is the access_log.path that writes to standard output.
const AccessLogStdout = "stdout"

// AccessLogFormat is the access log's line format.
type AccessLogFormat string

// The access log formats.
const (
	AccessLogJSON     AccessLogFormat = "json"     // one JSON object per line
	AccessLogCombined AccessLogFormat = "combined" // Apache's combined format, corput's fields appended
)

// Route sends requests for a host and path prefix to an origin. The
// longest matching prefix wins; an exact host beats "*.suffix", which beats
// "" (any host).
type Route struct {
	// Name identifies the route: in per-route settings, metrics and logs.
	// Optional; RouteName derives the default from host and path prefix.
	Name       string `yaml:"name"`
	Host       string `yaml:"host"`        // "", "example.com" or "*.example.com"; lower-cased by Parse
	PathPrefix string `yaml:"path_prefix"` // starts with "/"; default "/"
	// PathExact, when set, is the one path the route matches (instead of
	// path_prefix; additive).
	PathExact string `yaml:"path_exact"`
	// PathRegex, when set, is an RE2 regular expression the whole path
	// must match (instead of path_prefix; additive). CompileMatch compiles
	// it.
	PathRegex string `yaml:"path_regex"`
	// Methods, when set, are the request methods the route matches
	// (additive).
	Methods []string `yaml:"methods"`
	// Headers and Query are conditions on the request's header fields and
	// query parameters, all of which must hold (additive).
	Headers []HeaderMatch `yaml:"headers"`
	Query   []QueryMatch  `yaml:"query"`
	Origin  string        `yaml:"origin"` // name of an entry in origins; "" with split, redirect or answer
	// Split, instead of Origin, shares the route's requests between
	// origins by weight (additive; split.go).
	Split []SplitTarget `yaml:"split"`
	// SplitHashOn makes the split sticky (additive): "header NAME",
	// "cookie NAME" or "source_ip", as balancer.hash_on (ParseHashOn); a
	// request with the key lands on one target while the weights are
	// unchanged. "": every request is drawn at random.
	SplitHashOn string `yaml:"split_hash_on"`
	// Redirect, when set, answers the route's requests with a redirect
	// instead of sending them to an origin (additive).
	Redirect *RouteRedirect `yaml:"redirect"`
	// Answer, when set, answers the route's requests with a fixed answer
	// instead of sending them to an origin (additive). A route has
	// exactly one of origin, split, redirect and answer.
	Answer *RouteAnswer `yaml:"answer"`
	// Class names the workload class (workload.classes[].name) of every
	// request of the route: its cost is what the balancer weighs
	// (additive); "": the workload's match rules decide.
	Class string `yaml:"class"`
	// Priority is the route's rank when the SLO guard sheds (additive):
	// PriorityLow routes are shed first (503 slo_shed); "" is
	// PriorityNormal, never shed by the guard.
	Priority string `yaml:"priority"`
	// RateLimit, when set, limits the route's requests (429 rate_limited
	// over it).
	RateLimit *RateLimit `yaml:"rate_limit"`
	// Addresses are the route's address rules (403 address_denied),
	// after the listener's.
	Addresses Addresses `yaml:"addresses"`
	// Timeouts override the origin's time limits for the route's requests
	// (additive): a key left out, or 0, takes the origin's.
	Timeouts *RouteTimeouts `yaml:"timeouts"`
	// MaxRequestBodyBytes bounds a request body (additive): a longer one
	// is answered 413 and not forwarded, or cut mid-way. 0: unlimited.
	MaxRequestBodyBytes int `yaml:"max_request_body_bytes"`
	// Retry is the route's own retry rules (additive): the keys it writes,
	// the route's origin's for the others; nil: the origin's. Parse fills
	// the keys it leaves out (RouteRetry).
	Retry *Retry `yaml:"retry"`
	// Mirror, when set, copies a sampled share of the route's requests to
	// a shadow origin (additive).
	Mirror *Mirror `yaml:"mirror"`
	// Rewrite changes the path and Host the origin gets (additive; nil:
	// none); RequestHeaders and ResponseHeaders edit the fields each way
	// (additive). internal/config/edits.go.
	Rewrite         *Rewrite     `yaml:"rewrite"`
	RequestHeaders  *HeaderEdits `yaml:"request_headers"`
	ResponseHeaders *HeaderEdits `yaml:"response_headers"`
}

// HeaderMatch is one of routes[].headers: a condition on the request's
// header fields of a name.
type HeaderMatch struct {
	Name  string `yaml:"name"`
	Type  string `yaml:"type"`  // MatchExact (""), MatchPresent, MatchAbsent or MatchRegex
	Value string `yaml:"value"` // the value (exact), or the RE2 expression its whole value matches (regex)
}

// QueryMatch is one of routes[].query: a condition on the request's query
// parameters of a name.
type QueryMatch struct {
	Name  string `yaml:"name"`
	Type  string `yaml:"type"`  // MatchExact ("") or MatchPresent
	Value string `yaml:"value"` // exact: the parameter's percent-decoded value
}

// The types of routes[].headers[] and routes[].query[] matches.
const (
	MatchExact   = "exact"
	MatchPresent = "present"
	MatchAbsent  = "absent"
	MatchRegex   = "regex"
)

// CompileMatch compiles a route's regular expression (path_regex, a
// headers regex), anchored: it must match the whole path or value.
func CompileMatch(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// RouteRetry is the retry rules of route i: its own (routes[].retry), or
// its origin's.
func (c *Config) RouteRetry(i int) Retry {
	rt := &c.Routes[i]
	if rt.Retry != nil {
		return *rt.Retry
	}
	if names := rt.Origins(); len(names) > 0 {
		if o, ok := c.Origin(names[0]); ok {
			return o.Retry
		}
	}
	return DefaultOrigin().Retry
}

// RouteTimeouts are a route's overrides of its origin's Timeouts; zero
// takes the origin's. The dial (connect) is the origin's pools' alone.
type RouteTimeouts struct {
	ResponseHeader time.Duration `yaml:"response_header"`
	StreamIdle     time.Duration `yaml:"stream_idle"`
	Request        time.Duration `yaml:"request"`
	GRPCMax        time.Duration `yaml:"grpc_max"`
}

// RouteName is the route's name: routes[].name, or when it is empty one
// derived from its host and path ("any" for no host), such as
// "api.example.com/pay" or "any/" (a prefix), "any=/health" (path_exact)
// or "any~/v[0-9]+" (path_regex).
func (r *Route) RouteName() string {
	if r.Name != "" {
		return r.Name
	}
	h := r.Host
	if h == "" {
		h = "any"
	}
	switch {
	case r.PathExact != "":
		return h + "=" + r.PathExact
	case r.PathRegex != "":
		return h + "~" + r.PathRegex
	}
	return h + r.PathPrefix
}

// Route priorities (routes[].priority).
const (
	PriorityNormal = "normal"
	PriorityLow    = "low"
)

// Origin is a named cluster of endpoints and every policy that applies to
// it.
type Origin struct {
	Name                  string        `yaml:"name"`
	Protocol              Protocol      `yaml:"protocol"`
	TLS                   *ClientTLS    `yaml:"tls"` // nil: plaintext upstream
	Endpoints             []Endpoint    `yaml:"endpoints"`
	Discovery             Discovery     `yaml:"discovery"`
	Debounce              time.Duration `yaml:"debounce"` // membership changes applied at most this often
	Subset                Subset        `yaml:"subset"`
	Balancer              Balancer      `yaml:"balancer"`
	Pool                  Pool          `yaml:"pool"`
	SlowStart             SlowStart     `yaml:"slow_start"`
	Outlier               Outlier       `yaml:"outlier"`
	PanicThresholdPercent int           `yaml:"panic_threshold_percent"` // below this share of healthy endpoints, route over all
	Zone                  Zone          `yaml:"zone"`
	Retry                 Retry         `yaml:"retry"`
	Timeouts              Timeouts      `yaml:"timeouts"`
	SLO                   *SLO          `yaml:"slo"` // nil: no latency target declared
	// HealthCheck probes the endpoints this gateway uses (additive; nil:
	// passive detection only). See package health.
	HealthCheck *HealthCheck `yaml:"health_check"`
}

// HealthCheck is an origin's active health check: a probe per endpoint
// of the gateway's subsets every Interval (+ up to Jitter), skipped
// while live traffic proves the endpoint healthy (package health).
type HealthCheck struct {
	Path   string `yaml:"path"`   // the probe's target; default /healthz
	Method string `yaml:"method"` // GET or HEAD; default GET
	// ExpectedStatuses are the statuses that pass; empty: 200–399.
	ExpectedStatuses []int         `yaml:"expected_statuses"`
	Interval         time.Duration `yaml:"interval"` // between probes of one endpoint; default 5s
	Jitter           time.Duration `yaml:"jitter"`   // a random extra delay up to this, per probe; default 500ms
	Timeout          time.Duration `yaml:"timeout"`  // a probe without an answer by then fails; default 1s
	// UnhealthyThreshold failed probes in a row mark an endpoint
	// unhealthy; HealthyThreshold passing ones mark it healthy again.
	UnhealthyThreshold int `yaml:"unhealthy_threshold"` // default 3
	HealthyThreshold   int `yaml:"healthy_threshold"`   // default 2
	// GRPC, when set, probes with the gRPC health protocol
	// (grpc.health.v1.Health/Check) instead of an HTTP request.
	GRPC *GRPCHealthCheck `yaml:"grpc"`
}

// GRPCHealthCheck is the gRPC variant of a health check.
type GRPCHealthCheck struct {
	Service string `yaml:"service"` // the service asked about; "" is the server's overall health
}

// DefaultHealthCheck is a health_check block with every key at its
// default.
func DefaultHealthCheck() HealthCheck {
	return HealthCheck{Path: "/healthz", Method: "GET", Interval: 5 * time.Second, Jitter: 500 * time.Millisecond,
		Timeout: time.Second, UnhealthyThreshold: 3, HealthyThreshold: 2}
}

func (h *HealthCheck) setDefaults() { *h = DefaultHealthCheck() }

// Passes reports whether a probe's status passes: one of
// ExpectedStatuses, or 200–399 when it lists none.
func (h *HealthCheck) Passes(status int) bool {
	if len(h.ExpectedStatuses) == 0 {
		return status >= 200 && status < 400
	}
	return slices.Contains(h.ExpectedStatuses, status)
}

// Protocol is the upstream wire protocol.
type Protocol string

// The upstream protocols.
const (
	ProtocolAuto Protocol = "auto" // over TLS: ALPN picks h2 or h1; plaintext: h1
	ProtocolH1   Protocol = "h1"
	ProtocolH2   Protocol = "h2"  // HTTP/2 over TLS
	ProtocolH2C  Protocol = "h2c" // HTTP/2 over cleartext (prior knowledge)
)

// ClientTLS is TLS towards an origin: server verification and optional mTLS.
type ClientTLS struct {
	CA                 string `yaml:"ca"`          // PEM CAs; empty: system roots
	Cert               string `yaml:"cert"`        // client certificate for mTLS
	Key                string `yaml:"key"`         // its key
	ServerName         string `yaml:"server_name"` // SNI and verification name; empty: the endpoint host
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// XDSTLS is TLS towards an xDS server (discovery.tls, fleet.tls): the
// origins' tls block without insecure_skip_verify, as a gateway always
// verifies the control plane.
type XDSTLS struct {
	CA         string `yaml:"ca"`          // PEM CAs that verify the server; empty: system roots
	Cert       string `yaml:"cert"`        // client certificate for mTLS
	Key        string `yaml:"key"`         // its key
	ServerName string `yaml:"server_name"` // the name verified (and SNI); empty: the server's host
}

// Files is the block as the xDS client takes it, nil for nil: its files
// are read again for every connection, so a rotation needs no reload.
func (t *XDSTLS) Files() *tlsfiles.Files {
	if t == nil {
		return nil
	}
	return &tlsfiles.Files{CA: t.CA, Cert: t.Cert, Key: t.Key, ServerName: t.ServerName}
}

// Endpoint is one statically configured member of an origin.
type Endpoint struct {
	Address string `yaml:"address"` // host:port
	Zone    string `yaml:"zone"`
	Weight  int    `yaml:"weight"` // ≥ 1; default 1
}

// Discovery is where an origin's membership comes from.
type Discovery struct {
	Type    DiscoveryType `yaml:"type"`
	Path    string        `yaml:"path"`    // file: a watched YAML list of endpoints
	Server  string        `yaml:"server"`  // xds: host:port of the ADS/EDS server
	Cluster string        `yaml:"cluster"` // xds: EDS cluster name
	NodeID  string        `yaml:"node_id"` // xds: node id sent to the server; empty: the gateway picks one
	// TLS dials the xds server over TLS; nil: plaintext. Origins naming
	// one server share one stream, so they give the same block.
	TLS *XDSTLS `yaml:"tls"`
}

// DiscoveryType names a membership source.
type DiscoveryType string

// The membership sources.
const (
	DiscoveryStatic DiscoveryType = "static"
	DiscoveryFile   DiscoveryType = "file"
	DiscoveryXDS    DiscoveryType = "xds"
)

// Subset chooses which endpoints each loop uses.
type Subset struct {
	Algorithm SubsetAlgorithm `yaml:"algorithm"`
	Size      int             `yaml:"size"`     // 0 = automatic, between MinSize and MaxSize
	MinSize   int             `yaml:"min_size"` // automatic sizing bounds (Zuul: ideal 25–50)
	MaxSize   int             `yaml:"max_size"`
}

// SubsetAlgorithm names a subsetting algorithm.
type SubsetAlgorithm string

// The subsetting algorithms.
const (
	SubsetRingsteady SubsetAlgorithm = "ringsteady"
	SubsetNone       SubsetAlgorithm = "none"
	SubsetHashmod    SubsetAlgorithm = "hashmod"
	SubsetRandom     SubsetAlgorithm = "random"
	SubsetRendezvous SubsetAlgorithm = "rendezvous"
)

// Balancer picks an endpoint within the healthy subset.
type Balancer struct {
	Policy     Policy        `yaml:"policy"`
	Choices    int           `yaml:"choices"`     // endpoints sampled per pick (p2c, least_request, peak_ewma, least_work)
	EWMADecay  time.Duration `yaml:"ewma_decay"`  // Peak EWMA time constant τ
	DefaultRTT time.Duration `yaml:"default_rtt"` // Peak EWMA estimate of an endpoint not yet measured
	// TieRatio: peak_ewma compares two candidates by latency only when
	// their mean latencies differ by at least this factor; closer than
	// that the difference is noise, and the one with fewer requests in
	// flight wins (additive). 1 compares latency always (the plain Peak
	// EWMA).
	TieRatio float64 `yaml:"tie_ratio"`

	// The sticky policies' keys (maglev, ring_hash; additive).

	// HashOn is where a request's key comes from: "header NAME",
	// "cookie NAME" or "source_ip" (ParseHashOn).
	HashOn string `yaml:"hash_on"`
	// BalanceFactor is c of bounded load: an endpoint takes a new request
	// only while its requests in flight stay under ⌈c·(m+1)/n⌉.
	BalanceFactor float64 `yaml:"balance_factor"`
	// Fallback is the policy of a request without a key.
	Fallback Policy `yaml:"fallback"`
	// TableSize is maglev's lookup table size M, a prime; at least 100 ×
	// the endpoints (a larger membership takes the next prime above
	// 100 × N).
	TableSize int `yaml:"table_size"`
	// Cookie, with hash_on "cookie NAME": a request without the cookie
	// gets a new random value as its key, and its response sets it
	// (additive; nil: such a request takes the fallback).
	Cookie *StickyCookie `yaml:"cookie"`
}

// StickyCookie is the cookie a sticky origin sets when a request has none.
type StickyCookie struct {
	TTL  time.Duration `yaml:"ttl"`  // Max-Age; 0: a session cookie
	Path string        `yaml:"path"` // "": /
}

// Sticky reports whether the policy routes a key to the same endpoint
// (maglev, ring_hash): its table spans the whole origin, not a loop's
// subset.
func (b *Balancer) Sticky() bool { return b.Policy.Sticky() }

// Sticky reports whether p is maglev or ring_hash.
func (p Policy) Sticky() bool { return p == PolicyMaglev || p == PolicyRingHash }

// Policy names a load-balancing policy.
type Policy string

// The load-balancing policies.
const (
	PolicyRoundRobin   Policy = "round_robin"
	PolicyRandom       Policy = "random"
	PolicyP2C          Policy = "p2c"
	PolicyLeastRequest Policy = "least_request"
	PolicyPeakEWMA     Policy = "peak_ewma"
	PolicyLeastWork    Policy = "least_work" // cost-aware least request (additive; the default, docs/decisions.md)
	PolicyMaglev       Policy = "maglev"     // consistent hashing by lookup table, bounded load (additive)
	PolicyRingHash     Policy = "ring_hash"  // consistent hashing by ring (ketama), bounded load (additive)
)

// HashKind is where a sticky policy's key comes from.
type HashKind uint8

// The key sources of hash_on.
const (
	HashNone     HashKind = iota // no key: every request takes the fallback
	HashHeader                   // the value of a request header
	HashCookie                   // the value of a cookie
	HashSourceIP                 // the client's address (X-Forwarded-For's from a trusted proxy)
)

// HashOn is a parsed balancer.hash_on.
type HashOn struct {
	Kind HashKind
	Name string // the header (lower case) or cookie (as written) name
}

// ParseHashOn parses balancer.hash_on: "header NAME", "cookie NAME" or
// "source_ip".
func ParseHashOn(s string) (HashOn, error) {
	f := strings.Fields(s)
	switch {
	case len(f) == 1 && f[0] == "source_ip":
		return HashOn{Kind: HashSourceIP}, nil
	case len(f) == 2 && f[0] == "header" && httpguts.ValidHeaderFieldName(f[1]):
		return HashOn{Kind: HashHeader, Name: strings.ToLower(f[1])}, nil
	case len(f) == 2 && f[0] == "cookie" && httpguts.ValidHeaderFieldName(f[1]):
		return HashOn{Kind: HashCookie, Name: f[1]}, nil
	}
	return HashOn{}, fmt.Errorf("%q is not a key source; write \"header NAME\", \"cookie NAME\" or \"source_ip\"", s)
}

// Pool bounds and ages the connections of one (endpoint, loop).
type Pool struct {
	MaxConnections int           `yaml:"max_connections"` // per (endpoint, loop)
	MaxPending     PendingLimit  `yaml:"max_pending"`     // per endpoint; 1..50
	AcquireTimeout time.Duration `yaml:"acquire_timeout"`
	OverCap        OverCapPolicy `yaml:"over_cap"`
	IdleTimeout    time.Duration `yaml:"idle_timeout"` // 0: idle connections are never evicted
	MaxLifetime    time.Duration `yaml:"max_lifetime"` // recycled with ±10 % jitter; 0: never
	Keepalive      time.Duration `yaml:"keepalive"`    // probe interval on idle connections; 0: off
	Prewarm        int           `yaml:"prewarm"`      // connections opened per (endpoint, loop) before ready
	// MaxResponseHeaderBytes bounds an origin's response head (status
	// line and fields); a larger one gets the client a 502
	// upstream_header_too_large and closes the connection (additive).
	MaxResponseHeaderBytes int `yaml:"max_response_header_bytes"`
}

// DefaultTableSize is balancer.table_size's default: maglev's lookup
// table size M, the prime 65,537 (Maglev's paper, and Envoy's default).
const DefaultTableSize = 65537

// DefaultMaxResponseHeaderBytes is pool.max_response_header_bytes' default,
// 64 KiB (Envoy's limit is 60 KiB).
const DefaultMaxResponseHeaderBytes = 64 << 10

// PendingLimit is a bound on pending requests. It is its own type only so
// that the decoder can turn "unlimited", "inf", "-1" or null into
// ERR_UNBOUNDED_QUEUE_REJECTED instead of a type error.
type PendingLimit int

// OverCapPolicy says what a request does when its pool is at
// max_connections.
type OverCapPolicy string

// The over-cap policies.
const (
	OverCapQueue     OverCapPolicy = "queue"     // wait up to acquire_timeout
	OverCapTemporary OverCapPolicy = "temporary" // open a one-shot connection
	OverCapReject    OverCapPolicy = "reject"    // 503 at once
)

// SlowStart ramps a new or newly healthy endpoint's weight:
// weight × max(min_weight_percent, (t/window)^(1/aggression)).
type SlowStart struct {
	Window           time.Duration `yaml:"window"` // 0 disables slow start
	MinWeightPercent int           `yaml:"min_weight_percent"`
	Aggression       float64       `yaml:"aggression"`
}

// Outlier is passive outlier detection on consecutive 5xx responses.
type Outlier struct {
	Consecutive5xx     int           `yaml:"consecutive_5xx"`
	BaseEjectionTime   time.Duration `yaml:"base_ejection_time"` // × times ejected
	MaxEjectionTime    time.Duration `yaml:"max_ejection_time"`
	MaxEjectionPercent int           `yaml:"max_ejection_percent"`
}

// Zone is zone-aware routing.
type Zone struct {
	Local        string `yaml:"local"`         // this gateway's zone; empty: no zone preference
	LocalPercent int    `yaml:"local_percent"` // share of requests kept in the local zone
}

// Retry sends a request again, on another endpoint: one that sent nothing
// whatever its method, one that was sent when it may be replayed (an
// idempotent method, or the idempotency header). An origin's retry is
// every route's to it but a route's own (routes[].retry).
type Retry struct {
	Attempts      int       `yaml:"attempts"`       // retries after the first try; 0: none
	BudgetPercent int       `yaml:"budget_percent"` // retries in flight ≤ this share of active requests
	On            []RetryOn `yaml:"on"`
	// PerTryTimeout bounds each attempt up to its response head (additive);
	// an attempt past it is retried like a connect failure when the
	// request can go again. 0: none (response_header alone).
	PerTryTimeout time.Duration `yaml:"per_try_timeout"`
	// Backoff is the wait before each budgeted retry, with full jitter.
	Backoff Backoff `yaml:"backoff"`
	// IdempotencyHeader names a request field (e.g. Idempotency-Key) that
	// makes a request of any method replayable once sent: the origin
	// deduplicates by it. "": none.
	IdempotencyHeader string `yaml:"idempotency_header"`
	// ReplayBuffer bounds the copy of a request body kept to send it again,
	// in bytes; a body over it is not replayed. 0 keeps none.
	ReplayBuffer int `yaml:"replay_buffer"`
}

// Backoff is retry.backoff: the n-th budgeted retry waits a time drawn
// uniformly from [0, min(Max, Base×2ⁿ⁻¹)] (full jitter). A zero Base
// waits nothing.
type Backoff struct {
	Base time.Duration `yaml:"base"`
	Max  time.Duration `yaml:"max"`
}

// Limits are gateway-wide bounds (additive).
type Limits struct {
	// ReplayBuffersBytes bounds all requests' replay buffers together
	// (retry.replay_buffer each): a body that would take the total over it
	// is not kept, so not replayed (INV-LB-05: no unbounded buffer).
	ReplayBuffersBytes int `yaml:"replay_buffers_bytes"`
}

// RetryOn names a condition that makes a request retryable.
type RetryOn string

// The retry conditions.
const (
	RetryConnectFailure RetryOn = "connect-failure"
	RetryRefusedStream  RetryOn = "refused-stream"
	Retry503            RetryOn = "503"
	Retry502            RetryOn = "502"
	Retry504            RetryOn = "504"
	RetryGatewayError   RetryOn = "gateway-error" // 502, 503 and 504
)

// Retry defaults and bounds.
const (
	DefaultReplayBuffer       = 64 << 10 // retry.replay_buffer
	MaxReplayBuffer           = 16 << 20 // the most one request may keep
	DefaultReplayBuffersBytes = 64 << 20 // limits.replay_buffers_bytes
	MaxReplayBuffersBytes     = 16 << 30
)

// Timeouts towards the origin (docs/gateway.md, "Time limits").
type Timeouts struct {
	Connect time.Duration `yaml:"connect"`
	// Request bounds the whole exchange, headers and body; 0: none (the
	// default: response_header and stream_idle bound a hung origin).
	Request time.Duration `yaml:"request"`
	// ResponseHeader bounds the wait from the request sent to the
	// response head (additive).
	ResponseHeader time.Duration `yaml:"response_header"`
	// StreamIdle ends an exchange on which no byte moved either way for
	// this long (additive); 0: none.
	StreamIdle time.Duration `yaml:"stream_idle"`
	// GRPCMax caps the deadline a request's grpc-timeout asks for
	// (additive); 0: the client's grpc-timeout is honoured as it is.
	GRPCMax time.Duration `yaml:"grpc_max"`
}

// SLO is a latency target. Percentiles are required; an average alone is
// rejected (INV-LB-04). Zero means "not set".
type SLO struct {
	P50     time.Duration `yaml:"p50"`
	P90     time.Duration `yaml:"p90"`
	P95     time.Duration `yaml:"p95"`
	P99     time.Duration `yaml:"p99"`
	Max     time.Duration `yaml:"max"`
	Average time.Duration `yaml:"average"`
}

// Default returns the configuration a file with no keys would have, before
// validation (it has no routes or origins, which Validate requires).
func Default() *Config {
	return &Config{
		Listen: "127.0.0.1:8080",
		Admin:  Admin{Listen: "127.0.0.1:9901"},
		Fleet:  Fleet{Instance: 0, Size: 1},
		Downstream: Downstream{
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    65536,
			FastPath:          true,
			BodyReadTimeout:   DefaultBodyReadTimeout,
			UnderscoreHeaders: UnderscoreDrop,
		},
		Shutdown: Shutdown{DrainTimeout: 20 * time.Second},
		Limits:   Limits{ReplayBuffersBytes: DefaultReplayBuffersBytes},
	}
}

// DefaultOrigin returns an origin with every key at the seeds' default and
// no name or endpoints.
func DefaultOrigin() Origin {
	return Origin{
		Protocol:  ProtocolAuto,
		Discovery: Discovery{Type: DiscoveryStatic},
		Debounce:  2 * time.Second,
		Subset:    Subset{Algorithm: SubsetRingsteady, MinSize: 25, MaxSize: 50},
		Balancer: Balancer{
			Policy:     PolicyLeastWork,
			Choices:    2,
			EWMADecay:  10 * time.Second,
			DefaultRTT: 30 * time.Millisecond,
			TieRatio:   1.5,

			BalanceFactor: 1.25,
			Fallback:      PolicyPeakEWMA,
			TableSize:     DefaultTableSize,
		},
		Pool: Pool{
			MaxConnections: 64,
			MaxPending:     MaxPendingCeiling,
			AcquireTimeout: 100 * time.Millisecond,
			OverCap:        OverCapQueue,
			IdleTimeout:    60 * time.Second,
			MaxLifetime:    10 * time.Minute,
			Keepalive:      15 * time.Second,
			Prewarm:        1,

			MaxResponseHeaderBytes: DefaultMaxResponseHeaderBytes,
		},
		SlowStart: SlowStart{Window: 60 * time.Second, MinWeightPercent: 10, Aggression: 1.0},
		Outlier: Outlier{
			Consecutive5xx:     3,
			BaseEjectionTime:   30 * time.Second,
			MaxEjectionTime:    300 * time.Second,
			MaxEjectionPercent: 20,
		},
		PanicThresholdPercent: 80,
		Zone:                  Zone{LocalPercent: 85},
		Retry: Retry{
			Attempts:      1,
			BudgetPercent: 20,
			On:            []RetryOn{RetryConnectFailure, RetryRefusedStream, Retry503},
			Backoff:       Backoff{Base: 25 * time.Millisecond, Max: 250 * time.Millisecond},
			ReplayBuffer:  DefaultReplayBuffer,
		},
		Timeouts: Timeouts{Connect: time.Second, ResponseHeader: 15 * time.Second, StreamIdle: DefaultStreamIdle},
	}
}

// The time limits' defaults (docs/decisions.md, "Time limits and request
// bodies").
const (
	DefaultStreamIdle      = 60 * time.Second // nginx's proxy_read_timeout
	DefaultBodyReadTimeout = 60 * time.Second // nginx's client_body_timeout
)

// setDefaults is called by the decoder on every element of origins,
// routes and endpoints, and on a new access_log block, before the
// element's keys are decoded onto it.
func (o *Origin) setDefaults()    { *o = DefaultOrigin() }
func (r *Route) setDefaults()     { r.PathPrefix = "/" }
func (e *Endpoint) setDefaults()  { e.Weight = 1 }
func (a *AccessLog) setDefaults() { *a = AccessLog{Format: AccessLogJSON, Sample: 1} }

// LoopCount is the number of loops to run: Loops, or when 0 one per
// processor the Go runtime was given at start (GOMAXPROCS then: the CPUs,
// the container's CPU limit, or the GOMAXPROCS variable) — not the
// processors `corput serve` may add later (internal/serve, procsPerCPU).
func (c *Config) LoopCount() int {
	if c.Loops > 0 {
		return c.Loops
	}
	return startProcs
}

// startProcs is GOMAXPROCS as the process started.
var startProcs = runtime.GOMAXPROCS(0)

// Origin returns the origin named name.
func (c *Config) Origin(name string) (*Origin, bool) {
	for i := range c.Origins {
		if c.Origins[i].Name == name {
			return &c.Origins[i], true
		}
	}
	return nil, false
}

// Warnings are the non-fatal diagnostics found by Parse (settings that
// depart from a seed's invariant but are legitimate in an experiment).
func (c *Config) Warnings() Diagnostics { return c.warnings }

// File is the name the config was parsed under.
func (c *Config) File() string { return c.file }

// Written reports whether the file sets key (a dotted path such as
// "fleet.instance"), as opposed to leaving its default: a setting the file
// does not write can come from elsewhere (flags, environment). False for a
// configuration not parsed from a file.
func (c *Config) Written(key string) bool {
	_, ok := c.lines[key]
	return ok
}

// Files are the files the configuration reads when it is applied: its own
// file, the downstream certificate, key and client CA, and the origins'
// CAs, client certificates and keys — what `corput serve --watch`
// watches. (Discovery files are followed by their own source; the xDS
// clients' TLS files, discovery.tls and fleet.tls, are read again for
// every connection; the admin token is read once, at start.)
func (c *Config) Files() []string {
	var out []string
	add := func(fs ...string) {
		for _, f := range fs {
			if f != "" {
				out = append(out, f)
			}
		}
	}
	add(c.file)
	if c.TLS != nil {
		add(c.TLS.Files()...)
	}
	for _, o := range c.Origins {
		if o.TLS != nil {
			add(o.TLS.CA, o.TLS.Cert, o.TLS.Key)
		}
	}
	return out
}
