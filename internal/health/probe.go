package health

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/balance"
	"github.com/corput/corput/internal/config"
	"github.com/corput/corput/internal/exchange"
	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/pool"
)

// spec is a health_check as the probes use it: read once per probe, so a
// reload applies to the next one.
type spec struct {
	interval, jitter, timeout time.Duration
	unhealthy, healthy        int
	hc                        config.HealthCheck
	host, scheme              string // the request's Host (:authority is the endpoint's when empty) and scheme
	maxHead                   int
	grpc                      bool
	body                      []byte // a gRPC probe's request message, framed
}

func newSpec(oc *config.Origin) *spec {
	if oc == nil || oc.HealthCheck == nil {
		return nil
	}
	h := *oc.HealthCheck
	s := &spec{interval: h.Interval, jitter: h.Jitter, timeout: h.Timeout, unhealthy: h.UnhealthyThreshold,
		healthy: h.HealthyThreshold, hc: h, scheme: "http", maxHead: oc.Pool.MaxResponseHeaderBytes}
	if oc.TLS != nil {
		s.scheme = "https"
		s.host = oc.TLS.ServerName
	}
	if h.GRPC != nil {
		s.grpc = true
		s.body = grpcRequest(h.GRPC.Service)
	}
	return s
}

// UserAgent is a probe's user-agent: origins can tell probes from requests
// by it (and package healthtest's origins count them so).
const UserAgent = "corput-health-check"

// GRPCCheckPath is the gRPC health protocol's method.
const GRPCCheckPath = "/grpc.health.v1.Health/Check"

// grpcRequest is a HealthCheckRequest{service} in a gRPC message frame.
func grpcRequest(service string) []byte {
	var msg []byte
	if service != "" {
		msg = append(msg, 0x0a) // field 1, bytes
		msg = binary.AppendUvarint(msg, uint64(len(service)))
		msg = append(msg, service...)
	}
	frame := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return append(frame, msg...)
}

