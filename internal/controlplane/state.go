package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corput/corput/internal/discovery"
)

// StateFormat is the format number of the state file this package writes
// and reads (docs/control-plane.md, "The state file").
const StateFormat = 1

// State is what the writer persists and followers serve: per origin, the
// assignment last published, and the gateways' fleet positions. Its JSON
// is the state file.
type State struct {
	Format int `json:"format"`
	// Generation counts the writer's starts on this file; it prefixes the
	// xDS version_info, so that a restarted writer never reuses a version
	// string for different content.
	Generation uint64                 `json:"generation"`
	Origins    map[string]*Assignment `json:"origins"`
	// Fleet holds the gateways' fleet positions as last published: the
	// node id at each instance 0..len-1 (the fleet size). Additive to
	// format 1: a file without it is an empty fleet.
	Fleet []string `json:"fleet,omitempty"`
}

// Assignment is one origin as published: its endpoints with their ring
// indices, in index order, and the subset count.
type Assignment struct {
	// Version counts the changes published for this origin (indices,
	// subset count, zones or weights); it continues across restarts.
	Version   uint64     `json:"version"`
	Subsets   int        `json:"subsets"`
	Endpoints []Endpoint `json:"endpoints"`
	// Draining lists, sorted, the addresses of endpoints that drain
	// (Kubernetes endpoints that are serving and terminating): published
	// DRAINING with no ring index, so that a gateway stops sending them
	// requests at once. Additive to format 1.
	Draining []string `json:"draining,omitempty"`
}

// Endpoint is one member of an origin with its ring index.
type Endpoint struct {
	Address string `json:"address"`
	Zone    string `json:"zone,omitempty"`
	Weight  int    `json:"weight"`
	Index   int    `json:"index"`
}

// sameContent reports whether two assignments publish the same thing,
// whatever their versions.
func (a *Assignment) sameContent(b *Assignment) bool {
	return a != nil && b != nil && a.Subsets == b.Subsets && slices.Equal(a.Endpoints, b.Endpoints) && slices.Equal(a.Draining, b.Draining)
}

func (a *Assignment) clone() *Assignment {
	c := *a
	c.Endpoints = slices.Clone(a.Endpoints)
	c.Draining = slices.Clone(a.Draining)
	return &c
}

// Indices returns the assignment's address → index map.
func (a *Assignment) Indices() map[string]int {
	out := make(map[string]int, len(a.Endpoints))
	for _, e := range a.Endpoints {
		out[e.Address] = e.Index
	}
	return out
}

// validate checks what a gateway would refuse: indices that are not
// 0..N-1 in order, repeated or invalid addresses, a subset count that is
// not a power of two.
func (a *Assignment) validate() error {
	if a.Subsets < 1 || a.Subsets&(a.Subsets-1) != 0 {
		return fmt.Errorf("subsets %d is not a power of two ≥ 1", a.Subsets)
	}
	seen := make(map[string]bool, len(a.Endpoints))
	for i, e := range a.Endpoints {
		if e.Index != i {
			return fmt.Errorf("endpoints[%d] %s has index %d; indices must be 0..N-1 in order", i, e.Address, e.Index)
		}
		if seen[e.Address] {
			return fmt.Errorf("endpoints[%d]: %s is listed twice", i, e.Address)
		}
		seen[e.Address] = true
		if err := (discovery.Endpoint{Address: e.Address, Zone: e.Zone, Weight: e.Weight}).Validate(); err != nil {
			return fmt.Errorf("endpoints[%d]: %w", i, err)
		}
	}
	for i, addr := range a.Draining {
		if seen[addr] {
			return fmt.Errorf("draining[%d]: %s is listed twice, or also serves", i, addr)
		}
		seen[addr] = true
		if i > 0 && a.Draining[i-1] > addr {
			return fmt.Errorf("draining[%d]: %s is out of order; the list is sorted", i, addr)
		}
		if err := (discovery.Endpoint{Address: addr, Weight: 1}).Validate(); err != nil {
			return fmt.Errorf("draining[%d]: %w", i, err)
		}
	}
	return nil
}

