package load

import (
	"context"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/loadgen"
	"github.com/corput/corput/internal/rng"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wrkOutput = `Running 10s test @ http://127.0.0.1:8080/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.10ms    2.01ms  45.20ms   90.12%
    Req/Sec    10.52k     1.01k   12.80k    70.00%
  Latency Distribution
     50%    2.71ms
     75%    3.50ms
     90%    4.90ms
     99%    1.02s
  209420 requests in 10.00s, 25.36MB read
  Socket errors: connect 0, read 3, write 0, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:  20941.37
Transfer/sec:      2.54MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := WrkResult{RPS: 20941.37, P50MS: 2.71, P99MS: 1020, Errors: 12, Requests: 209420}
	if r != want {
		t.Fatalf("parseWrk = %+v, want %+v", r, want)
	}
	if row := r.Result(); row.RPS != want.RPS || row.P50MS != want.P50MS || row.P99MS != want.P99MS || row.Errors != 12 || row.Requests != 0 {
		t.Errorf("Result() = %+v; want req/s, p50, p99 and errors, no request count", row)
	}
	if _, err := parseWrk("Requests/sec: 5\n"); err == nil {
		t.Fatal("output without --latency percentiles was accepted")
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]float64{"812.00us": 0.812, "1.53ms": 1.53, "2.01s": 2010, "1.00m": 60000} {
		got, err := parseDuration(in)
		if err != nil || math.Abs(got-want) > 1e-9*want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseDuration("3h"); err == nil {
		t.Error("unknown unit accepted")
	}
}

const h2loadOutput = `starting benchmark...
spawning thread #0: 1 total client(s). 40000 total requests
Application protocol: h2c
progress: 10% done

finished in 7.05s, 5673.21 req/s, 1.23MB/s
requests: 40000 total, 40000 started, 40000 done, 39990 succeeded, 10 failed, 0 errored, 0 timeout
status codes: 39990 2xx, 0 3xx, 0 4xx, 10 5xx
traffic: 5.01KB (5128) total, 867B (867) headers (space savings 95.44%), 600B (600) data
                     min         max         mean         sd        +/- sd
time for request:    15.33ms     16.67ms     17.50ms       169us    70.00%
time for connect:      368us       368us       368us         0us   100.00%
`

func TestParseH2load(t *testing.T) {
	r, err := parseH2load(h2loadOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := H2loadResult{RPS: 5673.21, MeanMS: 17.5, Requests: 40000, Errors: 10, Protocol: "h2c"}
	if r != want {
		t.Fatalf("parseH2load = %+v, want %+v", r, want)
	}
	if _, err := parseH2load("Application protocol: h2c\n"); err == nil {
		t.Fatal("output without a summary was accepted")
	}
}

func TestParseSClient(t *testing.T) {
	const out = `depth=0 CN = corput bench
verify error:num=18:self-signed certificate
CONNECTION ESTABLISHED
Protocol version: TLSv1.3
Ciphersuite: TLS_AES_128_GCM_SHA256
Peer certificate: CN = corput bench
Hash used: SHA256
Signature type: ECDSA
Verification error: self-signed certificate
Server Temp Key: X25519, 253 bits
DONE
`
	got, err := ParseSClient(out)
	if err != nil {
		t.Fatal(err)
	}
	want := results.TLSInfo{Protocol: "TLSv1.3", Cipher: "TLS_AES_128_GCM_SHA256", Group: "X25519, 253 bits"}
	if got != want || !got.Expected() {
		t.Fatalf("ParseSClient = %+v (expected %v); want %+v", got, got.Expected(), want)
	}
	for in, want := range map[string]string{
		"OpenSSL 3.0.19 27 Jan 2026 (Library: OpenSSL 3.0.18 1 Oct 2025)\n": "OpenSSL 3.0.18 1 Oct 2025",
		"OpenSSL 3.0.19 27 Jan 2026\n":                                      "OpenSSL 3.0.19 27 Jan 2026",
	} {
		if got := opensslLibrary(in); got != want {
			t.Errorf("opensslLibrary(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := ParseSClient("40378B3AAE7F0000:error:0A000438:SSL routines:ssl3_read_bytes:tlsv1 alert internal error\n"); err == nil {
		t.Error("a failed handshake was read as a negotiation")
	}
}

// TestOpenLoopFollowsItsSchedule runs the overhead scenario's generator
// against a real server: it sends exactly the Poisson schedule's arrivals
// that fall inside the run, however the machine keeps up, and every one
// is answered and measured.
func TestOpenLoopFollowsItsSchedule(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	const rate, d, seed = 2000.0, 500 * time.Millisecond, 5
	pacer := loadgen.NewPoisson(rate, rng.New(seed))
	var want int64
	for {
		at, _ := pacer.Pace(0, uint64(want))
		if at >= d {
			break
		}
		want++
	}
	res, err := OpenLoop(context.Background(), srv.URL+"/", rate, d, seed)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != want || res.Errors != 0 || served.Load() != want {
		t.Errorf("sent %d with %d errors, server saw %d; want %d sent and seen", res.Requests, res.Errors, served.Load(), want)
	}
	if !(res.P50MS > 0 && res.P99MS >= res.P50MS && res.MaxMS >= res.P99MS) || res.SuccessRatio != 1 {
		t.Errorf("latencies p50 %v p99 %v max %v ms, success %v", res.P50MS, res.P99MS, res.MaxMS, res.SuccessRatio)
	}
}

// TestOpenLoopCountsFailures has the server fail its first requests: each
// failure is counted once, its connection leaves the rotation, and the
// remaining connections answer the rest.
func TestOpenLoopCountsFailures(t *testing.T) {
	const failFirst = 5
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= failFirst {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	res, err := OpenLoop(context.Background(), srv.URL+"/", 1000, 300*time.Millisecond, 9)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != failFirst || res.Requests != seen.Load() {
		t.Errorf("sent %d with %d errors, server saw %d; want %d errors and every request seen", res.Requests, res.Errors, seen.Load(), failFirst)
	}
}

// TestStreamsHoldEveryRequestAtOnce runs the h2_streams client against an
// h2c server that holds each request longer than the ramp: every request
// is in flight at once, spread over N/PerConn connections; an answer
// other than 200 is an error with its text kept.
func TestStreamsHoldEveryRequestAtOnce(t *testing.T) {
	const hold = 300 * time.Millisecond
	var conns atomic.Int64
	srv := &http.Server{
		Protocols: new(http.Protocols),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fail" {
				http.Error(w, "no", http.StatusServiceUnavailable)
				return
			}
			time.Sleep(hold)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	srv.Protocols.SetUnencryptedHTTP2(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	res, err := Streams{Addr: ln.Addr().String(), Path: "/hold", N: 40, PerConn: 10, Ramp: 50 * time.Millisecond}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Conns != 4 || conns.Load() != 4 || res.Errors != 0 || res.Peak != 40 || res.P50MS < msOf(hold) || res.MaxMS < res.P99MS {
		t.Errorf("%+v with %d connections at the server; want 40 held at once over 4, no error, latency ≥ the hold", res, conns.Load())
	}
	res, err = Streams{Addr: ln.Addr().String(), Path: "/fail", N: 7, PerConn: 10}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 7 || len(res.Samples) != maxErrSamples || !strings.HasPrefix(res.Samples[0], "503") || res.P99MS != 0 {
		t.Errorf("%+v; want 7 errors, %d samples of a 503, no latency", res, maxErrSamples)
	}
}