// request is s's probe request to addr.
func (s *spec) request(addr string) *exchange.Request {
	host := s.host
	if host == "" {
		host = addr
	}
	r := &exchange.Request{
		Method: s.hc.Method, Target: s.hc.Path, Host: host, Scheme: s.scheme,
		Fields:  []hpack.HeaderField{{Name: "user-agent", Value: UserAgent}},
		MaxHead: s.maxHead,
	}
	if s.grpc {
		r.Method, r.Target, r.TE = "POST", GRPCCheckPath, true
		r.Fields = append(r.Fields, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
		r.Length, r.Body = int64(len(s.body)), bytes.NewReader(s.body)
	}
	return r
}

// result is a probe's verdict: pass or fail with why, or skip (no stream
// could be taken within the pool's rules: no verdict).
type result struct {
	pass, skip bool
	why        string
}

// probe makes one probe of t through the request flow: an Attempt on a
// balance.Probe, a stream taken by the pool's rules (take), the exchange.
// Its timeout, on the injected clock, cuts the acquisition or closes the
// connection or stream.
func (c *Checker) probe(t *target, s *spec, pr *inflight) result {
	ep := c.env.Balance.Endpoint(t.addr)
	p, mux := c.env.Pools.ProbePool(t.addr)
	if ep == nil || p == nil {
		return result{skip: true}
	}
	ctx, sk := pr.ctx, pr.sk

	var a forward.Attempt
	a.Start(&c.pol, balance.NewProbe(ep), forward.Replay{}, 1, balance.Key{})
	defer a.Finish()
	if _, _, step := a.Pick(); step != forward.Acquire {
		return result{skip: true} // pending_full: the endpoint's queue is full of live requests
	}
	lease, ok, err := take(ctx, p, mux)
	if !ok {
		a.Acquired(pool.Lease{}, forward.ErrNoPool)
		return result{skip: true}
	}
	if a.Acquired(lease, err) != forward.Send {
		var de *pool.DialError
		switch {
		case sk.expired():
			return result{why: "timeout"}
		case errors.As(err, &de):
			return result{why: "connect: " + de.Err.Error()}
		}
		return result{skip: true} // acquire timeout, pool closed or over cap: not the endpoint's verdict
	}
	var x exchange.State
	_, step := x.Do(&a, s.request(t.addr), sk)
	switch {
	case sk.expired():
		return result{why: "timeout"}
	case step != forward.Delivered:
		return result{why: a.Reason().String()}
	}
	return s.judge(a.Status(), sk)
}

// judge is a delivered probe's verdict.
func (s *spec) judge(status int, sk *sink) result {
	sk.mu.Lock()
	defer sk.mu.Unlock()
	if sk.aborted {
		return result{why: fmt.Sprintf("%d, body cut", status)}
	}
	if !s.grpc {
		if s.hc.Passes(status) {
			return result{pass: true, why: "pass"}
		}
		return result{why: fmt.Sprintf("status %d", status)}
	}
	switch {
	case status != 200:
		return result{why: fmt.Sprintf("status %d", status)}
	case sk.grpcStatus != "0":
		// HTTP 200 with an error grpc-status (or none) is a failed call.
		return result{why: "grpc-status " + orNone(sk.grpcStatus)}
	}
	st, ok := servingStatus(sk.body)
	if !ok {
		return result{why: "grpc: malformed HealthCheckResponse"}
	}
	if st != servingStatusServing {
		return result{why: "grpc: " + servingName(st)}
	}
	return result{pass: true, why: "pass"}
}

func orNone(s string) string {
	if s == "" {
		return "missing"
	}
	return s
}

// The HealthCheckResponse statuses (grpc.health.v1).
const servingStatusServing = 1

func servingName(st uint64) string {
	switch st {
	case 0:
		return "UNKNOWN"
	case 2:
		return "NOT_SERVING"
	case 3:
		return "SERVICE_UNKNOWN"
	}
	return fmt.Sprintf("status %d", st)
}

// servingStatus reads HealthCheckResponse.status (field 1, varint) from a
// gRPC message frame; an absent field is 0 (UNKNOWN).
func servingStatus(b []byte) (uint64, bool) {
	if len(b) < 5 || b[0] != 0 {
		return 0, false // no message, or a compressed one (never asked for)
	}
	n := binary.BigEndian.Uint32(b[1:5])
	msg := b[5:]
	if uint32(len(msg)) < n {
		return 0, false
	}
	msg = msg[:n]
	var st uint64
	for len(msg) > 0 {
		key, k := binary.Uvarint(msg)
		if k <= 0 {
			return 0, false
		}
		msg = msg[k:]
		switch key & 7 {
		case 0:
			v, k := binary.Uvarint(msg)
			if k <= 0 {
				return 0, false
			}
			msg = msg[k:]
			if key>>3 == 1 {
				st = v
			}
		case 2:
			l, k := binary.Uvarint(msg)
			if k <= 0 || uint64(len(msg)-k) < l {
				return 0, false
			}
			msg = msg[k+int(l):]
		default:
			return 0, false
		}
	}
	return st, true
}

// take is the pool's rule for a probe's stream: a free one when another
// stays free for live requests (HTTP/1.1) or any free stream (HTTP/2);
// else the pool's Acquire while it is below max_connections (it may dial
// within the cap); else none (ok false).
func take(ctx context.Context, p *pool.Pool, mux bool) (l pool.Lease, ok bool, err error) {
	free := p.Free()
	if free >= 2 || (mux && free >= 1) {
		if l, ok := p.TryAcquire(false); ok {
			return l, true, nil
		}
	}
	if p.Held() < p.Config().MaxConnections {
		l, err := p.Acquire(ctx)
		return l, true, err
	}
	return pool.Lease{}, false, nil
}

// sink is a probe's exchange.Client: it keeps the status, a gRPC answer's
// first bytes and grpc-status, discards the rest, and closes the
// connection or stream when the probe's timeout fires.
type sink struct {
	grpc bool

	mu         sync.Mutex
	up         io.Closer
	timedOut   bool
	aborted    bool
	grpcStatus string
	body       []byte
}

// maxBody bounds what a gRPC probe keeps of the answer.
const maxBody = 512

func (s *sink) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timedOut = true
	if s.up != nil {
		s.up.Close()
	}
}

func (s *sink) expired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timedOut
}

func (s *sink) fields(fs []hpack.HeaderField) {
	for _, f := range fs {
		if strings.EqualFold(f.Name, "grpc-status") {
			s.grpcStatus = f.Value
		}
	}
}

func (s *sink) WriteHead(h *exchange.Head) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fields(h.Fields) // a trailers-only answer carries grpc-status in its head
	return nil
}

func (s *sink) Write(p []byte) (int, error) {
	if s.grpc {
		s.mu.Lock()
		if room := maxBody - len(s.body); room > 0 {
			s.body = append(s.body, p[:min(room, len(p))]...)
		}
		s.mu.Unlock()
	}
	return len(p), nil
}

func (s *sink) Flush() error { return nil }

func (s *sink) End(trailer []hpack.HeaderField, _ int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fields(trailer)
	return nil
}

func (s *sink) Abort(int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = true
}

func (s *sink) RawChunks() bool { return false }

func (s *sink) Watch(up io.Closer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up = up
	if s.timedOut {
		up.Close()
	}
}

func (s *sink) Unwatch() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up = nil
	return s.timedOut
}

func (s *sink) Upgrade(_ *exchange.Head, up io.ReadWriteCloser) int {
	up.Close() // a probe never asks to switch protocols
	return 502
}

var _ exchange.Client = (*sink)(nil)
