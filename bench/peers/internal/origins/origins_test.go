package origins

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/internal/origin"
	"github.com/corput/corput/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartSetsProcessors starts an origin with one processor and checks
// the process's environment says so; with 0 the variable is left alone.
func TestStartSetsProcessors(t *testing.T) {
	dir := t.TempDir()
	// A stand-in for `corput origin`: it prints the listening line and
	// waits; what is checked is the environment it was started with.
	bin := filepath.Join(dir, "origin.sh")
	script := "#!/bin/sh\necho \"listening on http://127.0.0.1:1 GOMAXPROCS=[$GOMAXPROCS]\"\nexec sleep 60\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMAXPROCS", "")
	for _, tc := range []struct {
		procs int
		want  string
	}{{1, "GOMAXPROCS=[1]"}, {0, "GOMAXPROCS=[]"}} {
		ps := proc.New(dir)
		o, err := Start(context.Background(), ps, bin, fmt.Sprint("p", tc.procs), "127.0.0.1:0", 1, tc.procs)
		if err != nil {
			ps.StopAll()
			t.Fatal(err)
		}
		text, _ := os.ReadFile(o.c.Log())
		ps.StopAll()
		if !strings.Contains(string(text), tc.want) {
			t.Errorf("--origin-procs %d: the origin printed %q, want %s", tc.procs, text, tc.want)
		}
		if o.Addr != "127.0.0.1:1" || len(o.Endpoints) != 1 || o.Endpoints[0] != o.Addr {
			t.Errorf("address %q, endpoints %v; want the listening line's, as the one endpoint", o.Addr, o.Endpoints)
		}
	}
}

// TestStatsReadingsReuseOneConnection: the runner's readings of an
// origin's stats share one keep-alive connection, so the connections and
// handshakes the origins count while a proxy runs are the proxy's. A body
// closed before its end (the stats page is chunked, and the decoder stops
// at the value) would close the connection and count a redial.
func TestStatsReadingsReuseOneConnection(t *testing.T) {
	for _, proto := range []origin.Proto{origin.H1, origin.TLS} {
		t.Run(string(proto), func(t *testing.T) {
			opts := origin.Options{Proto: proto, Listeners: 150} // a stats page of tens of kilobytes, as a benchmark origin's after minutes of per-second history
			if proto == origin.TLS {
				opts.MinTLS = tls.VersionTLS13
			}
			s, err := origin.Start(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			o := &Proc{ID: "o1", Addr: s.Addr()}
			if proto == origin.TLS {
				c := HTTPSClient(&tls.Config{RootCAs: s.CertPool(), MinVersion: tls.VersionTLS13})
				defer c.CloseIdleConnections()
				o.https = c
			} else {
				defer statsClient.CloseIdleConnections()
			}
			const readings = 30
			for range readings {
				if _, err := o.Stats(); err != nil {
					t.Fatal(err)
				}
			}
			st := s.Stats()
			if st.Connections.Accepted != 1 {
				t.Errorf("%d readings opened %d connections, want 1", readings, st.Connections.Accepted)
			}
			if st.TLS != nil && st.TLS.Full+st.TLS.Resumed != 1 {
				t.Errorf("%d readings made %d full and %d resumed handshakes, want 1 in all", readings, st.TLS.Full, st.TLS.Resumed)
			}
		})
	}
}

// TestTallyDuring reads two real origins (in this process) around a few
// requests: the difference counts the class requests by
// origin, the raw ones apart, every listener's requests, and the
// connections the client opened; the runner's own stats connection is
// not among the open ones.
func TestTallyDuring(t *testing.T) {
	var g Group
	for i := 1; i <= 2; i++ {
		s, err := origin.Start(origin.Options{Listeners: 2, Classes: []workload.Class{{Name: "light", Latency: time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		g = append(g, &Proc{ID: fmt.Sprint("o", i), Addr: s.Addr(), Endpoints: s.Addrs()})
	}
	defer statsClient.CloseIdleConnections()
	before, err := g.Tally()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	eps := g.Endpoints()
	d, err := g.During(func() error {
		for i, path := range []string{"/light", "/light", "/", "/light", "/"} {
			resp, err := client.Get("http://" + eps[i%len(eps)] + path)
			if err != nil {
				return err
			}
			resp.Body.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 4 || d.Accepted != 5 || d.Raw != 2 || d.Requests != 5 || d.ClassTotal() != 3 || d.Class["o1"] != 2 || d.Class["o2"] != 1 {
		t.Errorf("endpoints %v, difference %+v; want 4 endpoints, 5 connections, 2 raw and 3 class requests (2 at o1, 1 at o2)", eps, d)
	}
	if d.Endpoint[eps[0]] != 2 || d.Endpoint[eps[1]] != 1 || d.Endpoint[eps[2]] != 1 || d.Endpoint[eps[3]] != 1 {
		t.Errorf("by endpoint %v", d.Endpoint)
	}
	if d.Full != 0 || len(d.Negotiated) != 0 {
		t.Errorf("handshakes %d, negotiated %v; want none (no TLS)", d.Full, d.Negotiated)
	}
	if before.Open != 0 {
		t.Errorf("open before the requests: %d; want 0, the stats connections left out", before.Open)
	}
}
