package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/corput/corput/internal/clock"
	"github.com/corput/corput/internal/config"
)

// DefaultPollInterval is how often a File source looks at its file.
const DefaultPollInterval = time.Second

// FileConfig configures a File source.
type FileConfig struct {
	Origin   string
	Path     string
	Interval time.Duration // between polls; 0 = DefaultPollInterval
	Clock    clock.Clock   // nil = clock.Real()
	Logger   *slog.Logger  // nil = slog.Default()
}

// File follows an endpoints file (see ParseEndpoints for the format) by
// reading it every Interval and comparing a hash of its content, which is
// portable and immune to coarse modification times. An invalid or missing
// file keeps the last good membership; Err names the file, line and fix.
type File struct {
	health
	cfg FileConfig

	mu      sync.Mutex // guards following
	running bool
	stopped bool
	emit    func(Update)
	timer   clock.Timer
	seen    uint64     // hash of the content last parsed; 0 before the first read
	last    []Endpoint // last membership emitted
	emitted bool
}

var _ Source = (*File)(nil)

// NewFile returns a File source; it reads nothing until Run.
func NewFile(cfg FileConfig) (*File, error) {
	if cfg.Origin == "" {
		return nil, errors.New("discovery file: no origin name")
	}
	if cfg.Path == "" {
		return nil, fmt.Errorf("origin %s: discovery.path is empty; name the endpoints file", cfg.Origin)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPollInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &File{cfg: cfg}
	f.health.log = cfg.Logger.With("origin", cfg.Origin, "file", cfg.Path)
	return f, nil
}

// Run reads the file at once and then every Interval on the clock's
// goroutine, until ctx ends.
func (f *File) Run(ctx context.Context, emit func(Update)) error {
	f.mu.Lock()
	if f.running {
		f.mu.Unlock()
		return errAlreadyRunning
	}
	f.running, f.stopped, f.emit = true, false, emit
	f.seen, f.emitted = 0, false // every Run starts by emitting the membership
	f.timer = f.cfg.Clock.AfterFunc(f.cfg.Interval, f.tick)
	f.pollLocked()
	f.mu.Unlock()

	<-ctx.Done()

	f.mu.Lock()
	f.stopped, f.running, f.emit = true, false, nil
	f.timer.Stop()
	f.mu.Unlock()
	return nil
}

func (f *File) tick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.pollLocked()
	f.timer.Reset(f.cfg.Interval)
}

// pollLocked reads the file and emits its membership if the content changed
// and is valid.
func (f *File) pollLocked() {
	data, err := os.ReadFile(f.cfg.Path)
	if err != nil {
		f.fail(fmt.Errorf("origin %s: discovery file: %w; create the file or fix discovery.path", f.cfg.Origin, err))
		f.seen = 0
		return
	}
	h := fnv.New64a()
	h.Write(data)
	sum := h.Sum64() | 1 // never 0, which means "not read yet"
	if sum == f.seen {
		return
	}
	f.seen = sum
	eps, err := ParseEndpoints(f.cfg.Path, data)
	if err != nil {
		f.fail(fmt.Errorf("origin %s: %w", f.cfg.Origin, err))
		return
	}
	f.ok()
	if f.emitted && slices.Equal(eps, f.last) {
		return
	}
	f.last, f.emitted = eps, true
	f.emit(Update{Origin: f.cfg.Origin, Endpoints: slices.Clone(eps)})
}

// ParseEndpoints parses an endpoints file: YAML (JSON is YAML too) holding
// one key, endpoints, a list of {address, zone, weight, ring_index,
// ring_subsets}. address is required; zone defaults to ""; weight to 1;
// ring_index and ring_subsets, a control plane's shared ring placement
// (ring.go), are optional but given on every endpoint or none (CheckRing).
// An empty list is a valid, empty membership; an empty file is not (it is
// what a half-written file looks like). The file is decoded as strictly as
// a config file, by config.DecodeNode; every problem is reported, each
// with its line and key, under name.
//
//	endpoints:
//	  - {address: 10.0.0.7:8080, zone: us-east-1a, weight: 2}
//	  - address: 10.0.0.8:8080
func ParseEndpoints(name string, data []byte) ([]Endpoint, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("discovery file %s is empty; write `endpoints: [...]` (an empty list removes every endpoint)", name)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("discovery file %s is not valid YAML or JSON: %w; fix the syntax", name, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("discovery file %s has no document; write `endpoints: [...]`", name)
	}
	root := doc.Content[0]
	var file endpointsFile
	lines, problems := config.DecodeNode(root, &file)
	eps, found := file.endpoints(lines, problems, root.Line)
	if problems = append(problems, found...); len(problems) > 0 {
		problems.Sort()
		errs := make([]error, len(problems))
		for i, d := range problems {
			errs[i] = fmt.Errorf("discovery file %s %s", name, d) // d.File is empty: "line N: key: message"
		}
		return nil, errors.Join(errs...)
	}
	sortEndpoints(eps)
	if err := CheckRing(eps); err != nil {
		return nil, fmt.Errorf("discovery file %s: %w; the last good set stays", name, err)
	}
	return eps, nil
}

