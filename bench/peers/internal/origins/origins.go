// Package origins starts the `corput origin` processes a peers run sends
// its load to, and reads their own counters: the ground truth that every
// upstream figure of a scenario comes from.
//
// Invariants:
//   - An origin is a real child (`corput origin`, started through proc),
//     ready once it printed its listening line; with a processor count it
//     runs with that GOMAXPROCS, so it stands in for a service on another
//     machine and leaves the other cores to the proxy under test.
//   - The readings of one origin's stats share one keep-alive connection:
//     the body is read to its end, so the connection is reused. The
//     connections and handshakes the origins count while a proxy runs are
//     the proxy's; the runner's own stats connection is in every baseline
//     and in no difference.
//   - A Tally is one reading of every origin of a group; the difference
//     of two (Since) is what happened between them.
package origins

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/internal/origin"
)

// Proc is one `corput origin` child.
type Proc struct {
	ID   string
	Addr string
	// Endpoints are its listeners' addresses (origin --listeners), or its
	// one address.
	Endpoints []string

	c     *proc.Child
	https *http.Client // reads a TLS origin's stats; nil: cleartext
}

// listening is `corput origin`'s first line on stdout.
var listening = regexp.MustCompile(`listening on https?://(\S+)`)

// Start runs `corput origin --listen listen --id id --seed seed` with
// extra flags (a profile, a workload), with gomaxprocs processors when it
// is above 0, and waits for its listening line.
func Start(ctx context.Context, ps *proc.Procs, bin, id, listen string, seed uint64, gomaxprocs int, extra ...string) (*Proc, error) {
	argv := append([]string{bin, "origin", "--listen", listen, "--id", id, "--seed", fmt.Sprint(seed)}, extra...)
	var env []string
	if gomaxprocs > 0 {
		env = []string{fmt.Sprintf("GOMAXPROCS=%d", gomaxprocs)}
	}
	c, err := ps.Start("origin-"+id, env, argv...)
	if err != nil {
		return nil, err
	}
	m, err := c.WaitLog(ctx, listening)
	if err != nil {
		c.Stop(time.Second)
		return nil, err
	}
	return &Proc{ID: id, Addr: m[1], Endpoints: []string{m[1]}, c: c}, nil
}

// Stop stops the origin.
func (o *Proc) Stop() { o.c.Stop(5 * time.Second) }

// statsClient reads cleartext origins' stats.
var statsClient = &http.Client{Timeout: 5 * time.Second}

// HTTPSClient is a client for TLS origins' stats: one keep-alive
// connection per origin process, opened by the first reading (before any
// proxy runs) and reused, so its one handshake per process is in every
// baseline and in no difference.
func HTTPSClient(c *tls.Config) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c, MaxIdleConnsPerHost: 1}}
}

// Stats reads the origin's ground truth.
func (o *Proc) Stats() (origin.Stats, error) {
	var st origin.Stats
	client, url := statsClient, "http://"+o.Addr+origin.StatsPath
	if o.https != nil {
		client, url = o.https, "https://"+o.Addr+origin.StatsPath
	}
	resp, err := client.Get(url)
	if err != nil {
		return st, fmt.Errorf("origin %s stats: %w", o.ID, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("origin %s stats: %w", o.ID, err)
	}
	// The decoder stops at the value's end: read the rest (the encoder's
	// newline, a chunked body's last chunk) so the keep-alive connection
	// is reused. A body closed before its end closes the connection, and
	// the redial (a TCP connection, over TLS a full handshake) would be
	// counted as the running proxy's.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return st, fmt.Errorf("origin %s stats: %w", o.ID, err)
	}
	return st, nil
}

// Group is origin processes started and read together.
type Group []*Proc

// Spec says how to start a group of origins.
type Spec struct {
	Bin    string // corput
	Prefix string // the ids are Prefix1, Prefix2, …
	Procs  int
	// Seed is the first's seed less one: origin i (from 1) gets Seed+i.
	Seed       uint64
	GOMAXPROCS int // each origin's processors; 0: Go's default
	// Listeners is each process's listeners (origin --listeners), each
	// one an endpoint; 0: one listener, the process's address.
	Listeners int
	// HTTPS reads TLS origins' stats (HTTPSClient); nil: cleartext.
	HTTPS *http.Client
	Args  []string // the origins' other flags
}

// StartGroup starts s.Procs origins on free ports, one after another,
// and with Listeners checks each has them all. On an error the ones
// already started are stopped.
func StartGroup(ctx context.Context, ps *proc.Procs, s Spec) (Group, error) {
	args := s.Args
	if s.Listeners > 0 {
		args = append([]string{"--listeners", strconv.Itoa(s.Listeners)}, args...)
	}
	var g Group
	for i := 1; i <= s.Procs; i++ {
		o, err := startIn(ctx, ps, s, i, args)
		if err != nil {
			g.Stop()
			return nil, err
		}
		g = append(g, o)
	}
	return g, nil
}

// startIn starts the group's origin i.
func startIn(ctx context.Context, ps *proc.Procs, s Spec, i int, args []string) (*Proc, error) {
	id := fmt.Sprintf("%s%d", s.Prefix, i)
	o, err := Start(ctx, ps, s.Bin, id, "127.0.0.1:0", s.Seed+uint64(i), s.GOMAXPROCS, args...)
	if err != nil {
		return nil, err
	}
	o.https = s.HTTPS
	if s.Listeners == 0 {
		return o, nil
	}
	st, err := o.Stats()
	if err == nil && len(st.Listeners) != s.Listeners {
		err = fmt.Errorf("origin %s: %d listeners, want %d", id, len(st.Listeners), s.Listeners)
	}
	if err != nil {
		o.Stop()
		return nil, err
	}
	o.Endpoints = o.Endpoints[:0]
	for _, l := range st.Listeners {
		o.Endpoints = append(o.Endpoints, l.Address)
	}
	return o, nil
}

// Endpoints are every origin's endpoints, in order: what a proxy is put
// in front of.
func (g Group) Endpoints() []string {
	var out []string
	for _, o := range g {
		out = append(out, o.Endpoints...)
	}
	return out
}

// Stop stops every origin of g and closes the idle connections of its
// stats clients.
func (g Group) Stop() {
	for _, o := range g {
		o.Stop()
		if o.https != nil {
			o.https.CloseIdleConnections()
		}
	}
}
