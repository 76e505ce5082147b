package upstream

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// rawGet makes one exchange through Raw and reads the response whole.
func rawGet(t *testing.T, c Raw, path string, deadline time.Time) string {
	t.Helper()
	br, bw, err := c.Begin(deadline, false)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	fmt.Fprintf(bw, "GET %s HTTP/1.1\r\nHost: origin\r\n\r\n", path)
	if err := bw.Flush(); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	c.End(true)
	return string(b)
}

// TestRawDeadlineLeftBehind: a Raw exchange leaves its read deadline on
// the socket (one timer update per request); once it has passed, the
// connection is still usable, a probe still finds it alive, and both a
// roundTrip and a Raw exchange without a deadline may take longer than the
// old deadline allowed.
func TestRawDeadlineLeftBehind(t *testing.T) {
	noLeaks(t)
	o := startOrigin(t, originOpts{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(150 * time.Millisecond)
		}
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	c := mustDial(t, mustDialer(t, Options{}), o.addr()).(Raw)
	if got := rawGet(t, c, "/a", time.Now().Add(50*time.Millisecond)); got != "hello /a" {
		t.Fatalf("first exchange: %q", got)
	}
	time.Sleep(100 * time.Millisecond) // the deadline the exchange left has passed
	if !c.Usable() || !c.Usable() {
		t.Fatal("an idle connection whose old exchange deadline passed was found dead")
	}
	req, _ := http.NewRequest(http.MethodGet, o.url("/slow"), nil)
	resp, err := roundTrip(c, req)
	if err != nil {
		t.Fatalf("roundTrip after a Raw exchange: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "hello /slow" {
		t.Fatalf("roundTrip body %q, %v", b, err)
	}
	if got := rawGet(t, c, "/b", time.Now().Add(50*time.Millisecond)); got != "hello /b" {
		t.Fatalf("Raw exchange after a roundTrip: %q", got)
	}
	if got := rawGet(t, c, "/slow", time.Time{}); got != "hello /slow" {
		t.Fatalf("Raw exchange without a deadline after one with: %q", got)
	}
	if n := o.accepted.Load(); n != 1 {
		t.Fatalf("origin accepted %d connections, want 1", n)
	}
}

// TestRawDeadlineBoundsTheExchange: the deadline Begin sets ends a read
// that waits too long.
func TestRawDeadlineBoundsTheExchange(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	o := startOrigin(t, originOpts{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer close(release)
	c := mustDial(t, mustDialer(t, Options{}), o.addr()).(Raw)
	br, bw, err := c.Begin(time.Now().Add(50*time.Millisecond), false)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(bw, "GET / HTTP/1.1\r\nHost: origin\r\n\r\n")
	bw.Flush()
	if _, err := br.Peek(1); err == nil {
		t.Fatal("read returned data from an origin that never answers")
	} else if ne, ok := err.(interface{ Timeout() bool }); !ok || !ne.Timeout() {
		t.Fatalf("read error %v, want a timeout", err)
	}
	c.End(false)
	if c.Usable() {
		t.Fatal("a connection that timed out mid-exchange is still usable")
	}
}

// TestDeadlineKept: the read deadline on the socket serves a new exchange
// when it is no earlier than asked and at most DeadlineSlack later; a
// deadline that is earlier (it would cut the exchange short), too late, or
// set where none is asked (or the reverse) is moved.
func TestDeadlineKept(t *testing.T) {
	base := time.Now()
	cases := []struct {
		name      string
		set, want time.Time
		kept      bool
	}{
		{"same", base, base, true},
		{"later within slack", base.Add(DeadlineSlack), base, true},
		{"earlier", base.Add(-time.Millisecond), base, false},
		{"later beyond slack", base.Add(DeadlineSlack + time.Millisecond), base, false},
		{"none asked, one set", base, time.Time{}, false},
		{"asked, none set", time.Time{}, base, false},
		{"none either", time.Time{}, time.Time{}, true},
	}
	for _, c := range cases {
		if got := deadlineKept(c.set, c.want); got != c.kept {
			t.Errorf("%s: deadlineKept = %v, want %v", c.name, got, c.kept)
		}
	}
}
