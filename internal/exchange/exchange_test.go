package exchange

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/corput/corput/internal/forward"
	"github.com/corput/corput/internal/h2"
	"github.com/corput/corput/internal/upstream"
)

// TestResponsesReachTheClient: each response shape reaches the client with
// its framing, on both wires and for a client that takes HTTP/1.1 chunks
// as they are (the fast path) or not (net/http's).
func TestResponsesReachTheClient(t *testing.T) {
	o := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Proto", r.Proto)
		switch r.URL.Path {
		case "/fixed":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		case "/stream":
			io.WriteString(w, "part1;")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part2")
		case "/trailers":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "body")
			w.(http.Flusher).Flush()
			w.Header().Set("X-Sum", "4")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	for _, p := range protocols {
		for _, raw := range []bool{false, true} {
			for _, tc := range []struct {
				method, path string
				status       int
				body         string
				framing      Framing
				length       int64
				trailer      string
			}{
				{"GET", "/fixed", 200, "hello", Length, 5, ""},
				{"HEAD", "/fixed", 200, "", None, 5, ""},
				{"GET", "/stream", 200, "part1;part2", Stream, -1, ""},
				{"GET", "/trailers", 200, "body", Stream, -1, "4"},
				{"GET", "/empty", 204, "", None, -1, ""},
			} {
				name := fmt.Sprintf("%s/raw=%v/%s %s", p.name, raw, tc.method, tc.path)
				t.Run(name, func(t *testing.T) {
					r := newRig(t, addrOf(o), p.proto)
					c := newRecorder(raw)
					status, step, _ := r.do(&Request{Method: tc.method, Target: tc.path}, c)
					if status != tc.status || step != forward.Delivered {
						t.Fatalf("status %d step %v, want %d delivered", status, step, tc.status)
					}
					body, framing := c.body.String(), c.head.Framing
					if raw && p.name == "h1" && (tc.path == "/stream" || tc.path == "/trailers") && tc.method == "GET" {
						// net/http's server chunks a body it does not know the
						// length of: the fast path passes the chunks on as they are.
						if framing != Chunked || !strings.Contains(body, "\r\n") {
							t.Fatalf("framing %v body %q, want the origin's chunks", framing, body)
						}
						if !c.ended || c.n != int64(len(tc.body)) {
							t.Fatalf("ended %v with %d data bytes, want %d", c.ended, c.n, len(tc.body))
						}
						return
					}
					if body != tc.body || framing != tc.framing {
						t.Fatalf("body %q framing %v, want %q %v", body, framing, tc.body, tc.framing)
					}
					if tc.framing == Length && c.head.Length != tc.length || tc.method == "HEAD" && c.head.Length != tc.length {
						t.Fatalf("length %d, want %d", c.head.Length, tc.length)
					}
					if got := c.trailer.Get("X-Sum"); got != tc.trailer {
						t.Fatalf("trailer X-Sum %q, want %q", got, tc.trailer)
					}
					if !c.ended || c.aborted {
						t.Fatalf("ended %v aborted %v", c.ended, c.aborted)
					}
					if c.fields.Get("X-Seen-Proto") == "" {
						t.Fatalf("fields %v: the origin's X-Seen-Proto is missing", c.fields)
					}
					if r.conns() != 1 {
						t.Fatalf("the pool holds %d connections after a clean exchange, want 1 (kept)", r.conns())
					}
				})
			}
		}
	}
}

// TestRequestsReachTheOrigin: the request's head and body reach the origin
// as the serving path gave them, on both wires: fields in order, TE,
// Content-Length (also 0 on a POST), a body of unknown length streamed
// with its trailers, and a duplex body that streams while the response
// does.
func TestRequestsReachTheOrigin(t *testing.T) {
	o := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s host=%s a=%v te=%q cl=%d te-body=%v body=%q trailer=%q",
			r.Method, r.URL.RequestURI(), r.Host, r.Header["X-A"], r.Header.Get("Te"), r.ContentLength, r.TransferEncoding, b, r.Trailer.Get("X-T"))
	}))
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			r := newRig(t, addrOf(o), p.proto)
			fields := []hpack.HeaderField{{Name: "X-A", Value: "1"}, {Name: "X-A", Value: "2"}}
			for _, tc := range []struct {
				name string
				req  Request
				want string
			}{
				{"get", Request{Method: "GET", Target: "/a?b=c", Fields: fields, TE: true},
					`GET /a?b=c host=%s a=[1 2] te="trailers" cl=0 te-body=[] body="" trailer=""`},
				{"empty post", Request{Method: "POST", Target: "/p"},
					`POST /p host=%s a=[] te="" cl=0 te-body=[] body="" trailer=""`},
				{"fixed body", Request{Method: "PUT", Target: "/u", Length: 3, Body: strings.NewReader("abc")},
					`PUT /u host=%s a=[] te="" cl=3 te-body=[] body="abc" trailer=""`},
				{"streamed body", Request{Method: "POST", Target: "/s", Length: -1, Body: strings.NewReader("streamed"), Trailer: http.Header{"X-T": {"t1"}}, Duplex: true},
					`POST /s host=%s a=[] te="" cl=-1 te-body=[chunked] body="streamed" trailer="t1"`},
			} {
				c := newRecorder(false)
				req := tc.req
				status, _, _ := r.do(&req, c)
				want := fmt.Sprintf(tc.want, r.addr)
				if p.name == "h2" {
					want = strings.Replace(want, " te-body=[chunked]", " te-body=[]", 1) // HTTP/2 has no chunked framing
				}
				if status != 200 || c.body.String() != want {
					t.Fatalf("%s: %d %q\nwant %q", tc.name, status, c.body.String(), want)
				}
			}
		})
	}
}

