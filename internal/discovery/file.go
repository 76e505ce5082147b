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
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/corput/corput/internal/clock"
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
// what a half-written file looks like). Every problem is reported, each
// with its line, under name.
//
//	endpoints:
//	  - {address: 10.0.0.7:8080, zone: us-east-1a, weight: 2}
//	  - address: 10.0.0.8:8080
func ParseEndpoints(name string, data []byte) ([]Endpoint, error) {
	fail := func(line int, format string, args ...any) error {
		return fmt.Errorf("discovery file %s line %d: %s", name, line, fmt.Sprintf(format, args...))
	}
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
	top := resolve(doc.Content[0])
	if top.Kind != yaml.MappingNode {
		return nil, fail(top.Line, "the top level must be a mapping with one key, endpoints")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], resolve(top.Content[i+1])
		if k.Value != "endpoints" {
			return nil, fail(k.Line, "unknown key %q; the only key is endpoints", k.Value)
		}
		if list != nil {
			return nil, fail(k.Line, "endpoints is written twice; keep one list")
		}
		list = v
	}
	if list == nil {
		return nil, fail(top.Line, "no endpoints key; write `endpoints: [...]`")
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fail(list.Line, "endpoints must be a list of {address, zone, weight}; write `endpoints: []` for none")
	}

	var errs []error
	eps := make([]Endpoint, 0, len(list.Content))
	firstLine := make(map[string]int, len(list.Content))
	for i, item := range list.Content {
		e, line, err := parseEndpoint(resolve(item))
		if err != nil {
			errs = append(errs, fail(line, "endpoints[%d]: %v", i, err))
			continue
		}
		if prev, dup := firstLine[e.Address]; dup {
			errs = append(errs, fail(line, "endpoints[%d]: address %s is already listed at line %d; remove one", i, e.Address, prev))
			continue
		}
		firstLine[e.Address] = line
		eps = append(eps, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sortEndpoints(eps)
	if err := CheckRing(eps); err != nil {
		return nil, fmt.Errorf("discovery file %s: %w; the last good set stays", name, err)
	}
	return eps, nil
}

// parseEndpoint reads one {address, zone, weight} mapping, returning the
// line of the first problem with it.
func parseEndpoint(n *yaml.Node) (Endpoint, int, error) {
	e := Endpoint{Weight: 1}
	if n.Kind != yaml.MappingNode {
		return e, n.Line, errors.New("must be a mapping {address, zone, weight}")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if seen[k.Value] {
			return e, k.Line, fmt.Errorf("%s is written twice; keep one", k.Value)
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "address":
			e.Address, err = scalarString(v)
		case "zone":
			e.Zone, err = scalarString(v)
		case "weight":
			if err = v.Decode(&e.Weight); err != nil || e.Weight < 1 || e.Weight > MaxWeight {
				return e, v.Line, fmt.Errorf("weight %s is not a whole number in 1..%d; write one, or leave weight out for 1", describe(v), MaxWeight)
			}
		case KeyRingIndex:
			if err = v.Decode(&e.RingIndex); err != nil || v.Kind != yaml.ScalarNode || e.RingIndex < 0 || e.RingIndex > MaxRingIndex {
				return e, v.Line, fmt.Errorf("%s %s is not a whole number in 0..%d (the endpoint's shared ring index)", KeyRingIndex, describe(v), MaxRingIndex)
			}
			e.Indexed = true
		case KeyRingSubsets:
			if err = v.Decode(&e.RingSubsets); err != nil || v.Kind != yaml.ScalarNode || e.RingSubsets < 1 || e.RingSubsets > MaxRingIndex {
				return e, v.Line, fmt.Errorf("%s %s is not a whole number in 1..%d (the origin's shared subset count, a power of two)", KeyRingSubsets, describe(v), MaxRingIndex)
			}
		default:
			return e, k.Line, fmt.Errorf("unknown key %q; the keys are address, zone, weight, %s and %s", k.Value, KeyRingIndex, KeyRingSubsets)
		}
		if err != nil || v.Kind != yaml.ScalarNode {
			return e, v.Line, fmt.Errorf("%s must be a string, not %s", k.Value, describe(v))
		}
	}
	if !seen["address"] {
		return e, n.Line, errors.New("no address; write address: host:port")
	}
	if err := e.Validate(); err != nil {
		return e, n.Line, err
	}
	return e, n.Line, nil
}

// scalarString reads a scalar as YAML decodes one into a string field (a
// null is ""), without the cost of a decoder.
func scalarString(n *yaml.Node) (string, error) {
	switch {
	case n.Kind != yaml.ScalarNode:
		return "", errors.New("not a scalar")
	case n.Tag == "!!null":
		return "", nil
	}
	return n.Value, nil
}

// resolve follows a YAML alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}
