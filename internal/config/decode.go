package config

import (
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the nodes one decode visits, so that a document whose
// aliases expand exponentially ("billion laughs") is refused quickly.
const maxNodes = 1 << 20

// decoder maps a yaml.Node tree onto Go values by reflection, strictly:
// every key must be a field (by its yaml tag), every scalar must fit its
// field's type, and every problem becomes a diagnostic with its key path
// and line instead of stopping the decode. A key left out keeps the value
// already in the field, which is how defaults survive.
type decoder struct {
	*reporter
	budget  int
	merging map[*yaml.Node]bool // mappings whose entries are being listed, to catch merge cycles
}

// defaulter is implemented by list elements that have defaults of their
// own; the decoder calls setDefaults on a fresh element before decoding
// onto it.
type defaulter interface{ setDefaults() }

// setDefaulter is defaulter for a block whose type another package
// defines (edgetls.Settings, the tls block).
type setDefaulter interface{ SetDefaults() }

// nodeDecoder is implemented by types that decode themselves.
type nodeDecoder interface {
	decodeNode(d *decoder, n *yaml.Node, path string)
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	prefixType   = reflect.TypeFor[netip.Prefix]()
)

// DecodeNode decodes the YAML node n onto v, a pointer to a struct whose
// fields carry yaml tags, by the rules a config file is decoded by (see
// decoder): every key must be a field, every scalar must fit its field's
// type, duplicate keys are refused, aliases and merge keys (<<) are
// followed within a budget, and a key left out or given an empty value
// keeps the value already in v. It returns every problem, each with its
// key path and line and sorted by line (File is left for the caller), and
// the line of every key path it met, for the caller's own checks.
func DecodeNode(n *yaml.Node, v any) (lines map[string]int, problems Diagnostics) {
	d := &decoder{reporter: &reporter{lines: map[string]int{}}, budget: maxNodes}
	d.decode(n, reflect.ValueOf(v).Elem(), "")
	d.diags.Sort()
	return d.lines, d.diags
}

// decode decodes n onto v, which must be settable.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n = d.visit(n, path); n == nil {
		return
	}
	if nd, ok := v.Addr().Interface().(nodeDecoder); ok {
		nd.decodeNode(d, n, path)
		return
	}
	if isNull(n) {
		if v.Kind() == reflect.Pointer {
			v.SetZero() // `tls: ~` means no TLS
		}
		return // a null scalar keeps the default
	}
	switch t := v.Type(); {
	case t == durationType:
		d.duration(n, v, path)
		return
	case t == prefixType:
		d.prefix(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(newWithDefaults(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.sequence(n, v, path)
	case reflect.String:
		if d.scalar(n, path, "a string") {
			v.SetString(n.Value)
		}
	case reflect.Int:
		d.integer(n, v, path)
	case reflect.Float64:
		d.float(n, v, path)
	case reflect.Bool:
		d.boolean(n, v, path)
	default:
		// Only reachable if a field of an unsupported type is added to Config.
		panic(fmt.Sprintf("config: decoder has no rule for %s at %s", v.Type(), path))
	}
}

// visit follows aliases and charges the node budget. It returns nil when the
// budget is spent (reported once).
func (d *decoder) visit(n *yaml.Node, path string) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	d.budget--
	if d.budget == 0 {
		d.errorf(path, "the document expands to more than %d values through aliases and merge keys; write the config with fewer nested aliases", maxNodes)
	}
	if d.budget <= 0 {
		return nil
	}
	return n
}

func newWithDefaults(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	switch df := p.Interface().(type) {
	case defaulter:
		df.setDefaults()
	case setDefaulter:
		df.SetDefaults()
	}
	return p
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// mapping decodes a YAML mapping onto the struct v, one field per key.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	names, index := fieldsOf(v.Type())
	if n.Kind != yaml.MappingNode {
		d.mismatchf(n, path, "want a mapping with keys %s, got %s", strings.Join(names, ", "), describe(n))
		return
	}
	for _, kv := range d.entries(n, path) {
		k, val := kv[0], kv[1]
		kp := joinKey(path, k.Value)
		if _, recorded := d.lines[kp]; !recorded {
			d.lines[kp] = k.Line
		}
		i, ok := index[k.Value]
		if !ok {
			d.errorf(kp, "%s", unknownKey(k.Value, path, names))
			continue
		}
		d.decode(val, v.Field(i), kp)
	}
}

// entries lists a mapping's key/value pairs with YAML merge keys (<<)
// expanded: merged pairs come first and keys written in the mapping itself
// win over merged ones. Duplicate and non-scalar keys are reported and
// dropped.
func (d *decoder) entries(n *yaml.Node, path string) [][2]*yaml.Node {
	if d.merging[n] {
		d.errorAt(n.Line, path, "a merge key (<<) brings in a mapping that contains it; remove the cycle")
		return nil
	}
	if d.merging == nil {
		d.merging = map[*yaml.Node]bool{}
	}
	d.merging[n] = true
	defer delete(d.merging, n)
	var own, merged [][2]*yaml.Node
	firstLine := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
			merged = append(merged, d.mergeSources(val, path)...)
		case k.Kind != yaml.ScalarNode:
			d.errorAt(k.Line, path, "a key must be a plain name, got %s", describe(k))
		default:
			if first, dup := firstLine[k.Value]; dup {
				d.lines[joinKey(path, k.Value)] = k.Line
				d.errorf(joinKey(path, k.Value), "duplicate key (first set on line %d); keep one", first)
				continue
			}
			firstLine[k.Value] = k.Line
			own = append(own, [2]*yaml.Node{k, val})
		}
	}
	out := make([][2]*yaml.Node, 0, len(merged)+len(own))
	taken := map[string]bool{}
	for _, kv := range merged {
		if _, overridden := firstLine[kv[0].Value]; !overridden && !taken[kv[0].Value] {
			taken[kv[0].Value] = true
			out = append(out, kv)
		}
	}
	return append(out, own...)
}

