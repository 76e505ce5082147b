package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/corput/corput/internal/testcert"
)

// grpc-go's interop cases (google.golang.org/grpc/interop) report a failure
// through grpclog's Fatal, which exits the process. In this package it
// panics with an interopFailure instead, which runInterop turns into the
// subtest's failure; any other gRPC log line is as grpclog's default has
// it (errors to stderr).
type interopFailure string

type failInteropCase struct{ grpclog.LoggerV2 }

func (failInteropCase) Fatal(args ...any) { panic(interopFailure(fmt.Sprint(args...))) }
func (failInteropCase) Fatalf(format string, args ...any) {
	panic(interopFailure(fmt.Sprintf(format, args...)))
}
func (failInteropCase) Fatalln(args ...any) { panic(interopFailure(fmt.Sprint(args...))) }

func init() {
	grpclog.SetLoggerV2(failInteropCase{grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr)})
}

// runInterop runs one interop case, failing t with its message.
func runInterop(t *testing.T, do func(ctx context.Context)) {
	t.Helper()
	if msg := interopRun(do); msg != "" {
		t.Fatalf("interop case failed: %s", msg)
	}
}

// runRacyInterop runs a case whose outcome races the client's own
// cancellation or deadline inside grpc-go (cancel_after_begin,
// timeout_on_sleeping_server): grpc-go acts on a cancelled context in a
// goroutine of its own, so under -race on a loaded machine an answer that
// came back in the meantime (the origin's OK to an empty client stream, a
// reset of a stream whose deadline passed) can reach the call first. Such
// a case passes when one of three runs gives the code asked; a proxy that
// never gives it fails all three.
func runRacyInterop(t *testing.T, do func(ctx context.Context)) {
	t.Helper()
	var msgs []string
	for range 3 {
		msg := interopRun(do)
		if msg == "" {
			if len(msgs) > 0 {
				t.Logf("passed after %d lost races: %v", len(msgs), msgs)
			}
			return
		}
		msgs = append(msgs, msg)
	}
	t.Fatalf("interop case failed three times: %v", msgs)
}

// interopRun runs one interop case, returning its failure's message, ""
// when it passed.
func interopRun(do func(ctx context.Context)) (msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			m, ok := p.(interopFailure)
			if !ok {
				panic(p)
			}
			msg = string(m)
		}
	}()
	do(ctx)
	return ""
}

// interopCases are the cases of grpc-go's interop client that apply
// through a proxy: none needs credentials of Google's, a load balancer or
// ORCA. Each is the client's own function, as its -test_case runs it.
var interopCases = []struct {
	name string
	do   func(ctx context.Context, tc testgrpc.TestServiceClient, cc *grpc.ClientConn)
	racy bool // its outcome races the client's own cancellation (runRacyInterop)
}{
	{"empty_unary", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoEmptyUnaryCall(ctx, tc)
	}, false},
	{"large_unary", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoLargeUnaryCall(ctx, tc)
	}, false},
	{"client_streaming", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoClientStreaming(ctx, tc)
	}, false},
	{"server_streaming", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoServerStreaming(ctx, tc)
	}, false},
	{"ping_pong", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoPingPong(ctx, tc)
	}, false},
	{"empty_stream", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoEmptyStream(ctx, tc)
	}, false},
	{"cancel_after_begin", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoCancelAfterBegin(ctx, tc)
	}, true},
	{"cancel_after_first_response", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoCancelAfterFirstResponse(ctx, tc)
	}, false},
	{"timeout_on_sleeping_server", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoTimeoutOnSleepingServer(ctx, tc)
	}, true},
	{"custom_metadata", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoCustomMetadata(ctx, tc)
	}, false},
	{"status_code_and_message", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoStatusCodeAndMessage(ctx, tc)
	}, false},
	{"special_status_message", func(ctx context.Context, tc testgrpc.TestServiceClient, _ *grpc.ClientConn) {
		interop.DoSpecialStatusMessage(ctx, tc)
	}, false},
	{"unimplemented_method", func(ctx context.Context, _ testgrpc.TestServiceClient, cc *grpc.ClientConn) {
		interop.DoUnimplementedMethod(ctx, cc)
	}, false},
	{"unimplemented_service", func(ctx context.Context, _ testgrpc.TestServiceClient, cc *grpc.ClientConn) {
		interop.DoUnimplementedService(ctx, testgrpc.NewUnimplementedServiceClient(cc))
	}, false},
}

