// Command corput is the gateway's command line. Each subcommand lives in
// its own file and registers itself; it parses its flags and calls into
// the package that does the work (internal/serve runs `corput serve`,
// internal/config checks a file, internal/controlplane, lab, drill, …).
// No logic lives here beyond wiring.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/corput/corput/internal/version"
)

// command is one subcommand. run returns the process exit code.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

// register adds a subcommand; each subcommand file calls it from init.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("corput: duplicate command " + c.name)
	}
	commands[c.name] = c
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(stdout, version.Get())
		return 0
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "corput: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: corput <command> [flags]   |   corput --version")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	width := 8
	for n := range commands {
		names = append(names, n)
		width = max(width, len(n))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s %s\n", width, n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'corput <command> -h' for a command's flags.")
}
