package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/corput/corput/internal/mdtable"
)

// contractDoc is the contract page, relative to this package's directory.
var contractDoc = filepath.Join("..", "..", "docs", "contract.md")

// TestEveryKeyIsInTheContract: every key path of Config, found by
// reflection over the yaml tags the decoder reads, has its row in
// docs/contract.md, so that a key added without documenting it fails here.
func TestEveryKeyIsInTheContract(t *testing.T) {
	doc, err := os.ReadFile(contractDoc)
	if err != nil {
		t.Fatalf("the contract page: %v", err)
	}
	keys := contractKeys(reflect.TypeFor[Config](), "")
	if len(keys) == 0 {
		t.Fatal("Config has no keys: the test would check nothing")
	}
	for _, k := range missingKeys(string(doc), keys) {
		t.Errorf("%s: no table row names the config key %s (a yaml tag of internal/config); add a row | `%s` | type | default | notes | to the configuration table",
			contractDoc, k, k)
	}

	t.Run("a missing key is found", func(t *testing.T) {
		gone := "origins[].pool.max_pending"
		if !slices.Contains(keys, gone) {
			t.Fatalf("%s is not among the keys found: %q", gone, keys)
		}
		cut := mdtable.Without(string(doc), "`"+gone+"`")
		if cut == string(doc) {
			t.Fatalf("removing %s changed nothing: the check has no row to lose", gone)
		}
		before := missingKeys(string(doc), keys)
		var added []string
		for _, k := range missingKeys(cut, keys) {
			if !slices.Contains(before, k) {
				added = append(added, k)
			}
		}
		if !slices.Equal(added, []string{gone}) {
			t.Fatalf("with the row of %s removed, newly missing = %q; want exactly it", gone, added)
		}
	})
	t.Run("a key outside a table row does not count", func(t *testing.T) {
		doc := "Planned: `access_log.path`.\n| `listen` | string | x | |\n"
		if got := missingKeys(doc, []string{"listen", "access_log.path"}); !slices.Equal(got, []string{"access_log.path"}) {
			t.Fatalf("missing = %q; want [access_log.path]", got)
		}
	})
	t.Run("the walk reaches every kind of key", func(t *testing.T) {
		type leaf struct {
			D int `yaml:"d"`
		}
		type probe struct {
			A        int               `yaml:"a"`
			B        leaf              `yaml:"b"`
			L        []leaf            `yaml:"l"`
			P        *leaf             `yaml:"p"`
			PL       []*leaf           `yaml:"pl"`
			M        map[string]leaf   `yaml:"m"`
			MS       map[string]string `yaml:"ms"`
			S        []string          `yaml:"s"`
			T        time.Duration     `yaml:"t"`
			Pending  PendingLimit      `yaml:"pending"`
			Adm      Admin             `yaml:"adm"`
			Skipped  int               `yaml:"-"`
			Untagged int
			hidden   int `yaml:"hidden"`
		}
		got := contractKeys(reflect.TypeFor[probe](), "")
		want := []string{"a", "b.d", "l[].d", "p.d", "pl[].d", "m.*.d", "ms", "s", "t", "pending", "adm", "adm.listen", "adm.token_file"}
		if !slices.Equal(got, want) {
			t.Fatalf("keys = %q\nwant   %q", got, want)
		}
	})
}

// contractKeys lists the leaf key paths of a config type as contract.md
// writes them: blocks joined with ".", list elements as "name[]", map
// values as "name.*"; a type that decodes itself (nodeDecoder), a
// duration, a CIDR prefix and a list of scalars are leaves. A struct that
// decodes itself (admin: an address or a block) is both: a key of its own
// and a block with keys. Field names come from fieldsOf, the decoder's own
// reading of the yaml tags.
func contractKeys(t reflect.Type, prefix string) []string {
	names, index := fieldsOf(t)
	var out []string
	for _, name := range names {
		out = append(out, contractKeysOf(t.Field(index[name]).Type, joinKey(prefix, name))...)
	}
	return out
}

func contractKeysOf(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[nodeDecoder]()) {
		if t.Kind() == reflect.Struct {
			return append([]string{path}, contractKeys(t, path)...)
		}
		return []string{path}
	}
	if t == durationType || t == prefixType {
		return []string{path}
	}
	switch t.Kind() {
	case reflect.Struct:
		return contractKeys(t, path)
	case reflect.Slice, reflect.Array:
		if e := t.Elem(); isBlock(e) {
			return contractKeysOf(e, path+"[]")
		}
	case reflect.Map:
		if e := t.Elem(); isBlock(e) {
			return contractKeysOf(e, path+".*")
		}
	}
	return []string{path}
}

// isBlock reports whether t (or what it points to) is a struct with keys
// of its own.
func isBlock(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t != durationType && t != prefixType &&
		!reflect.PointerTo(t).Implements(reflect.TypeFor[nodeDecoder]())
}

// missingKeys returns the keys that no table row of doc names, in
// backquotes, in its first cell.
func missingKeys(doc string, keys []string) []string {
	rows := mdtable.FirstCells(doc)
	var out []string
	for _, k := range keys {
		if !rows["`"+k+"`"] {
			out = append(out, k)
		}
	}
	return out
}