// interopOrigin is grpc-go's interop server on loopback: plaintext (the
// gateway speaks h2c to it) or TLS (h2 by ALPN); caFile is its
// certificate's file for the gateway to trust, "" for plaintext.
func interopOrigin(t testing.TB, useTLS bool) (addr, caFile string) {
	t.Helper()
	// Stop waits for the handlers: the interop server's sleeps (a response's
	// interval) do not end with the call.
	opts := []grpc.ServerOption{grpc.WaitForHandlers(true)}
	if useTLS {
		c, err := testcert.SelfSigned("corput interop origin")
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{c.TLS()}})))
		caFile = writePEM(t, "interop-origin.pem", "CERTIFICATE", c.Leaf.Raw)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, interop.NewTestServer())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	return lis.Addr().String(), caFile
}

// grpcGateway starts a gateway to the gRPC origin at addr (h2c, or h2
// over TLS when caFile is set), listening in cleartext (h2c by prior
// knowledge) or with TLS (h2 by ALPN) as down says, with origin the
// origin's keys beyond name, endpoints, protocol and tls; and a grpc-go
// client of it.
func grpcGateway(t testing.TB, down, addr, caFile, origin string) (*Gateway, *grpc.ClientConn) {
	t.Helper()
	keys := "    protocol: h2c\n"
	if caFile != "" {
		keys = fmt.Sprintf("    protocol: h2\n    tls: {ca: %q}\n", caFile)
	}
	top, dial := grpcDownstream(t, down)
	g := gatewayTo(t, 2, top, keys+origin, addr)
	return g, dial(g)
}

