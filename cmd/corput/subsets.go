package main

import (
	"fmt"
	"io"

	"github.com/corput/corput/internal/progress"
	"github.com/corput/corput/internal/subset"
)

func init() {
	register(command{name: "subsets", summary: "rank the subsetting algorithms by fleet balance and churn", run: runSubsets})
}

// defaultComparison is the seeds' example: an 800-endpoint origin behind
// 100 gateways with 16 loops each.
var defaultComparison = subset.Scenario{Endpoints: 800, Fleet: subset.Fleet{Gateways: 100, Loops: 16}, Trials: 10, Seed: 1}

// runSubsets is `corput subsets --origins N --gateways G --loops K [--size S]
// [--trials T] [--seed X] [--json]`.
func runSubsets(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("corput subsets", stderr,
		"usage: corput subsets --origins N --gateways G --loops K [--size S] [--trials T] [--seed X] [--json]",
		"\nMeasures ringsteady, hashmod, random, rendezvous and sre on one origin and prints",
		"their coverage balance and churn, best first (see docs/subsetting.md).")
	sc := defaultComparison
	fs.IntVar(&sc.Endpoints, "origins", sc.Endpoints, "`N` endpoints (origin servers) of the origin")
	fs.IntVar(&sc.Fleet.Gateways, "gateways", sc.Fleet.Gateways, "`G` gateway instances")
	fs.IntVar(&sc.Fleet.Loops, "loops", sc.Fleet.Loops, "`K` loops per gateway")
	fs.IntVar(&sc.Size, "size", 0, "subset size `S`: at most S endpoints per subset; 0 = automatic (25–50)")
	fs.IntVar(&sc.Trials, "trials", sc.Trials, "random memberships to average churn and coverage over")
	fs.Uint64Var(&sc.Seed, "seed", sc.Seed, "seed of the memberships, event choices and comparators")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	return printComparison(sc, *asJSON, stdout, stderr)
}

// printComparison runs sc over every algorithm and prints the ranking as a
// table or JSON; progress goes to stderr when it is a terminal.
func printComparison(sc subset.Scenario, asJSON bool, stdout, stderr io.Writer) int {
	sc.Progress = progress.Count(stderr, "subsets: trial")
	rep, err := subset.Compare(sc, subset.Algorithms())
	if err != nil {
		fmt.Fprintf(stderr, "corput subsets: %v\n", err)
		return 2
	}
	return printResult("corput subsets", asJSON, rep, rep.WriteTable, stdout, stderr)
}