// endpointsFile is an endpoints file as config.DecodeNode reads it. A key
// left out or given an empty value keeps its zero value; the lines the
// decoder recorded tell which keys were written.
type endpointsFile struct {
	Endpoints []endpointEntry `yaml:"endpoints"`
}

type endpointEntry struct {
	Address     string `yaml:"address"`
	Zone        string `yaml:"zone"`
	Weight      *int   `yaml:"weight"` // nil: 1
	RingIndex   int    `yaml:"ring_index"`
	RingSubsets int    `yaml:"ring_subsets"`
}

// endpoints checks what the decoder does not (a key written or not, the
// ranges, the addresses, an address listed twice) and returns the
// membership with the problems found. An entry the decoder already found
// a problem in is not checked again: it is reported once.
func (f *endpointsFile) endpoints(lines map[string]int, decoded config.Diagnostics, rootLine int) ([]Endpoint, config.Diagnostics) {
	var found config.Diagnostics
	fail := func(line int, key, format string, args ...any) {
		found = append(found, config.Diagnostic{Line: line, Key: key, Message: fmt.Sprintf(format, args...)})
	}
	if f.Endpoints == nil { // left out, empty, or not a list
		switch line, written := lines["endpoints"]; {
		case !written && !problemAt(decoded, ""):
			fail(rootLine, "", "no endpoints key; write `endpoints: [...]`")
		case written && !problemAt(decoded, "endpoints"):
			fail(line, "", "endpoints must be a list of {address, zone, weight}; write `endpoints: []` for none")
		}
		return nil, found
	}
	eps := make([]Endpoint, 0, len(f.Endpoints))
	firstLine := make(map[string]int, len(f.Endpoints))
	for i, item := range f.Endpoints {
		key := "endpoints[" + strconv.Itoa(i) + "]"
		if problemIn(decoded, key) {
			continue
		}
		line := lines[key]
		at := func(field string) int { return lines[key+"."+field] }
		written := func(field string) bool { _, ok := lines[key+"."+field]; return ok }
		e := Endpoint{Address: item.Address, Zone: item.Zone, Weight: 1,
			Indexed: written(KeyRingIndex), RingIndex: item.RingIndex, RingSubsets: item.RingSubsets}
		if item.Weight != nil {
			e.Weight = *item.Weight
		}
		switch {
		case e.Weight < 1 || e.Weight > MaxWeight:
			fail(at("weight"), key, "weight \"%d\" is not a whole number in 1..%d; write one, or leave weight out for 1", e.Weight, MaxWeight)
		case e.Indexed && (e.RingIndex < 0 || e.RingIndex > MaxRingIndex):
			fail(at(KeyRingIndex), key, "%s \"%d\" is not a whole number in 0..%d (the endpoint's shared ring index)", KeyRingIndex, e.RingIndex, MaxRingIndex)
		case written(KeyRingSubsets) && (e.RingSubsets < 1 || e.RingSubsets > MaxRingIndex):
			fail(at(KeyRingSubsets), key, "%s \"%d\" is not a whole number in 1..%d (the origin's shared subset count, a power of two)", KeyRingSubsets, e.RingSubsets, MaxRingIndex)
		case !written("address"):
			fail(line, key, "no address; write address: host:port")
		default:
			if err := e.Validate(); err != nil {
				fail(line, key, "%v", err)
			} else if prev, dup := firstLine[e.Address]; dup {
				fail(line, key, "address %s is already listed at line %d; remove one", e.Address, prev)
			} else {
				firstLine[e.Address] = line
				eps = append(eps, e)
			}
		}
	}
	return eps, found
}

// problemAt reports whether one of ds is about key itself.
func problemAt(ds config.Diagnostics, key string) bool {
	return slices.ContainsFunc(ds, func(d config.Diagnostic) bool { return d.Key == key })
}

// problemIn reports whether one of ds is about key or a key inside it.
func problemIn(ds config.Diagnostics, key string) bool {
	return slices.ContainsFunc(ds, func(d config.Diagnostic) bool {
		rest, under := strings.CutPrefix(d.Key, key)
		return under && (rest == "" || rest[0] == '.' || rest[0] == '[')
	})
}