// grpcDownstream is a gateway's top-level keys for a downstream kind
// (dsH2C or dsTLSH2: a certificate of its own), and the grpc-go client of
// such a gateway, closed when the test ends.
func grpcDownstream(t testing.TB, down string) (top string, dial func(*Gateway) *grpc.ClientConn) {
	t.Helper()
	creds := insecure.NewCredentials()
	if down == dsTLSH2 {
		certFile, keyFile, roots := selfSignedFiles(t)
		top = fmt.Sprintf("tls: {cert: %q, key: %q}\n", certFile, keyFile)
		creds = credentials.NewTLS(&tls.Config{RootCAs: roots})
	}
	return top, func(g *Gateway) *grpc.ClientConn {
		cc, err := grpc.NewClient(g.Addr(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
}

// TestGRPCInterop runs grpc-go's interop client through the gateway to
// grpc-go's interop server, every case that applies through a proxy, over
// h2c and TLS h2 on both sides.
func TestGRPCInterop(t *testing.T) {
	for _, up := range []struct {
		name string
		tls  bool
	}{{"h2c", false}, {"h2", true}} {
		addr, caFile := interopOrigin(t, up.tls)
		for _, down := range []string{dsH2C, dsTLSH2} {
			t.Run(down+"-to-"+up.name, func(t *testing.T) {
				_, cc := grpcGateway(t, down, addr, caFile, "")
				tc := testgrpc.NewTestServiceClient(cc)
				for _, c := range interopCases {
					t.Run(c.name, func(t *testing.T) {
						run := runInterop
						if c.racy {
							run = runRacyInterop
						}
						run(t, func(ctx context.Context) { c.do(ctx, tc, cc) })
					})
				}
			})
		}
	}
}

// serverStream asks the interop server for n responses of size bytes,
// one every interval, and counts those that arrive before the stream
// ends; the error is the stream's end (nil: status OK).
func serverStream(ctx context.Context, tc testgrpc.TestServiceClient, n, size int, interval time.Duration) (int, error) {
	params := make([]*testpb.ResponseParameters, n)
	for i := range params {
		params[i] = &testpb.ResponseParameters{Size: int32(size), IntervalUs: int32(interval / time.Microsecond)}
	}
	stream, err := tc.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{
		ResponseType: testpb.PayloadType_COMPRESSABLE, ResponseParameters: params,
	})
	if err != nil {
		return 0, err
	}
	got := 0
	for {
		r, err := stream.Recv()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		if len(r.GetPayload().GetBody()) != size {
			return got, fmt.Errorf("response %d: %d bytes, want %d", got, len(r.GetPayload().GetBody()), size)
		}
		got++
	}
}

// TestGRPCServerStreamLastsPastItsResponses: a server-streaming RPC of
// about 2 s (20 responses, one every 100 ms), with timeouts.request set
// well above it, delivers every response and ends with status OK, over
// h2c on both sides and TLS h2 on both sides.
func TestGRPCServerStreamLastsPastItsResponses(t *testing.T) {
	for _, tc := range []struct {
		down string
		tls  bool
	}{{dsH2C, false}, {dsTLSH2, true}} {
		t.Run(tc.down, func(t *testing.T) {
			addr, caFile := interopOrigin(t, tc.tls)
			_, cc := grpcGateway(t, tc.down, addr, caFile, "    timeouts: {connect: 1s, request: 60s}\n")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := serverStream(ctx, testgrpc.NewTestServiceClient(cc), 20, 1024, 100*time.Millisecond)
			if err != nil || got != 20 {
				t.Fatalf("%d of 20 responses, then %v; want all 20 and status OK", got, err)
			}
		})
	}
}

// TestGRPCServerStreamOf20sWithTheDefaultConfig: a server-streaming RPC
// of 20 s (one response a second) passes through the gateway with the
// default configuration: no timeouts set. It takes 20 s, so it runs with
// CORPUT_LONG=1.
func TestGRPCServerStreamOf20sWithTheDefaultConfig(t *testing.T) {
	if os.Getenv("CORPUT_LONG") == "" {
		t.Skip("takes 20 s: run with CORPUT_LONG=1")
	}
	addr, _ := interopOrigin(t, false)
	_, cc := grpcGateway(t, dsH2C, addr, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	got, err := serverStream(ctx, testgrpc.NewTestServiceClient(cc), 20, 1024, time.Second)
	if err != nil || got != 20 {
		t.Fatalf("%d of 20 responses in %v, then %v; want all 20 and status OK", got, time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("20 responses over %v, status OK", time.Since(start).Round(time.Millisecond))
}

// noEndpointGateway starts a one-loop gateway, with top its top-level
// keys beyond the base and routes its routes, whose one origin "app"
// follows an endpoints file that lists none.
func noEndpointGateway(t *testing.T, top, routes string) *Gateway {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "none.yaml")
	writeFileAtomic(t, empty, "endpoints: []\n")
	g := runGateway(t, top+fmt.Sprintf(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
loops: 1
routes: %s
origins:
  - name: app
    protocol: h2c
    discovery: {type: file, path: %q}
`, routes, empty), Options{})
	waitReady(t, g)
	return g
}

// TestGRPCClientsGetGRPCAnswers: when the gateway answers a gRPC request
// itself, a grpc-go client gets a gRPC status, not an HTTP error it can
// only call "unexpected HTTP status": no endpoint to send to is
// UNAVAILABLE, no route UNIMPLEMENTED, with the reason in the message and
// X-Corput-Error and Retry-After in the trailers; over h2c and TLS h2.
func TestGRPCClientsGetGRPCAnswers(t *testing.T) {
	for _, down := range []string{dsH2C, dsTLSH2} {
		t.Run(down, func(t *testing.T) {
			top, dial := grpcDownstream(t, down)
			// Only TestService is routed, to an origin with no endpoint.
			cc := dial(noEndpointGateway(t, top, "[{path_prefix: /grpc.testing.TestService/, origin: app}]"))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			var trailer metadata.MD
			_, err := testgrpc.NewTestServiceClient(cc).EmptyCall(ctx, &testpb.Empty{}, grpc.Trailer(&trailer))
			st, _ := status.FromError(err)
			if st.Code() != codes.Unavailable || st.Message() != "Service Unavailable: no_healthy" {
				t.Fatalf("EmptyCall to an origin with no endpoint: %v; want Unavailable: Service Unavailable: no_healthy", err)
			}
			if got, want := trailer["x-corput-error"], []string{"no_healthy"}; !slices.Equal(got, want) {
				t.Errorf("x-corput-error %v, want %v", got, want)
			}
			if got, want := trailer["retry-after"], []string{"1"}; !slices.Equal(got, want) {
				t.Errorf("retry-after %v, want %v", got, want)
			}

			_, err = testgrpc.NewUnimplementedServiceClient(cc).UnimplementedCall(ctx, &testpb.Empty{}, grpc.Trailer(&trailer))
			if st, _ := status.FromError(err); st.Code() != codes.Unimplemented || st.Message() != "Not Found: no_route" {
				t.Fatalf("a call no route matches: %v; want Unimplemented: Not Found: no_route", err)
			}
			if got, want := trailer["x-corput-error"], []string{"no_route"}; !slices.Equal(got, want) {
				t.Errorf("x-corput-error %v, want %v", got, want)
			}
		})
	}
}

// TestGRPCAnswerOnTheFastPath: the fast path (HTTP/1.1) answers a request
// of Content-Type application/grpc in gRPC's terms too — 200, grpc-status,
// Content-Length: 0 — and the connection serves on; a gRPC-Web request
// gets the plain answer, whose status its client reads.
func TestGRPCAnswerOnTheFastPath(t *testing.T) {
	g := noEndpointGateway(t, "", "[{host: elsewhere.example, origin: app}]")
	conn, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for _, tc := range []struct {
		contentType string
		status      int
		grpcStatus  string
	}{
		{"application/grpc", 200, "12"},
		{"application/grpc-web+proto", 404, ""},
		{"application/grpc+proto", 200, "12"},
	} {
		fmt.Fprintf(conn, "POST /grpc.testing.TestService/EmptyCall HTTP/1.1\r\nHost: example.com\r\nContent-Type: %s\r\nContent-Length: 0\r\n\r\n", tc.contentType)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.contentType, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Grpc-Status") != tc.grpcStatus || resp.Header.Get("X-Corput-Error") != "no_route" {
			t.Fatalf("%s: %d grpc-status %q X-Corput-Error %q; want %d %q no_route", tc.contentType, resp.StatusCode,
				resp.Header.Get("Grpc-Status"), resp.Header.Get("X-Corput-Error"), tc.status, tc.grpcStatus)
		}
		if tc.grpcStatus != "" && (resp.ContentLength != 0 || len(body) != 0 || resp.Header.Get("Content-Type") != "application/grpc" ||
			resp.Header.Get("Grpc-Message") != "Not Found: no_route") {
			t.Fatalf("%s: length %d body %q headers %v; want an empty application/grpc answer naming no_route", tc.contentType, resp.ContentLength, body, resp.Header)
		}
	}
}

// TestGRPCClientGetsDeadlineExceededAtTheGatewaysLimit: an origin that
// sends nothing past timeouts.request (its first response is due in 1 s,
// the limit is 300 ms) gets its grpc-go client DEADLINE_EXCEEDED naming
// upstream_timeout, not UNAVAILABLE from a 504; the client set no
// deadline of its own.
func TestGRPCClientGetsDeadlineExceededAtTheGatewaysLimit(t *testing.T) {
	addr, _ := interopOrigin(t, false)
	_, cc := grpcGateway(t, dsH2C, addr, "", "    timeouts: {connect: 200ms, request: 300ms}\n")
	got, err := serverStream(context.Background(), testgrpc.NewTestServiceClient(cc), 1, 10, time.Second)
	if st, _ := status.FromError(err); got != 0 || st.Code() != codes.DeadlineExceeded || st.Message() != "Gateway Timeout: upstream_timeout" {
		t.Fatalf("%d responses, then %v; want none and DeadlineExceeded: Gateway Timeout: upstream_timeout", got, err)
	}
}
