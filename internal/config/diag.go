package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Severity says whether a diagnostic refuses the config.
type Severity int

// The severities.
const (
	SeverityError   Severity = iota // the config is refused
	SeverityWarning                 // the config is accepted; the setting departs from a seed's invariant
)

// Diagnostic is one finding about a config file.
type Diagnostic struct {
	File     string // the config's name; may be empty
	Line     int    // 1-based; 0 when unknown (a key left out, or a config built in Go)
	Key      string // key path, e.g. origins[0].pool.max_pending; empty for the whole file
	Code     string // a contract code such as ERR_UNBOUNDED_QUEUE_REJECTED, or empty
	Severity Severity
	Message  string // what is wrong and what to do
}

// String formats d as `file:line: key: CODE: message`, leaving out the
// parts that are unknown; a warning reads `file:line: key: warning: message`.
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.File != "" {
		b.WriteString(d.File)
		if d.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(d.Line))
		}
		b.WriteString(": ")
	} else if d.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(d.Line))
		b.WriteString(": ")
	}
	if d.Key != "" {
		b.WriteString(d.Key)
		b.WriteString(": ")
	}
	if d.Severity == SeverityWarning {
		b.WriteString("warning: ")
	}
	if d.Code != "" {
		b.WriteString(d.Code)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// Diagnostics is every finding about one config. As an error it lists them
// one per line; use errors.As to get at them.
type Diagnostics []Diagnostic

// Error implements error: one diagnostic per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// Errors returns the diagnostics that refuse the config.
func (ds Diagnostics) Errors() Diagnostics {
	return ds.filter(SeverityError)
}

// Warnings returns the diagnostics that do not refuse the config.
func (ds Diagnostics) Warnings() Diagnostics {
	return ds.filter(SeverityWarning)
}

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// HasCode reports whether any diagnostic carries code.
func (ds Diagnostics) HasCode(code string) bool {
	return slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Code == code })
}

// Sort orders diagnostics by line (unknown lines last), then key path, and
// keeps the order of findings on the same key.
func (ds Diagnostics) Sort() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), strings.Compare(a.Key, b.Key))
	})
}

// reporter collects diagnostics for one config and finds the line of a key
// path from the positions the decoder recorded.
type reporter struct {
	file  string
	lines map[string]int
	diags Diagnostics
}

// lineOf returns the line of path, or of its nearest recorded ancestor, so
// that a finding about a key left out points at the block that lacks it.
func (r *reporter) lineOf(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := r.lines[p]; ok {
			return l
		}
	}
	return 0
}

// maxDiagnostics bounds the findings kept for one config; a file with more
// is reported as such instead of flooding the terminal.
const maxDiagnostics = 100

func (r *reporter) add(sev Severity, line int, path, code, format string, args []any) {
	switch {
	case len(r.diags) == maxDiagnostics:
		r.diags = append(r.diags, Diagnostic{File: r.file,
			Message: "too many problems; fix the ones above and run corput check again"})
		return
	case len(r.diags) > maxDiagnostics:
		return
	}
	if line == 0 {
		line = r.lineOf(path)
	}
	r.diags = append(r.diags, Diagnostic{
		File: r.file, Line: line, Key: path, Code: code, Severity: sev,
		Message: fmt.Sprintf(format, args...),
	})
}

// errorf reports an error without a code.
func (r *reporter) errorf(path, format string, args ...any) {
	r.add(SeverityError, 0, path, "", format, args)
}

// errorAt reports an error at a known line (0: the line of path).
func (r *reporter) errorAt(line int, path, format string, args ...any) {
	r.add(SeverityError, line, path, "", format, args)
}

// codedf reports an error with a contract code.
func (r *reporter) codedf(path, code, format string, args ...any) {
	r.add(SeverityError, 0, path, code, format, args)
}

// warnf reports a warning.
func (r *reporter) warnf(path, format string, args ...any) {
	r.add(SeverityWarning, 0, path, "", format, args)
}

// parentPath strips the last element of a key path:
// origins[0].pool → origins[0] → origins → "".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// joinKey appends a mapping key to a path.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// joinIndex appends a sequence index to a path.
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
