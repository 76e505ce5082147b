// Package receiver is an OTLP trace receiver on loopback, for tests and
// benchmarks: the collector's trace service over gRPC
// (opentelemetry.proto.collector.trace.v1.TraceService/Export) and over
// HTTP (POST /v1/traces, protobuf), built on go.opentelemetry.io/proto/otlp.
// It keeps every span it is sent, and the headers each export came with.
// Blackhole is the other kind of receiver: one that accepts connections
// and never reads from them; Down is the address of one that is down.
//
// Invariants: Close stops both servers and waits for their goroutines;
// Spans returns copies, in arrival order.
package receiver

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, its ids in hex.
type Span struct {
	TraceID, SpanID, ParentID string // ParentID "" for a root
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Attrs                     map[string]string // values as text
	Error                     bool              // status ERROR
	Service                   string            // the resource's service.name
	Instance                  string            // the resource's service.instance.id ("" for none)
	Protocol                  string            // "grpc" or "http": how it arrived
}

// Receiver serves OTLP on two loopback listeners, one per protocol.
type Receiver struct {
	grpcLn, httpLn net.Listener
	gs             *grpc.Server
	hs             *http.Server
	wg             sync.WaitGroup

	mu       sync.Mutex // guards following
	spans    []Span
	headers  []http.Header // one per export, names in lower case
	rejected int64         // SetPartial's: each answer says so many spans were rejected
}

// Start serves a Receiver on 127.0.0.1 ports.
func Start() (*Receiver, error) { return Listen("127.0.0.1:0", "127.0.0.1:0") }

// Listen serves a Receiver on the given addresses (gRPC, HTTP): one that
// comes back on the address a Blackhole or a closed port had.
func Listen(grpcAddr, httpAddr string) (*Receiver, error) {
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return nil, err
	}
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		gl.Close()
		return nil, err
	}
	r := &Receiver{grpcLn: gl, httpLn: hl, gs: grpc.NewServer()}
	collectorpb.RegisterTraceServiceServer(r.gs, traceService{r: r})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	r.hs = &http.Server{Handler: mux}
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.gs.Serve(gl) }()
	go func() { defer r.wg.Done(); r.hs.Serve(hl) }()
	return r, nil
}

// GRPCAddr is the gRPC listener's host:port.
func (r *Receiver) GRPCAddr() string { return r.grpcLn.Addr().String() }

// HTTPAddr is the HTTP listener's host:port.
func (r *Receiver) HTTPAddr() string { return r.httpLn.Addr().String() }

// Close stops both servers.
func (r *Receiver) Close() {
	r.gs.Stop()
	r.hs.Close()
	r.wg.Wait()
}

// SetPartial makes every later answer a partial success that rejected n
// spans (0: a plain success again); the spans are kept all the same.
func (r *Receiver) SetPartial(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = n
}

// answer is the response to an export.
func (r *Receiver) answer() *collectorpb.ExportTraceServiceResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rejected == 0 {
		return &collectorpb.ExportTraceServiceResponse{}
	}
	return &collectorpb.ExportTraceServiceResponse{PartialSuccess: &collectorpb.ExportTracePartialSuccess{
		RejectedSpans: r.rejected, ErrorMessage: "rejected by the test"}}
}

// Spans is every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers is the headers of every export received so far (gRPC metadata
// for gRPC), names in lower case.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

func (r *Receiver) add(req *collectorpb.ExportTraceServiceRequest, h http.Header, protocol string) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service, instance := "", ""
		for _, kv := range rs.GetResource().GetAttributes() {
			switch kv.GetKey() {
			case "service.name":
				service = text(kv.GetValue())
			case "service.instance.id":
				instance = text(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Name: s.GetName(), Kind: s.GetKind(), Attrs: map[string]string{},
					Error:   s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Service: service, Instance: instance, Protocol: protocol,
				}
				if p := s.GetParentSpanId(); len(p) > 0 {
					sp.ParentID = hex.EncodeToString(p)
				}
				for _, kv := range s.GetAttributes() {
					sp.Attrs[kv.GetKey()] = text(kv.GetValue())
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.headers = append(r.headers, h)
	r.mu.Unlock()
}

// text is an attribute value as text.
func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	}
	return v.String()
}

type traceService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(ctx context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	h := http.Header{}
	md, _ := metadata.FromIncomingContext(ctx)
	for k, vv := range md {
		h[strings.ToLower(k)] = vv
	}
	s.r.add(req, h, "grpc")
	return s.r.answer(), nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h := http.Header{}
	for k, vv := range req.Header {
		h[strings.ToLower(k)] = vv
	}
	r.add(&msg, h, "http")
	out, _ := proto.Marshal(r.answer())
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Down is a 127.0.0.1 address nothing listens on: a receiver that is down,
// each connection to it refused.
func Down() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Blackhole is a receiver that accepts TCP connections and never reads
// from or answers them: an export to it waits until its timeout.
type Blackhole struct {
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex // guards following
	conns    []net.Conn
	accepted int
}

// StartBlackhole listens on a 127.0.0.1 port.
func StartBlackhole() (*Blackhole, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Blackhole{ln: ln}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.accepted++
			b.mu.Unlock()
		}
	}()
	return b, nil
}

// Addr is the listener's host:port.
func (b *Blackhole) Addr() string { return b.ln.Addr().String() }

// Accepted is how many connections it took.
func (b *Blackhole) Accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.accepted
}

// Close closes the listener and every connection it took.
func (b *Blackhole) Close() error {
	err := b.ln.Close()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		err = errors.Join(err, c.Close())
	}
	b.conns = nil
	return err
}
