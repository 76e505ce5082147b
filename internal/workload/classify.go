package workload

import (
	"fmt"
	"strings"
)

// validate checks one match rule; a nil rule is valid (no rule). Errors
// start with the key's tail (".methods[1]: …").
func (r *Match) validate() error {
	if r == nil {
		return nil
	}
	if len(r.Methods) == 0 && r.PathPrefix == "" && r.PathSuffix == "" {
		return fmt.Errorf(": empty; give methods, path_prefix or path_suffix, or leave match out")
	}
	for i, m := range r.Methods {
		if m == "" || strings.IndexFunc(m, func(c rune) bool { return !isTchar(c) }) >= 0 {
			return fmt.Errorf(".methods[%d]: %q is not an HTTP method token, e.g. GET or POST", i, m)
		}
	}
	if r.PathPrefix != "" && r.PathPrefix[0] != '/' {
		return fmt.Errorf(".path_prefix: %q must start with /", r.PathPrefix)
	}
	return nil
}

// isTchar reports whether c may appear in an HTTP token (RFC 9110 §5.6.2).
func isTchar(c rune) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", c)
}

// Classifier puts a gateway's requests in their workload class by the
// classes' match rules, first matching class first, and gives the class's
// cost. It is immutable, and Classify allocates nothing. A nil
// *Classifier classifies nothing.
type Classifier struct {
	rules []rule
	costs []float64
}

type rule struct {
	class          int
	methods        []string
	prefix, suffix string
}

// NewClassifier returns the classifier of m's match rules and costs; nil
// when m has no class.
func NewClassifier(m Mix) *Classifier {
	if len(m.Classes) == 0 {
		return nil
	}
	c := &Classifier{costs: m.Costs()}
	for i, cl := range m.Classes {
		if r := cl.Match; r != nil {
			c.rules = append(c.rules, rule{class: i, methods: r.Methods, prefix: r.PathPrefix, suffix: r.PathSuffix})
		}
	}
	return c
}

// Classify returns the class of the first rule that a request with this
// method and path (no query) matches.
func (c *Classifier) Classify(method, path string) (class int, ok bool) {
	if c == nil {
		return 0, false
	}
	for i := range c.rules {
		if r := &c.rules[i]; r.matches(method, path) {
			return r.class, true
		}
	}
	return 0, false
}

// ClassCost returns class's cost (1 for a class out of range).
func (c *Classifier) ClassCost(class int) float64 {
	if c == nil || class < 0 || class >= len(c.costs) {
		return 1
	}
	return c.costs[class]
}

// Cost is the cost of a request with this method and path: its class's,
// or 1 when no rule matches.
func (c *Classifier) Cost(method, path string) float64 {
	if class, ok := c.Classify(method, path); ok {
		return c.costs[class]
	}
	return 1
}

func (r *rule) matches(method, path string) bool {
	if !strings.HasPrefix(path, r.prefix) || !strings.HasSuffix(path, r.suffix) {
		return false
	}
	if len(r.methods) == 0 {
		return true
	}
	for _, m := range r.methods {
		if m == method {
			return true
		}
	}
	return false
}
