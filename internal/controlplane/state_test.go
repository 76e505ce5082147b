package controlplane

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testState(version uint64, addrs ...string) *State {
	s := NewState()
	a := &Assignment{Version: version, Subsets: 1}
	for i, addr := range addrs {
		a.Endpoints = append(a.Endpoints, Endpoint{Address: addr, Zone: "z1", Weight: 1, Index: i})
	}
	s.Origins["payments"] = a
	return s
}

// The state file is replaced atomically: WriteState writes a temporary
// file, syncs it, and only then renames it over the old one. A crash
// between the write and the rename (beforeRename failing stands for it)
// leaves the old file whole; the temporary file it leaves is ignored by
// LoadState and removed by the next writer.
func TestStateWriteIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := WriteState(path, testState(1, "127.0.0.1:1", "127.0.0.1:2")); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	crash := errors.New("crashed before the rename")
	var tmpSeen string
	beforeRename = func(tmp string) error {
		tmpSeen = tmp
		data, err := os.ReadFile(tmp)
		if err != nil || !strings.Contains(string(data), "127.0.0.1:3") {
			t.Errorf("the temporary file is not the whole new state before the rename: %v\n%s", err, data)
		}
		if filepath.Dir(tmp) != dir {
			t.Errorf("temporary file %s is not beside the state file (a rename across file systems is not atomic)", tmp)
		}
		return crash
	}
	t.Cleanup(func() { beforeRename = nil })
	if err := WriteState(path, testState(2, "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")); !errors.Is(err, crash) {
		t.Fatalf("WriteState = %v, want the crash", err)
	}
	beforeRename = nil
	now, err := os.ReadFile(path)
	if err != nil || string(now) != string(old) {
		t.Fatalf("after a crash before the rename the state file is not the old one: %v\n%s", err, now)
	}
	if _, err := os.Stat(tmpSeen); err != nil {
		t.Fatalf("the crash's temporary file should be left, as a crash leaves it: %v", err)
	}
	s, fresh, err := LoadState(path)
	if err != nil || fresh || s.Origins["payments"].Version != 1 || len(s.Origins["payments"].Endpoints) != 2 {
		t.Fatalf("LoadState after the crash = %+v, %v, %v; want the old state", s, fresh, err)
	}
	if err := RemoveTemps(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmpSeen); !os.IsNotExist(err) {
		t.Fatalf("RemoveTemps left %s: %v", tmpSeen, err)
	}

	// Without the crash the new state replaces the old whole.
	if err := WriteState(path, testState(2, "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")); err != nil {
		t.Fatal(err)
	}
	if s, _, err := LoadState(path); err != nil || s.Origins["payments"].Version != 2 {
		t.Fatalf("LoadState = %+v, %v; want version 2", s, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the directory holds %d files after a good write, want only the state file", len(entries))
	}
}

// A damaged state file is refused: the control plane must not start over
// (and reshuffle every origin of the fleet), nor write over it.
func TestDamagedStateIsRefused(t *testing.T) {
	for name, content := range map[string]string{
		"truncated":       `{"format": 1, "generation": 3, "origins": {"payments": {"version": 2, "subs`,
		"unknown field":   `{"format": 1, "generation": 3, "origins": {}, "extra": true}`,
		"other format":    `{"format": 2, "generation": 3, "origins": {}}`,
		"indices not 0..": `{"format": 1, "generation": 3, "origins": {"p": {"version": 1, "subsets": 1, "endpoints": [{"address": "127.0.0.1:1", "weight": 1, "index": 1}]}}}`,
		"subsets":         `{"format": 1, "generation": 3, "origins": {"p": {"version": 1, "subsets": 3, "endpoints": []}}}`,
		"address twice":   `{"format": 1, "generation": 3, "origins": {"p": {"version": 1, "subsets": 1, "endpoints": [{"address": "127.0.0.1:1", "weight": 1, "index": 0}, {"address": "127.0.0.1:1", "weight": 1, "index": 1}]}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, map[string][]string{"payments": endpoints(11001, 3)})
			if err := os.WriteFile(f.state, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			cp, err := Start(f.opts)
			if err == nil {
				cp.Close()
				t.Fatal("started over a damaged state file")
			}
			if !IsConfigError(err) {
				t.Errorf("not an input error (exit 2): %v", err)
			}
			if data, _ := os.ReadFile(f.state); string(data) != content {
				t.Fatal("the damaged state file was written over")
			}
		})
	}
}
