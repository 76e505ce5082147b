package config

import (
	"reflect"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"
)

// Tracing exports OpenTelemetry spans over OTLP (additive; internal/tracing,
// docs/tracing.md). nil, the default, traces nothing, and the W3C trace
// context headers then pass through unchanged.
type Tracing struct {
	Endpoint string          `yaml:"endpoint"` // the OTLP receiver's host:port
	Protocol TracingProtocol `yaml:"protocol"` // grpc (default) or http (protobuf over HTTP, POST /v1/traces)
	// SampleRatio is the share of new traces sampled, in [0, 1]; a
	// trusted peer's traceparent decides for the traces it continues.
	SampleRatio float64 `yaml:"sample_ratio"`
	// Headers are sent with every export (an API key, a tenant); their
	// values are secrets: GET /admin/config shows none of them.
	Headers Headers `yaml:"headers" secret:"true"`
	// TLS, when set, exports over TLS (server verification, optional
	// client certificate); nil exports in cleartext.
	TLS *ClientTLS `yaml:"tls"`
}

// Headers are HTTP header fields by name.
type Headers map[string]string

// TracingProtocol is the OTLP transport.
type TracingProtocol string

// The OTLP transports.
const (
	TracingGRPC TracingProtocol = "grpc"
	TracingHTTP TracingProtocol = "http"
)

func (t *Tracing) setDefaults() { *t = Tracing{Protocol: TracingGRPC, SampleRatio: 0.01} }

func checkTracing(r *reporter, p string, t *Tracing) {
	checkAddr(r, p+".endpoint", t.Endpoint, addrDial)
	checkEnum(r, p+".protocol", t.Protocol, TracingGRPC, TracingHTTP)
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		r.errorf(p+".sample_ratio", "%v is outside [0, 1]: the share of new traces sampled; 0.01 (one in a hundred) is the default, 1.0 traces every request", t.SampleRatio)
	}
	for name, value := range t.Headers {
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			r.errorf(p+".headers", "%q is not a header name; use letters, digits and -, e.g. Authorization", name)
		case !httpguts.ValidHeaderFieldValue(value):
			r.errorf(p+".headers."+name, "the value holds a control character; write it on one line") // the value is a secret: not quoted
		}
	}
	if t.TLS != nil {
		checkClientTLS(r, p+".tls", t.TLS, "the receiver's certificate is not verified; anyone on the path can read the spans and the export headers. Set tls.ca instead")
	}
}

// decodeNode reads a mapping of header names to values.
func (h *Headers) decodeNode(d *decoder, n *yaml.Node, path string) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.mismatchf(n, path, "want a mapping of header names to values, e.g. {Authorization: Bearer TOKEN}, got %s", describe(n))
		return
	}
	out := Headers{}
	for _, kv := range d.entries(n, path) {
		kp := joinKey(path, kv[0].Value)
		d.lines[kp] = kv[0].Line
		var v string
		d.decode(kv[1], reflect.ValueOf(&v).Elem(), kp)
		out[kv[0].Value] = v
	}
	*h = out
}
