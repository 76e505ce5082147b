// Package tracing is corput's OpenTelemetry tracing (the tracing block,
// docs/tracing.md): a server span per downstream request and a client span
// per upstream attempt, exported over OTLP (gRPC or HTTP with protobuf) by
// the SDK's batch processor behind a bounded queue.
//
// Invariants:
//   - Off (no tracing block) costs a nil check: the serving paths hold no
//     *Tracer, build no Request, and pass traceparent and tracestate
//     through unchanged.
//   - On, every request has one server span and every attempt that picked
//     an endpoint one client span, its child, from the pick to the end of
//     its exchange (so a retried request shows each attempt). The request
//     sent upstream carries the traceparent (and tracestate) of its
//     attempt's client span and never the client's own.
//   - A client's traceparent is a parent only when the peer is a trusted
//     proxy (downstream.trusted_proxies, as for X-Forwarded-*); anyone
//     else's request starts a new trace.
//   - Sampling is decided before any SDK call (sampling.go): a trusted
//     parent's sampled flag, else sample_ratio on the trace id (the SDK's
//     TraceIDRatioBased rule), then room in the export queue. A request
//     that will not be recorded never reaches the SDK: its span ids come
//     from its Request's own source, its traceparent (flags 00 unsampled,
//     01 sampled and shed) is written into the Request, and it allocates
//     nothing.
//   - Export never blocks a request: a span that starts or ends while the
//     queue holds QueueSize sampled spans not yet handed to the exporter is
//     dropped (one that starts so is not even recorded), and every sampled
//     span that is never exported (dropped so, in a batch whose export
//     failed, or rejected by name in a partial success) is counted in
//     corput_tracing_spans_dropped_total. An export is bounded by
//     ExportTimeout, and Shutdown cuts the one in flight when its context
//     ends.
//   - While exports fail nothing is recorded (breaker.go). Until its first
//     export is answered a Tracer records one batch; a failed export opens
//     the breaker: every sampled span is then shed (counted) and the
//     batches still queued are dropped unsent, except one batch recorded
//     and exported as a probe per backoff (1 s, doubling to 30 s); the
//     first export answered closes it.
package tracing

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/upstream"
)

// The export's bounds.
const (
	// QueueSize is the most sampled spans waiting for the exporter.
	QueueSize = 2048
	// BatchSize is the most spans in one export.
	BatchSize = 512
	// BatchTimeout is the longest a span waits for its batch to fill.
	BatchTimeout = time.Second
	// ExportTimeout bounds one export; a failed batch is not retried.
	ExportTimeout = 5 * time.Second
)

// Options are a Tracer's injected parts.
type Options struct {
	Dropped  prometheus.Counter // corput_tracing_spans_dropped_total; nil counts nowhere
	Logger   *slog.Logger       // nil: slog.Default()
	Instance string             // service.instance.id ("" for none)
	Clock    clock.Clock        // the breaker's probe timer; nil: the wall clock
}

// bounds are the export's bounds a Tracer is built with: the constants
// above, smaller in tests.
type bounds struct {
	queue, batch                int
	batchTimeout, exportTimeout time.Duration
}

var defaultBounds = bounds{queue: QueueSize, batch: BatchSize, batchTimeout: BatchTimeout, exportTimeout: ExportTimeout}

// Tracer is the tracing block in force: its provider, exporter and queue.
// A reload that changes the block builds a new Tracer and shuts the old
// one down.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	bsp    sdktrace.SpanProcessor // the SDK's batch processor
	tracer trace.Tracer           // starts only the spans corput decided to record
	ratio  ratio                  // sample_ratio's rule for a new trace
	q      *queue
	cfg    config.Tracing
	// stop ends every export in flight once Shutdown's context ends.
	stop   context.Context
	cancel context.CancelFunc
}

// New builds the Tracer of c. It opens no connection: the exporter
// connects on its first export.
func New(c *config.Tracing, opts Options) (*Tracer, error) {
	return newTracer(c, opts, defaultBounds)
}

