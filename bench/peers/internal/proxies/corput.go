package proxies

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corput/corput/bench/peers/internal/certs"
	"github.com/corput/corput/bench/peers/internal/proc"
	"github.com/corput/corput/bench/peers/internal/results"
	"github.com/corput/corput/internal/workload"
)

// Corput is the gateway under test, `corput serve`.
type Corput struct {
	Binary     string // the corput executable
	Balancer   string // the balancer: line's flow mapping; "" for DefaultBalancer
	Downstream string // the downstream: line's flow mapping; "" for none
	Loops      int    // the loops: line; 0 for none (corput's default)
	Prior      bool   // probed over h2c (its cleartext listener always speaks it)
}

// corputOrigin is the origin's name in corput's config.
const corputOrigin = "bench"

// DefaultBalancer is corput's default policy, written out.
const DefaultBalancer = "{policy: least_work, choices: 2}"

func (Corput) Name() string { return results.Corput }
func (Corput) Bin() string  { return "" }
func (p Corput) H2C() bool  { return p.Prior }
func (p Corput) balancer() string {
	if p.Balancer == "" {
		return DefaultBalancer
	}
	return p.Balancer
}

func (p Corput) launch(dir string) (string, []string) {
	path := filepath.Join(dir, "corput.yaml")
	return path, []string{p.Binary, "serve", "--config", path, "--log-level", "warn"}
}

// corputHead is the start of every corput config: its listener, its
// admin listener on a free port, and the one route to the one origin.
func corputHead(b *strings.Builder, listen string) error {
	admin, err := proc.FreePort()
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "listen: %s\nadmin: %s\n", listen, admin)
	return nil
}

// corputConfig is the gateway's config: defaults everywhere (least_work
// with two choices, 50 pending per endpoint, 60 s slow start, retries of
// connect failures), members static, or from a watched file when a member
// joins later; with tc, HTTPS on listen (the tls block has no version or
// cipher setting: Go's defaults, TLS 1.2 and 1.3); loops above 0 sets the
// loops (the spread scenario's 16).
func (p Corput) config(listen string, members []string, joining bool, tc *certs.Files) (string, error) {
	var b strings.Builder
	if err := corputHead(&b, listen); err != nil {
		return "", err
	}
	if p.Loops > 0 {
		fmt.Fprintf(&b, "loops: %d\n", p.Loops)
	}
	if tc != nil {
		fmt.Fprintf(&b, "tls: {cert: %q, key: %q}\n", tc.Cert, tc.Key)
	}
	if p.Downstream != "" {
		b.WriteString("downstream: " + p.Downstream + "\n")
	}
	b.WriteString("routes:\n  - {path_prefix: /, origin: " + corputOrigin + "}\n")
	b.WriteString("origins:\n  - name: " + corputOrigin + "\n    protocol: h1\n")
	if joining {
		b.WriteString("    discovery: {type: file, path: endpoints.yaml}\n    debounce: 500ms\n")
	} else {
		b.WriteString(endpointsYAML(members, "    "))
	}
	b.WriteString("    balancer: " + p.balancer() + "\n")
	b.WriteString("    slow_start: {window: 60s}\n")
	b.WriteString("    timeouts: {connect: 1s, request: 30s}\n")
	b.WriteString(workloadYAML(workload.Default()))
	return b.String(), nil
}

// workloadYAML is corput's workload block for the load generator's mix:
// its classes, each matched by the path suffix the generator gives its
// requests (/light, /heavy), so that corput knows each request's class
// and cost (the peers have no such setting; raw requests match none and
// cost 1).
func workloadYAML(m workload.Mix) string {
	var b strings.Builder
	b.WriteString("workload:\n  classes:\n")
	for _, c := range m.Classes {
		fmt.Fprintf(&b, "    - {name: %s, percent: %g, latency: %v, match: {path_suffix: /%s}}\n", c.Name, c.Percent, c.Latency, c.Name)
	}
	return b.String()
}

func endpointsYAML(members []string, indent string) string {
	if len(members) == 0 {
		return indent + "endpoints: []\n"
	}
	var b strings.Builder
	b.WriteString(indent + "endpoints:\n")
	for _, m := range members {
		fmt.Fprintf(&b, "%s  - {address: %s}\n", indent, m)
	}
	return b.String()
}

func (p Corput) Files(dir, listen string, members []string, joining string, tc *certs.Files) ([]string, error) {
	if joining != "" {
		if err := p.Join(dir, members); err != nil {
			return nil, err
		}
	}
	text, err := p.config(listen, members, joining != "", tc)
	if err != nil {
		return nil, err
	}
	return write(p, dir, text)
}

// Join rewrites the endpoints file atomically (a temporary file renamed
// over it), as discovery.md asks.
func (Corput) Join(dir string, members []string) error {
	tmp := filepath.Join(dir, "endpoints.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(endpointsYAML(members, "")), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "endpoints.yaml"))
}

// Traced is corput with a tracing block appended to its config, named
// corput-tracing-Variant.
type Traced struct {
	Corput
	Variant string
	Block   string // the tracing block; "" for tracing off
}

func (p Traced) Name() string { return results.Corput + "-tracing-" + p.Variant }

func (p Traced) Files(dir, listen string, members []string, joining string, tc *certs.Files) ([]string, error) {
	cmd, err := p.Corput.Files(dir, listen, members, joining, tc)
	if err != nil {
		return nil, err
	}
	path, _ := p.launch(dir)
	cfg, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return cmd, os.WriteFile(path, append(cfg, p.Block...), 0o644)
}

// adminClient reads corput's admin listener.
var adminClient = &http.Client{Timeout: 5 * time.Second}

// CorputAdmin reads the admin address from the corput.yaml that a
// Corput's Files wrote in dir.
func CorputAdmin(dir string) (string, error) {
	path := filepath.Join(dir, "corput.yaml")
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "admin: "); ok {
			return strings.TrimSpace(a), nil
		}
	}
	return "", fmt.Errorf("%s: no admin line", path)
}

// CorputLoopRequests reads the requests corput placed on each loop of the
// bench origin, by loop index, from /admin/origins.
func CorputLoopRequests(admin string) ([]uint64, error) {
	resp, err := adminClient.Get("http://" + admin + "/admin/origins")
	if err != nil {
		return nil, fmt.Errorf("corput /admin/origins: %w", err)
	}
	defer resp.Body.Close()
	var origins []struct {
		Name  string `json:"name"`
		Loops []struct {
			Loop     int    `json:"loop"`
			Requests uint64 `json:"requests"`
		} `json:"loops"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&origins); err != nil {
		return nil, fmt.Errorf("corput /admin/origins: %w", err)
	}
	for _, o := range origins {
		if o.Name != corputOrigin {
			continue
		}
		out := make([]uint64, len(o.Loops))
		for _, l := range o.Loops {
			if l.Loop < 0 || l.Loop >= len(out) {
				return nil, fmt.Errorf("corput /admin/origins: loop %d of %d", l.Loop, len(out))
			}
			out[l.Loop] = l.Requests
		}
		return out, nil
	}
	return nil, fmt.Errorf("corput /admin/origins: no origin %q", corputOrigin)
}

// CorputSpansDropped scrapes corput_tracing_spans_dropped_total from the
// admin listener admin of the corput running now.
func CorputSpansDropped(ctx context.Context, admin string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+admin+"/metrics", nil)
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "corput_tracing_spans_dropped_total "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return 0, err
}