// mergeSources returns the pairs a merge key brings in: from one mapping or
// from a list of mappings (earlier ones win).
func (d *decoder) mergeSources(val *yaml.Node, path string) [][2]*yaml.Node {
	if val = d.visit(val, path); val == nil {
		return nil
	}
	var sources []*yaml.Node
	switch val.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{val}
	case yaml.SequenceNode:
		sources = val.Content
	default:
		d.errorAt(val.Line, path, "a merge key (<<) takes an alias to a mapping, got %s", describe(val))
		return nil
	}
	var out [][2]*yaml.Node
	for _, s := range sources {
		if s = d.visit(s, path); s == nil {
			return out
		}
		if s.Kind != yaml.MappingNode {
			d.errorAt(s.Line, path, "a merge key (<<) takes an alias to a mapping, got %s", describe(s))
			continue
		}
		out = append(out, d.entries(s, path)...)
	}
	return out
}

// sequence decodes a YAML list into the slice v, replacing its contents
// (a list written in the file replaces the default list, never extends it).
func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.mismatchf(n, path, "want a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		ip := joinIndex(path, i)
		d.lines[ip] = item.Line
		e := s.Index(i)
		if df, ok := e.Addr().Interface().(defaulter); ok {
			df.setDefaults()
		}
		d.decode(item, e, ip)
	}
	v.Set(s)
}

// mismatchf reports a value that does not fit its key's type, at the key's
// line, or at the value's when the key has none (the document root).
func (d *decoder) mismatchf(n *yaml.Node, path, format string, args ...any) {
	line := d.lineOf(path)
	if line == 0 {
		line = n.Line
	}
	d.errorAt(line, path, format, args...)
}

// scalar reports whether n is a scalar, reporting an error naming want if
// not.
func (d *decoder) scalar(n *yaml.Node, path, want string) bool {
	if n.Kind != yaml.ScalarNode {
		d.mismatchf(n, path, "want %s, got %s", want, describe(n))
		return false
	}
	return true
}

// typed decodes the scalar n as a T when its tag is one of tags and the
// value fits (a nil fits takes any), reporting "want <want>, got <n>"
// otherwise.
func typed[T any](d *decoder, n *yaml.Node, path, want string, fits func(T) bool, tags ...string) (T, bool) {
	var x T
	if !d.scalar(n, path, want) {
		return x, false
	}
	if !slices.Contains(tags, n.ShortTag()) || n.Decode(&x) != nil || (fits != nil && !fits(x)) {
		d.mismatchf(n, path, "want %s, got %s", want, describe(n))
		return x, false
	}
	return x, true
}

func (d *decoder) integer(n *yaml.Node, v reflect.Value, path string) {
	if x, ok := typed[int64](d, n, path, "a whole number", nil, "!!int"); ok {
		v.SetInt(x)
	}
}

func (d *decoder) float(n *yaml.Node, v reflect.Value, path string) {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if x, ok := typed(d, n, path, "a number", finite, "!!int", "!!float"); ok {
		v.SetFloat(x)
	}
}

