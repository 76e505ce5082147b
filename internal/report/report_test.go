package report

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTableText(t *testing.T) {
	tb := Table{Title: "T", Header: []string{"step", "open"}, Rows: [][]string{{"baseline", "12800"}, {"subset", "1600"}}}
	got := tb.Text()
	want := "T\nstep       open\n--------  -----\nbaseline  12800\nsubset     1600\n"
	if got != want {
		t.Fatalf("Text:\n%s\nwant:\n%s", got, want)
	}
	if md := tb.Markdown(); !strings.Contains(md, "| baseline | 12800 |") {
		t.Fatalf("Markdown:\n%s", md)
	}
}

func TestPlotsAndHTML(t *testing.T) {
	dir := t.TempDir()
	err := LinePlot(filepath.Join(dir, "line.png"), LineOptions{Title: "churn", LogY: true, Marks: []Mark{{X: 1, Label: "deploy"}}},
		Series{Name: "a", X: []float64{0, 1, 2}, Y: []float64{0, 10, 100}})
	if err != nil {
		t.Fatal(err)
	}
	if err := BarPlot(filepath.Join(dir, "bar.png"), "p99", "ms", []string{"rr", "ewma"}, []float64{700, 150}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"line.png", "bar.png"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(data)); err != nil {
			t.Fatalf("%s is not a PNG: %v", f, err)
		}
	}
	d := Doc{Title: "lab", Intro: "x < y", Sections: []Section{{Title: "s", Text: "a\n\nb", Plots: []string{"line.png"},
		Tables: []Table{{Header: []string{"a"}, Rows: [][]string{{"<1>"}}}}}}}
	if err := d.WriteHTML(filepath.Join(dir, "r.html")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteMarkdown(filepath.Join(dir, "r.md")); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "r.html"))
	if !bytes.Contains(html, []byte("data:image/png;base64,")) || !bytes.Contains(html, []byte("&lt;1&gt;")) {
		t.Fatal("HTML lacks the inline plot or escaping")
	}
	if err := (Doc{Sections: []Section{{Plots: []string{"missing.png"}}}}).WriteHTML(filepath.Join(dir, "bad.html")); err == nil {
		t.Fatal("missing plot not reported")
	}
}