// TestDuplexBodyStreamsBothWays: a duplex body's parts go up while the
// answers to the earlier ones come back (gRPC's bidirectional streams).
func TestDuplexBodyStreamsBothWays(t *testing.T) {
	o := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		buf := make([]byte, 5)
		for {
			if _, err := io.ReadFull(r.Body, buf); err != nil {
				return
			}
			w.Write(buf)
			w.(http.Flusher).Flush()
		}
	}))
	r := newRig(t, addrOf(o), upstream.H2C)
	pr, pw := io.Pipe()
	c := &echoClient{recorder: newRecorder(false), pw: pw, left: 3}
	status, step, _ := r.do(&Request{Method: "POST", Target: "/echo", Length: -1, Body: pr, Duplex: true}, c)
	if status != 200 || step != forward.Delivered || c.body.String() != "msg00msg01msg02" {
		t.Fatalf("%d %v %q", status, step, c.body.String())
	}
}

// echoClient sends the next message each time the previous one came back.
type echoClient struct {
	*recorder
	pw   *io.PipeWriter
	left int
	sent int
}

func (e *echoClient) WriteHead(h *Head) error {
	e.recorder.WriteHead(h)
	e.next()
	return nil
}

func (e *echoClient) Write(p []byte) (int, error) {
	n, err := e.recorder.Write(p)
	if e.body.Len() == 5*e.sent {
		e.next()
	}
	return n, err
}

func (e *echoClient) next() {
	if e.sent == e.left {
		e.pw.Close()
		return
	}
	go fmt.Fprintf(e.pw, "msg%02d", e.sent)
	e.sent++
}

// TestInterimResponsesAreSkipped: a 103 before the answer reaches no
// client; the answer does.
func TestInterimResponsesAreSkipped(t *testing.T) {
	o := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "after")
	}))
	for _, p := range protocols {
		r := newRig(t, addrOf(o), p.proto)
		c := newRecorder(true)
		if status, _, _ := r.do(get("/"), c); status != 200 || c.body.String() != "after" {
			t.Fatalf("%s: %d %q", p.name, status, c.body.String())
		}
	}
}

// TestFailuresAreClassified: what fails an exchange before its response
// becomes one forward.Reason, on either wire.
func TestFailuresAreClassified(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	o := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hang":
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		case "/big":
			w.Header().Set("X-Big", strings.Repeat("b", 32<<10))
		case "/reset":
			panic(http.ErrAbortHandler)
		}
	}))
	for _, p := range protocols {
		for _, tc := range []struct {
			path   string
			reason forward.Reason
		}{
			{"/hang", forward.UpstreamTimeout},
			{"/big", forward.UpstreamHeadTooLarge},
			{"/reset", forward.UpstreamReset},
		} {
			t.Run(p.name+tc.path, func(t *testing.T) {
				r := newRig(t, addrOf(o), p.proto)
				req := get(tc.path)
				req.Deadline = time.Now().Add(150 * time.Millisecond)
				status, step, reason := r.do(req, newRecorder(true))
				if status != 0 || step != forward.Answer || reason != tc.reason {
					t.Fatalf("%d %v %v, want an answer with %v", status, step, reason, tc.reason)
				}
			})
		}
	}
}

