package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// flagSet is a command's flag set; its usage prints the given lines and
// then the flags.
func flagSet(name string, stderr io.Writer, usage ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		for _, l := range usage {
			fmt.Fprintln(stderr, l)
		}
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a command's flags. When the command should not run it
// returns false and the exit code: 0 after -h, 2 for bad flags.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// parseFlags is parse for a command that takes no positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if code, ok := parse(fs, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// logLevel defines a command's --log-level flag.
func logLevel(fs *flag.FlagSet) *string {
	return fs.String("log-level", "info", "log level: debug, info, warn, error")
}

// newLogger is a command's text log on stderr at the --log-level given;
// a level it does not know is reported, naming the command, and false.
func newLogger(command, level string, stderr io.Writer) (*slog.Logger, bool) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		fmt.Fprintf(stderr, "%s: --log-level %q: use debug, info, warn or error\n", command, level)
		return nil, false
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})), true
}

// printJSON writes v to w as indented JSON, the form of every --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printResult prints a command's result v to stdout: as JSON with
// --json, else as text. A failed write is reported after the command's
// name, and is exit 1.
func printResult(command string, asJSON bool, v any, text func(io.Writer) error, stdout, stderr io.Writer) int {
	var err error
	if asJSON {
		err = printJSON(stdout, v)
	} else {
		err = text(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", command, err)
		return 1
	}
	return 0
}

// exitCode is the exit status of a command whose run ended with err: 0
// for none; otherwise err is printed after the command's name, and the
// status is 2 for input the operator fixes (isConfig) and 1 for any other
// failure.
func exitCode(command string, err error, isConfig func(error) bool, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, command+":", err)
	if isConfig(err) {
		return 2
	}
	return 1
}