func newTracer(c *config.Tracing, opts Options, b bounds) (*Tracer, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Dropped == nil {
		opts.Dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "unregistered"})
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	exp, err := newExporter(c, b.exportTimeout)
	if err != nil {
		return nil, err
	}
	quietGlobalHandler()
	q := &queue{limit: int64(b.queue), dropped: opts.Dropped,
		br: newBreaker(b.batch, opts.Clock, opts.Logger)}
	t := &Tracer{cfg: *c, ratio: newRatio(c.SampleRatio), q: q}
	t.stop, t.cancel = context.WithCancel(context.Background())
	t.bsp = sdktrace.NewBatchSpanProcessor(&countingExporter{SpanExporter: exp, q: q, stop: t.stop},
		sdktrace.WithMaxQueueSize(b.queue), sdktrace.WithMaxExportBatchSize(b.batch),
		sdktrace.WithBatchTimeout(b.batchTimeout), sdktrace.WithExportTimeout(b.exportTimeout))
	attrs := []attribute.KeyValue{semconv.ServiceName("corput")}
	if opts.Instance != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(opts.Instance))
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, attrs...)
	t.tp = sdktrace.NewTracerProvider(
		// Begin and StartAttempt decided: the SDK sees only spans to record.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(rootIDs{}),
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(&boundedProcessor{SpanProcessor: t.bsp, q: q}),
	)
	t.tracer = t.tp.Tracer("github.com/corput/corput")
	return t, nil
}

// Same reports whether t was built from a block equal to c: a reload then
// keeps t.
func (t *Tracer) Same(c *config.Tracing) bool {
	if t == nil || c == nil {
		return t == nil && c == nil
	}
	return fmt.Sprint(t.cfg) == fmt.Sprint(*c) // Headers is a map: printed sorted
}

// Shutdown exports what is queued and stops, within ctx: when ctx ends
// first, the export in flight is cut and what is left is dropped
// (counted).
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.q.br.stop()
	stop := context.AfterFunc(ctx, t.cancel)
	defer stop()
	err := t.tp.Shutdown(ctx)
	t.cancel()
	// The provider skips its processors when ctx has already ended; the
	// processor's own Shutdown (once only) then stops its goroutine and
	// the exporter's connection in the background.
	t.bsp.Shutdown(ctx)
	return err
}

// newExporter is c's OTLP exporter, each export bounded by timeout and
// tried once: the exporters' retries are off (a failed batch is dropped,
// and the breaker decides when to send again).
func newExporter(c *config.Tracing, timeout time.Duration) (sdktrace.SpanExporter, error) {
	var tc *tls.Config
	if c.TLS != nil {
		var err error
		tc, err = upstream.TLSFiles{CA: c.TLS.CA, Cert: c.TLS.Cert, Key: c.TLS.Key,
			ServerName: c.TLS.ServerName, InsecureSkipVerify: c.TLS.InsecureSkipVerify}.Config()
		if err != nil {
			return nil, fmt.Errorf("tracing.%w", err)
		}
	}
	var client otlptrace.Client
	switch c.Protocol {
	case config.TracingHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(c.Endpoint), otlptracehttp.WithTimeout(timeout),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}), otlptracehttp.WithHeaders(c.Headers)}
		if tc != nil {
			opts = append(opts, otlptracehttp.WithTLSClientConfig(tc))
		} else {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		client = otlptracehttp.NewClient(opts...)
	default:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(c.Endpoint), otlptracegrpc.WithTimeout(timeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}), otlptracegrpc.WithHeaders(c.Headers)}
		if tc != nil {
			opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tc)))
		} else {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		client = otlptracegrpc.NewClient(opts...)
	}
	return otlptrace.New(context.Background(), client)
}

// quietGlobalHandler sends the SDK's own error reports (a failed export,
// which the breaker already logs and countingExporter counts) to the
// debug log once per process: the SDK's default prints each one to
// stderr.
var quietOnce sync.Once

