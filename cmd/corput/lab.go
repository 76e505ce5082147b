package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// lab.go is a placeholder until the lab exists: it accepts the lab's flags
// and runs the subsetting comparison on the seeds' example fleet.

func init() {
	register(command{name: "lab", summary: "run the experiments on an embedded default (for now: the subsetting comparison)", run: runLab})
}

func runLab(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("corput lab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("scenario", "", "scenario `NAME` (not used yet)")
	fs.String("out", "./lab-out", "report `DIR` (not used yet)")
	fs.Bool("live", false, "run over loopback sockets (not used yet)")
	fs.Bool("sim", false, "run in the simulator (not used yet)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	sc := defaultComparison
	fmt.Fprintf(stdout, "corput lab: the full lab (simulator, live mode, report and plots) is under construction;\n"+
		"running the subsetting comparison for %d endpoints × %d gateways × %d loops instead.\n\n",
		sc.Endpoints, sc.Fleet.Gateways, sc.Fleet.Loops)
	return printComparison(sc, false, stdout, stderr)
}