func (d *decoder) boolean(n *yaml.Node, v reflect.Value, path string) {
	if x, ok := typed[bool](d, n, path, "true or false", nil, "!!bool"); ok {
		v.SetBool(x)
	}
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if !d.scalar(n, path, "a duration such as 250ms or 60s") {
		return
	}
	x, err := time.ParseDuration(n.Value)
	if err != nil {
		if _, nerr := strconv.ParseFloat(n.Value, 64); nerr == nil {
			d.mismatchf(n, path, "%q has no unit; write a Go duration such as %ss or %sms", n.Value, n.Value, n.Value)
		} else {
			d.mismatchf(n, path, "%q is not a duration; write a Go duration such as 250ms, 60s or 10m", n.Value)
		}
		return
	}
	v.SetInt(int64(x))
}

func (d *decoder) prefix(n *yaml.Node, v reflect.Value, path string) {
	if !d.scalar(n, path, "a CIDR prefix such as 10.0.0.0/8") {
		return
	}
	p, err := netip.ParsePrefix(n.Value)
	if err != nil {
		d.mismatchf(n, path, "%q is not a CIDR prefix; write e.g. 10.0.0.0/8, or 10.0.0.1/32 for one address", n.Value)
		return
	}
	v.Set(reflect.ValueOf(p.Masked()))
}

// unboundedWords are the ways people write "no limit" for a queue bound.
var unboundedWords = []string{"unlimited", "unbounded", "infinite", "infinity", "inf", "none", "no", "off", "max", "-1"}

// decodeNode makes every spelling of "no limit" an
// ERR_UNBOUNDED_QUEUE_REJECTED diagnostic; numbers are range-checked by
// Validate. On a diagnostic the default stays in place, so that Validate
// does not report the same key again.
func (p *PendingLimit) decodeNode(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode {
		unbounded := isNull(n) || slices.Contains(unboundedWords, strings.ToLower(strings.TrimSpace(n.Value)))
		if !unbounded && n.ShortTag() == "!!float" {
			var x float64
			unbounded = n.Decode(&x) == nil && math.IsInf(x, 0)
		}
		if unbounded {
			written := strconv.Quote(n.Value)
			if isNull(n) {
				written = "an empty value"
			}
			d.codedf(path, CodeUnboundedQueue, "%s", unboundedMessage(written))
			return
		}
	}
	d.integer(n, reflect.ValueOf(p).Elem(), path)
}

func unboundedMessage(written string) string {
	return fmt.Sprintf("%s is not a bounded pending queue; the ceiling is %d pending requests per host (seed INV-LB-05), and excess requests are shed with 503 + Retry-After: 1: set max_pending between 1 and %d, or leave it out for the default %d",
		written, MaxPendingCeiling, MaxPendingCeiling, MaxPendingCeiling)
}

// decodeNode reads the admin key in either of its forms: a scalar is the
// listener's address alone (the original `admin: 127.0.0.1:9901`), a
// mapping is the block {listen, token_file}, decoded as strictly as any
// other. A key the block leaves out keeps its default; so does an empty
// value.
func (a *Admin) decodeNode(d *decoder, n *yaml.Node, path string) {
	switch {
	case isNull(n):
	case n.Kind == yaml.ScalarNode:
		a.Listen = n.Value
	case n.Kind == yaml.MappingNode:
		d.mapping(n, reflect.ValueOf(a).Elem(), path)
	default:
		d.mismatchf(n, path, "want host:port (admin: 127.0.0.1:9901) or a mapping with keys listen, token_file, got %s", describe(n))
	}
}

// fieldsOf lists a struct type's YAML keys in declaration order and maps each
// to its field index.
func fieldsOf(t reflect.Type) ([]string, map[string]int) {
	names := make([]string, 0, t.NumField())
	index := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		names = append(names, name)
		index[name] = i
	}
	return names, index
}

// unknownKey explains an unknown key, suggesting the closest known one.
func unknownKey(key, parent string, known []string) string {
	where := "at the top level"
	if parent != "" {
		where = "in " + parent
	}
	msg := fmt.Sprintf("unknown key %q %s", key, where)
	if s := closest(key, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return msg + " (known keys: " + strings.Join(known, ", ") + ")"
}

// closest returns the candidate within edit distance 2 of s (or 3 for long
// keys), or "".
func closest(s string, candidates []string) string {
	best, bestDist := "", 3
	if len(s) > 10 {
		bestDist = 4
	}
	for _, c := range candidates {
		if dist := editDistance(strings.ToLower(s), c); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// describe names a node for a message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "an empty value"
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return strconv.Quote(v)
	}
	return "an unexpected YAML node"
}
