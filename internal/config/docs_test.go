package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEveryKeyIsDocumented: docs/configuration.md names every key of
// Config, so that a key added here without documentation fails.
func TestEveryKeyIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Keys documented inside their block's row, as {a, b, c}, by name.
	byName := map[string]bool{"tls": true, "slo": true, "workload": true}
	var missing []string
	for _, k := range keyPaths(reflect.TypeFor[Config](), "") {
		// Origins, routes and endpoints are documented relative to their
		// list element.
		k = strings.TrimPrefix(strings.TrimPrefix(k, "origins[]."), "routes[].")
		if head, _, _ := strings.Cut(k, "."); byName[head] {
			leaf := k[strings.LastIndexByte(k, '.')+1:]
			if !strings.Contains(string(doc), leaf) {
				missing = append(missing, k)
			}
			continue
		}
		if !strings.Contains(string(doc), "`"+k+"`") && !strings.Contains(string(doc), "`"+k+"` *(additive)*") {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Errorf("docs/configuration.md does not document: %s", strings.Join(missing, ", "))
	}
}

// keyPaths lists the leaf key paths of a config type: lists as "name[]",
// blocks joined with ".".
func keyPaths(t reflect.Type, prefix string) []string {
	names, index := fieldsOf(t)
	var out []string
	for _, name := range names {
		ft := t.Field(index[name]).Type
		p := joinKey(prefix, name)
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && ft.Elem() != prefixType:
			out = append(out, keyPaths(ft.Elem(), p+"[]")...)
		case ft.Kind() == reflect.Struct && ft != prefixType && ft != reflect.TypeFor[time.Duration]():
			out = append(out, keyPaths(ft, p)...)
		default:
			out = append(out, p)
		}
	}
	return out
}

// TestDecoderCoversEveryFieldType: every leaf of Config has a type the
// decoder has a rule for, so that no key can reach its panic.
func TestDecoderCoversEveryFieldType(t *testing.T) {
	var walk func(t reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ == durationType || typ == prefixType || (typ.Kind() != reflect.Struct && reflect.PointerTo(typ).Implements(reflect.TypeFor[nodeDecoder]())) {
			return // a decoder rule of its own
		}
		switch typ.Kind() {
		case reflect.Struct:
			names, index := fieldsOf(typ)
			for _, name := range names {
				walk(typ.Field(index[name]).Type, joinKey(path, name))
			}
		case reflect.String, reflect.Int, reflect.Float64, reflect.Bool:
		default:
			t.Errorf("%s has type %s, which the decoder does not handle", path, typ)
		}
	}
	walk(reflect.TypeFor[Config](), "")
}
