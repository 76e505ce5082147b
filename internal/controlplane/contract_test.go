package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corput/corput/internal/mdtable"
)

// Every corput_ metric the control plane exports has its row in
// docs/contract.md with its type and labels, as the gateway's do.
func TestEveryMetricIsInTheContract(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	m.published("o", &Assignment{Subsets: 1})
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "corput_") {
			continue
		}
		n++
		cells, ok := mdtable.Find(string(doc), 0, "`"+name+"`")
		if !ok || len(cells) < 4 {
			t.Errorf("docs/contract.md has no row for %s", name)
			continue
		}
		if want := strings.ToLower(f.GetType().String()); cells[1] != want {
			t.Errorf("%s: the contract says %s, the registry %s", name, cells[1], want)
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if !strings.Contains(cells[2], l.GetName()) {
					t.Errorf("%s: label %q is not in its contract row (%s)", name, l.GetName(), cells[2])
				}
			}
		}
	}
	if n != 12 {
		t.Errorf("%d corput_ metrics exported; the contract lists 12: update both", n)
	}
	if !strings.Contains(string(doc), "| `corput control-plane` *(additive)* |") {
		t.Error("docs/contract.md has no command row for corput control-plane")
	}
}
