package config

import (
	"errors"
	"fmt"
	"io"
)

// Check loads path as `corput check` and `corput serve` both do: on an
// invalid config it prints every diagnostic to w, one per line, then the
// tally `FILE: invalid: E error(s), W warning(s)` (or the error reading
// the file alone), and reports false.
func Check(path string, w io.Writer) (*Config, bool) {
	cfg, err := Load(path)
	var diags Diagnostics
	switch {
	case errors.As(err, &diags):
		for _, d := range diags {
			fmt.Fprintln(w, d)
		}
		fmt.Fprintf(w, "%s: invalid: %d error(s), %d warning(s)\n", path, len(diags.Errors()), len(diags.Warnings()))
		return nil, false
	case err != nil:
		fmt.Fprintln(w, err)
		return nil, false
	}
	return cfg, true
}

// Summary is the one line `corput check` prints for a valid config:
// `FILE: ok: 2 routes, 2 origins, 6 static endpoints, 4 loops; listen
// ADDR, admin ADDR`, and the count of warnings when there are any.
func (c *Config) Summary() string {
	endpoints := 0
	for _, o := range c.Origins {
		endpoints += len(o.Endpoints)
	}
	s := fmt.Sprintf("%s: ok: %s, %s, %s, %s; listen %s, admin %s",
		c.File(), plural(len(c.Routes), "route"), plural(len(c.Origins), "origin"),
		plural(endpoints, "static endpoint"), plural(c.LoopCount(), "loop"), c.Listen, c.Admin.Listen)
	if n := len(c.Warnings()); n > 0 {
		s += fmt.Sprintf("; %s", plural(n, "warning"))
	}
	return s
}

// plural is "1 noun" or "n nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
