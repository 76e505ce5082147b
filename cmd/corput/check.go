package main

import (
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
	fs := flagSet("corput check", stderr,
		"usage: corput check --config FILE",
		"\nValidates FILE as corput serve would. Exit 0: valid (warnings may be printed).",
		"Exit 2: invalid; every diagnostic is printed as file:line: key: CODE: message.")
	path := fs.String("config", "", "the config `FILE` to validate")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *path == "" && fs.NArg() == 1 {
		*path = fs.Arg(0)
	}
	if *path == "" || fs.NArg() > 1 || (fs.NArg() == 1 && fs.Arg(0) != *path) {
		fs.Usage()
		return 2
	}
	cfg, ok := config.Check(*path, stdout)
	if !ok {
		return 2
	}
	for _, d := range cfg.Warnings() {
		fmt.Fprintln(stdout, d)
	}
	fmt.Fprintln(stdout, cfg.Summary())
	return 0
}