func quietGlobalHandler() {
	quietOnce.Do(func() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { slog.Debug("opentelemetry", "err", err) }))
	})
}

// queue counts the sampled spans handed to the batch processor and not
// yet taken by an export. Its bound equals the processor's queue, so the
// processor never drops a span itself (its own count is not exported):
// every drop is decided, and counted, here.
type queue struct {
	n       atomic.Int64
	limit   int64
	dropped prometheus.Counter
	br      *breaker // open while exports fail: nothing is recorded
}

// room reports whether a sampled span starting now may be recorded: while
// the queue is full or the breaker open it is not (and is counted as
// dropped at once). It would be dropped when it ends anyway, and a span
// not recorded costs nothing, so a receiver that cannot keep up (or is
// gone) costs requests no more than sampling nothing.
func (q *queue) room() bool {
	if q.n.Load() >= q.limit || !q.br.admit() {
		q.drop()
		return false
	}
	return true
}

// drop counts one sampled span that will not be exported.
func (q *queue) drop() { q.dropped.Inc() }

// boundedProcessor admits a sampled span to the batch processor only
// while the queue has room.
type boundedProcessor struct {
	sdktrace.SpanProcessor
	q *queue
}

func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor ignores it too
	}
	if p.q.n.Add(1) > p.q.limit {
		p.q.n.Add(-1)
		p.q.drop()
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// countingExporter takes a batch out of the queue's count as its export
// starts, sends it only when the breaker lets it (else it is dropped
// unsent), counts a batch not exported as dropped, and tells the breaker
// how each export sent went.
type countingExporter struct {
	sdktrace.SpanExporter
	q    *queue
	stop context.Context
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.q.n.Add(-int64(len(spans)))
	if !e.q.br.sending() {
		e.q.dropped.Add(float64(len(spans)))
		return nil // not an export failure: the breaker already knows
	}
	ctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(e.stop, cancel)()
	defer cancel()
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if rejected, ok := answered(err); ok {
		e.q.dropped.Add(float64(min(rejected, int64(len(spans)))))
	} else {
		e.q.dropped.Add(float64(len(spans)))
	}
	e.q.br.exported(err, len(spans))
	return err
}

// answered reports whether an export got the receiver's answer, and how
// many of its spans the receiver rejected: nil is a success; an error that
// says only that the receiver kept part of the batch (OTLP partial
// success, which both exporters return only for an export that got its
// answer) is an answer too, the receiver is there, so for the breaker that
// export succeeded, and only the spans it names as rejected were lost. The
// exporters' error type is internal to them; its text, "traces export:
// OTLP partial success: <message> (<n> spans rejected)", is what they
// expose. A partial success whose count cannot be read is counted as the
// whole batch lost.
func answered(err error) (rejected int64, ok bool) {
	if err == nil {
		return 0, true
	}
	msg := strings.TrimPrefix(err.Error(), "traces export: ") // otlptrace.Exporter's wrapping
	const prefix = "OTLP partial success: "
	if !strings.HasPrefix(msg, prefix) || strings.Contains(msg, "\n") {
		return 0, false // a failure, or a partial success joined with one
	}
	rejected = math.MaxInt64
	if i := strings.LastIndexByte(msg, '('); i >= 0 && strings.HasSuffix(msg, " spans rejected)") {
		if n, err := strconv.ParseInt(msg[i+1:len(msg)-len(" spans rejected)")], 10, 64); err == nil && n >= 0 {
			rejected = n
		}
	}
	return rejected, true
}

// port is the port of a host:port, -1 when there is none.
func port(hostport string) (host string, p int) {
	for i := len(hostport) - 1; i >= 0; i-- {
		if hostport[i] == ':' {
			n, err := strconv.Atoi(hostport[i+1:])
			if err != nil {
				return hostport, -1
			}
			h := hostport[:i]
			if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
				h = h[1 : len(h)-1]
			}
			return h, n
		}
		if hostport[i] == ']' {
			break
		}
	}
	return hostport, -1
}
