package config

import (
	"net/netip"
	"reflect"
	"strings"
	"time"
)

// Source is the file's bytes as Parse read them (nil for a Config built in
// code).
func (c *Config) Source() []byte { return c.source }

// Redacted is the configuration as a tree of its keys (the YAML names),
// for GET /admin/config: durations and prefixes as they are written,
// every value of a field tagged `secret:"true"` replaced by "[redacted]".
// The config holds no secret itself — TLS keys and tokens are files it
// names, and their contents are never in it — so the rule is for keys to
// come.
func (c *Config) Redacted() map[string]any {
	m, _ := tree(reflect.ValueOf(*c)).(map[string]any)
	return m
}

func tree(v reflect.Value) any {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Type() == prefixType:
		return v.Interface().(netip.Prefix).String()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return tree(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			if f.Tag.Get("secret") == "true" {
				out[name] = "[redacted]"
				continue
			}
			out[name] = tree(v.Field(i))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = tree(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for _, k := range v.MapKeys() {
			out[k.String()] = tree(v.MapIndex(k))
		}
		return out
	}
	return v.Interface()
}
