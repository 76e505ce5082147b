package origin

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTheConsoleLines: the banner names the URL and, for several
// listeners, their span; the status and stop lines count what the
// origin served.
func TestTheConsoleLines(t *testing.T) {
	one := start(t, Options{Classes: tiny(time.Millisecond, time.Millisecond)})
	want := fmt.Sprintf("listening on %s (profile , h1, workers %d, slowdown 1, warm-up %s, error rate 0)", one.URL(), one.Options().Workers, one.Options().Warmup)
	if got := one.Banner(); got != want {
		t.Errorf("banner\n got %q\nwant %q", got, want)
	}
	four := start(t, Options{Listeners: 4, Classes: tiny(time.Millisecond, time.Millisecond)})
	addrs := four.Addrs()
	last := addrs[3][strings.LastIndexByte(addrs[3], ':')+1:]
	if note := ", 4 listeners " + addrs[0] + "–" + last + ")"; !strings.HasSuffix(four.Banner(), note) {
		t.Errorf("banner %q, want it to end %q", four.Banner(), note)
	}

	for range 3 {
		resp, err := http.Get(one.URL() + "/light")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	st := one.Stats()
	if got, want := st.Summary(), fmt.Sprintf("stopped: %d connections accepted, 3 requests (3 ok, 0 500, 0 cut), peak 1 in service, 0 waiting", st.Connections.Accepted); got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
	if got := st.statusLine(1); !strings.HasPrefix(got, "\r") || !strings.Contains(got, ", 2 req/s, in service 0 (peak 1), waiting 0, warm-up 1.00x") {
		t.Errorf("status line %q: want 2 req/s after 1 of 3", got)
	}
}
