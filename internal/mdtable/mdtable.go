// Package mdtable reads the rows of markdown tables, for the tests that
// keep docs/contract.md complete: every metric, config key and error
// reason of the code has its row there.
package mdtable

import "strings"

// Cells splits a table row into its trimmed cells (an escaped \| stays
// inside its cell); a line that is not a row has none.
func Cells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") {
		return nil
	}
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	cell := 0
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(line[cell:i]))
			cell = i + 1
		}
	}
	return append(cells, strings.TrimSpace(line[cell:]))
}

// Find returns the cells of the first row of doc whose cell at column is
// value.
func Find(doc string, column int, value string) ([]string, bool) {
	for line := range strings.Lines(doc) {
		if cells := Cells(line); len(cells) > column && cells[column] == value {
			return cells, true
		}
	}
	return nil, false
}

// FirstCells is the set of every row's first cell.
func FirstCells(doc string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.Lines(doc) {
		if cells := Cells(line); len(cells) > 0 {
			out[cells[0]] = true
		}
	}
	return out
}

// Without returns doc without the rows whose first cell is first.
func Without(doc, first string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if cells := Cells(line); len(cells) > 0 && cells[0] == first {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}