// NewState returns an empty state.
func NewState() *State { return &State{Format: StateFormat, Origins: map[string]*Assignment{}} }

// ParseState decodes and validates a state file's content, strictly: an
// unknown field, another format or an assignment a gateway would refuse
// is an error.
func ParseState(data []byte) (*State, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	s := NewState()
	if err := dec.Decode(s); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the state object")
	}
	if s.Format != StateFormat {
		return nil, fmt.Errorf("format %d; this corput reads format %d", s.Format, StateFormat)
	}
	if s.Origins == nil {
		s.Origins = map[string]*Assignment{}
	}
	for name, a := range s.Origins {
		if a == nil {
			return nil, fmt.Errorf("origin %q: null", name)
		}
		if err := a.validate(); err != nil {
			return nil, fmt.Errorf("origin %q: %w", name, err)
		}
	}
	if err := validateFleet(s.Fleet); err != nil {
		return nil, err
	}
	return s, nil
}

// validateFleet checks the persisted fleet positions: at most
// discovery.MaxFleetSize node ids, each non-empty and held once.
func validateFleet(slots []string) error {
	if len(slots) > discovery.MaxFleetSize {
		return fmt.Errorf("fleet: %d positions, more than %d", len(slots), discovery.MaxFleetSize)
	}
	seen := make(map[string]int, len(slots))
	for i, node := range slots {
		if node == "" {
			return fmt.Errorf("fleet[%d]: an empty node id", i)
		}
		if j, ok := seen[node]; ok {
			return fmt.Errorf("fleet[%d]: node %q also holds position %d", i, node, j)
		}
		seen[node] = i
	}
	return nil
}

// LoadState reads the state file at path. A missing file is an empty
// state (the first start) and reported by fresh; an unreadable or invalid
// one is an error: the control plane must not start over and reshuffle
// every origin of the fleet because its file is damaged.
func LoadState(path string) (s *State, fresh bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return NewState(), true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state file: %w", err)
	}
	s, err = ParseState(data)
	if err != nil {
		return nil, false, fmt.Errorf("state file %s: %w; fix or restore it (a missing file starts every origin afresh, reshuffling the fleet)", path, err)
	}
	return s, false, nil
}

// Marshal encodes the state as the file holds it: indented JSON, origins
// in order of name, a trailing newline.
func (s *State) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Clone returns a deep copy of the state.
func (s *State) Clone() *State {
	out := &State{Format: s.Format, Generation: s.Generation, Origins: make(map[string]*Assignment, len(s.Origins)), Fleet: slices.Clone(s.Fleet)}
	for name, a := range s.Origins {
		out.Origins[name] = a.clone()
	}
	return out
}

// tempPrefix names the temporary files WriteState writes beside the state
// file: ".NAME.tmp-".
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// beforeRename, when set (tests), runs after the temporary file is
// written and synced and before it is renamed over the state file; an
// error stands for a crash at that point: WriteState returns it and
// leaves the temporary file behind, as a crash would.
var beforeRename func(tmp string) error

// WriteState writes the state file atomically: the new content goes to a
// temporary file in the same directory, which is synced, then renamed
// over the old file, and the directory is synced so that the rename is
// durable. A crash at any point leaves either the old file or the new one
// whole, never a mix; a leftover temporary file is ignored by LoadState
// and removed by RemoveTemps.
func WriteState(path string, s *State) error {
	data, err := s.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && beforeRename != nil {
		if err = beforeRename(tmp); err != nil {
			return err // a crash: the temporary file stays
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("state file: sync %s: %w", dir, err)
		}
	}
	return nil
}

// RemoveTemps removes the temporary files a crashed WriteState left
// beside the state file. Only the writer calls it, holding the lock.
func RemoveTemps(path string) error {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix(path)) {
			errs = append(errs, os.Remove(filepath.Join(filepath.Dir(path), e.Name())))
		}
	}
	return errors.Join(errs...)
}

// splitAddress splits a validated host:port.
func splitAddress(addr string) (string, uint32) {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.ParseUint(port, 10, 16)
	return host, uint32(p)
}