// TestRefusedStreamSentNothing: an HTTP/2 REFUSED_STREAM is a failure that
// sent nothing, and leaves the connection usable.
func TestRefusedStreamSentNothing(t *testing.T) {
	addr := rawOrigin(t, func(nc net.Conn) {
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, preface); err != nil {
			return
		}
		fr := http2.NewFramer(nc, nc)
		fr.WriteSettings()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.HeadersFrame:
				fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
			}
		}
	})
	r := newRig(t, addr, upstream.H2C)
	_, step, reason := r.do(get("/"), newRecorder(true))
	if step != forward.Again || reason != forward.UpstreamReset {
		t.Fatalf("%v %v, want it to go again (a refused stream sent nothing: any method goes again)", step, reason)
	}
	if r.conns() != 1 {
		t.Fatalf("%d connections held, want the refused stream's connection kept", r.conns())
	}
}

// TestClientLeavesWhileTheOriginThinks: a client that leaves while its
// exchange waits cuts the exchange: the attempt ends Gone and the
// connection is not reused.
func TestClientLeavesWhileTheOriginThinks(t *testing.T) {
	arrived := make(chan struct{}, 2)
	o := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			r := newRig(t, addrOf(o), p.proto)
			c := newRecorder(true)
			go func() {
				<-arrived
				c.leave()
			}()
			_, step, _ := r.do(get("/"), c)
			if step != forward.Gone {
				t.Fatalf("step %v, want gone", step)
			}
			if p.name == "h1" && r.conns() != 0 {
				t.Fatalf("%d connections held after a cut HTTP/1.1 exchange, want 0", r.conns())
			}
		})
	}
}

// TestBodyThatBreaksIsAborted: a body the origin breaks after its head
// reaches the client aborted, never as a short whole response.
func TestBodyThatBreaksIsAborted(t *testing.T) {
	o := origin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "12345")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	for _, p := range protocols {
		for _, raw := range []bool{true, false} {
			r := newRig(t, addrOf(o), p.proto)
			c := newRecorder(raw)
			status, _, _ := r.do(get("/"), c)
			if status != 200 || !c.aborted || c.ended || c.n != 5 {
				t.Fatalf("%s raw=%v: status %d aborted %v ended %v n %d", p.name, raw, status, c.aborted, c.ended, c.n)
			}
		}
	}
}

// TestUpgradeHandsTheConnectionOver: a 101 to a request that asked for the
// protocol hands the origin's connection to the client; one nobody asked
// for breaks the protocol.
func TestUpgradeHandsTheConnectionOver(t *testing.T) {
	addr := rawOrigin(t, func(nc net.Conn) {
		br := bufio.NewReader(nc)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		fmt.Fprintf(nc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", req.Header.Get("Upgrade"))
		io.Copy(nc, br) // echo
	})
	r := newRig(t, addr, upstream.H1)
	c := newRecorder(false)
	req := &Request{Method: "GET", Target: "/ws", Upgrade: "echo",
		Fields: []hpack.HeaderField{{Name: "Connection", Value: "Upgrade"}, {Name: "Upgrade", Value: "echo"}}}
	status, step, _ := r.do(req, c)
	if status != 101 || step != forward.Delivered || c.body.String() != "ping" || c.fields.Get("Upgrade") != "echo" {
		t.Fatalf("%d %v %q %v", status, step, c.body.String(), c.fields)
	}
	if r.conns() != 0 {
		t.Fatalf("an upgraded connection went back to the pool (%d held)", r.conns())
	}
	_, step, reason := r.do(get("/ws"), newRecorder(true))
	if step != forward.Answer || reason != forward.UpstreamReset {
		t.Fatalf("an unasked 101: %v %v, want upstream_reset", step, reason)
	}
}

// TestFailureOf is the one classification, error by error.
func TestFailureOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want forward.Failure
	}{
		{ErrClientGone, forward.ClientLeft},
		{io.ErrUnexpectedEOF, forward.Broken},
		{fmt.Errorf("x: %w", upstream.ErrHeadTooLarge), forward.HeadTooLarge},
		{h2.ErrHeadTooLarge, forward.HeadTooLarge},
		{h2.ErrDone, forward.Timeout},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, forward.Timeout},
		{upstream.ErrConnUnusable, forward.Refused},
		{upstream.ErrConnBusy, forward.Refused},
		{&h2.StreamError{Code: h2.CodeRefusedStream}, forward.Refused},
		{&h2.StreamError{Code: h2.CodeProtocol}, forward.Protocol},
		{syscall.ECONNRESET, forward.Broken},
		{io.EOF, forward.Broken},
		{errors.New("anything else"), forward.Broken},
	} {
		if got := failureOf(tc.err, nil); got != tc.want {
			t.Errorf("failureOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "timeout" }
func (timeoutErr) Timeout() bool { return true }
