package tracing

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/corput/corput/internal/forward"
)

// The sampling decision is corput's, made in Begin before any SDK call, so
// that a request that will not be recorded costs no SDK span, context or
// allocation (docs/tracing.md, "How sampling is decided"):
//   - a trusted parent's sampled flag decides for the trace it continues
//     (the SDK's ParentBased over a remote parent);
//   - a new trace is sampled by ratio on its trace id (the SDK's
//     TraceIDRatioBased);
//   - a sampled span is recorded only while the export queue has room
//     (queue.room), else it is shed and counted as dropped.
// The provider's own sampler then samples every span it is asked for: it
// sees only those.

// ratio is sample_ratio's rule for a new trace, the SDK's
// TraceIDRatioBased exactly: the trace id's last 8 bytes, big-endian,
// shifted right by one, under ratio·2⁶³; a ratio of 1 or more samples
// every trace, 0 or less none.
type ratio struct {
	bound uint64
	all   bool
}

func newRatio(f float64) ratio {
	switch {
	case f >= 1:
		return ratio{all: true}
	case f <= 0:
		return ratio{}
	}
	return ratio{bound: uint64(f * (1 << 63))}
}

func (r ratio) sampled(id trace.TraceID) bool {
	return r.all || binary.BigEndian.Uint64(id[8:16])>>1 < r.bound
}

// remoteParent is the span context of the request's traceparent and
// tracestate, read as the SDK's W3C propagator reads them (the first
// traceparent field; every tracestate line, as one list), or the zero
// (invalid) one. It allocates only for a tracestate.
func remoteParent(h forward.Prior) trace.SpanContext {
	v, ok := h.Value("traceparent", 0)
	if !ok {
		return trace.SpanContext{}
	}
	var scc trace.SpanContextConfig
	var ver, flags [1]byte
	switch {
	case !hexPart(ver[:], &v, 2) || ver[0] == 0xff, // ff is not a version
		!hexPart(scc.TraceID[:], &v, 32), !hexPart(scc.SpanID[:], &v, 16), !hexPart(flags[:], &v, 2),
		ver[0] == 0 && (len(v) > 0 || flags[0] > 3): // version 00 has no more fields and no other flags
		return trace.SpanContext{}
	}
	scc.TraceFlags = trace.TraceFlags(flags[0]) & (trace.FlagsSampled | trace.FlagsRandom)
	scc.Remote = true
	if _, ok := h.Value("tracestate", 0); ok {
		// A tracestate that does not parse is dropped; the traceparent
		// stands (W3C trace context §3.3.1.3).
		scc.TraceState, _ = trace.ParseTraceState(traceState(h))
	}
	if sc := trace.NewSpanContext(scc); sc.IsValid() { // not with a zero trace or span id
		return sc
	}
	return trace.SpanContext{}
}

// hexPart decodes the field of *v up to the next '-' into dst, and leaves
// *v after it (empty when there is none): false unless the field is n
// lower-case hex digits.
func hexPart(dst []byte, v *[]byte, n int) bool {
	part, rest := *v, []byte(nil)
	if i := bytes.IndexByte(part, '-'); i >= 0 {
		part, rest = part[:i], part[i+1:]
	}
	*v = rest
	if len(part) != n {
		return false
	}
	for i := 0; i < n; i += 2 {
		hi, lo := unhex(part[i]), unhex(part[i+1])
		if hi > 15 || lo > 15 {
			return false
		}
		dst[i/2] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 0xff
}

// traceState is the request's tracestate: its field lines joined as one
// list (W3C trace context §3.3.1.1).
func traceState(h forward.Prior) string {
	var b strings.Builder
	for i := 0; ; i++ {
		v, ok := h.Value("tracestate", i)
		if !ok {
			return b.String()
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(v)
	}
}

// ids is a Request's source of the ids of spans that are not recorded (and
// of the trace ids sampling is decided on): a PCG generator owned by one
// Request, so by one connection on the fast path, seeded on its first use
// from the runtime's random source. No lock, no allocation.
type ids struct {
	pcg    rand.PCG
	seeded bool
}

func (s *ids) next() uint64 {
	if !s.seeded {
		s.pcg.Seed(rand.Uint64(), rand.Uint64())
		s.seeded = true
	}
	return s.pcg.Uint64()
}

func (s *ids) traceID() (t trace.TraceID) {
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], s.next())
		binary.BigEndian.PutUint64(t[8:], s.next())
	}
	return t
}

func (s *ids) spanID() (sp trace.SpanID) {
	for !sp.IsValid() {
		binary.BigEndian.PutUint64(sp[:], s.next())
	}
	return sp
}

// rootIDs is the provider's IDGenerator. A recorded request that starts a
// new trace starts it with the trace id its sampling was decided on, which
// Begin puts in the context; every span id is random, from the source the
// SDK's own generator uses.
type rootIDs struct{}

// rootKey is the context key of a new trace's id.
type rootKey struct{}

func (rootIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, _ := ctx.Value(rootKey{}).(trace.TraceID)
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, rootIDs{}.NewSpanID(ctx, tid)
}

func (rootIDs) NewSpanID(context.Context, trace.TraceID) (sid trace.SpanID) {
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// formatParent writes the traceparent of span sid in trace tid into b.
func formatParent(b *[55]byte, tid trace.TraceID, sid trace.SpanID, sampled bool) {
	const hexdig = "0123456789abcdef"
	out := b[:0]
	out = append(out, "00-"...)
	for _, x := range tid {
		out = append(out, hexdig[x>>4], hexdig[x&15])
	}
	out = append(out, '-')
	for _, x := range sid {
		out = append(out, hexdig[x>>4], hexdig[x&15])
	}
	out = append(out, "-00"...)
	if sampled {
		b[54] = '1'
	}
}
