package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/corput/corput/internal/config"
)

func init() {
	register(command{name: "check", summary: "validate a config: exit 0, or print every diagnostic and exit 2", run: runCheck})
}

// runCheck is `corput check --config FILE`. It prints every diagnostic to
// stdout, one per line as `file:line: key: CODE: message`, and exits 2 when
// any is an error; otherwise it prints the warnings and a one-line summary
// and exits 0.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("corput check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "the config `FILE` to validate")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: corput check --config FILE")
		fmt.Fprintln(stderr, "\nValidates FILE as corput serve would. Exit 0: valid (warnings may be printed).")
		fmt.Fprintln(stderr, "Exit 2: invalid; every diagnostic is printed as file:line: key: CODE: message.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *path == "" && fs.NArg() == 1 {
		*path = fs.Arg(0)
	}
	if *path == "" || fs.NArg() > 1 || (fs.NArg() == 1 && fs.Arg(0) != *path) {
		fs.Usage()
		return 2
	}

	cfg, ok := loadConfig(*path, stdout)
	if !ok {
		return 2
	}
	for _, d := range cfg.Warnings() {
		fmt.Fprintln(stdout, d)
	}
	fmt.Fprintln(stdout, summary(cfg))
	return 0
}

// loadConfig loads path as corput check and corput serve both do: on an
// invalid config it prints every diagnostic to w, one per line, then a count,
// and reports false.
func loadConfig(path string, w io.Writer) (*config.Config, bool) {
	cfg, err := config.Load(path)
	var diags config.Diagnostics
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

// summary is the one line `corput check` prints for a valid config.
func summary(cfg *config.Config) string {
	endpoints := 0
	for _, o := range cfg.Origins {
		endpoints += len(o.Endpoints)
	}
	s := fmt.Sprintf("%s: ok: %s, %s, %s, %s; listen %s, admin %s",
		cfg.File(), plural(len(cfg.Routes), "route"), plural(len(cfg.Origins), "origin"),
		plural(endpoints, "static endpoint"), plural(cfg.LoopCount(), "loop"), cfg.Listen, cfg.Admin.Listen)
	if n := len(cfg.Warnings()); n > 0 {
		s += fmt.Sprintf("; %s", plural(n, "warning"))
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
