// Package report turns measured figures into the artefacts people read: text
// tables for the terminal, markdown, a self-contained HTML page with inline
// plots, and PNG plots drawn with gonum.org/v1/plot. It computes nothing
// itself: every number it shows was measured by the caller.
package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
)

// Table is a titled grid of already formatted cells.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Note   string // printed under the table
}

// Text renders the table with aligned columns for a terminal.
func (t Table) Text() string {
	widths := make([]int, len(t.Header))
	for i, h := range t.Header {
		widths[i] = len(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(widths) && len(c) > widths[i] {
				widths[i] = len(c)
			}
		}
	}
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(t.Title + "\n")
	}
	line := func(cells []string) {
		for i, c := range cells {
			if i >= len(widths) {
				break
			}
			if i > 0 {
				b.WriteString("  ")
			}
			if i == 0 {
				fmt.Fprintf(&b, "%-*s", widths[i], c)
			} else {
				fmt.Fprintf(&b, "%*s", widths[i], c)
			}
		}
		b.WriteString("\n")
	}
	line(t.Header)
	sep := make([]string, len(widths))
	for i, w := range widths {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, r := range t.Rows {
		line(r)
	}
	if t.Note != "" {
		b.WriteString(t.Note + "\n")
	}
	return b.String()
}

// Markdown renders the table as GitHub-flavoured markdown.
func (t Table) Markdown() string {
	var b strings.Builder
	if t.Title != "" {
		b.WriteString("**" + t.Title + "**\n\n")
	}
	row := func(cells []string) {
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	row(t.Header)
	sep := make([]string, len(t.Header))
	for i := range sep {
		sep[i] = "---"
	}
	row(sep)
	for _, r := range t.Rows {
		row(r)
	}
	if t.Note != "" {
		b.WriteString("\n" + t.Note + "\n")
	}
	return b.String()
}

// Section is one part of a report: prose, tables and plots (PNG files
// relative to the report's directory).
type Section struct {
	Title  string
	Text   string
	Tables []Table
	Plots  []string
}

// Doc is a whole report.
type Doc struct {
	Title    string
	Intro    string
	Sections []Section
}

// WriteMarkdown writes the report as markdown to path; plots are linked.
func (d Doc) WriteMarkdown(path string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", d.Title, d.Intro)
	for _, s := range d.Sections {
		fmt.Fprintf(&b, "## %s\n\n", s.Title)
		if s.Text != "" {
			b.WriteString(s.Text + "\n\n")
		}
		for _, t := range s.Tables {
			b.WriteString(t.Markdown() + "\n")
		}
		for _, p := range s.Plots {
			fmt.Fprintf(&b, "![%s](%s)\n\n", filepath.Base(p), p)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// WriteHTML writes a self-contained page to path: plots are inlined as
// data URIs, so the file opens anywhere without its directory.
func (d Doc) WriteHTML(path string) error {
	dir := filepath.Dir(path)
	var b bytes.Buffer
	esc := html.EscapeString
	fmt.Fprintf(&b, "<!doctype html><html><head><meta charset=\"utf-8\"><title>%s</title>", esc(d.Title))
	b.WriteString(`<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
p.note{color:#555;font-size:90%}</style></head><body>`)
	fmt.Fprintf(&b, "<h1>%s</h1><p>%s</p>", esc(d.Title), esc(d.Intro))
	for _, s := range d.Sections {
		fmt.Fprintf(&b, "<h2>%s</h2>", esc(s.Title))
		if s.Text != "" {
			for _, para := range strings.Split(s.Text, "\n\n") {
				fmt.Fprintf(&b, "<p>%s</p>", esc(para))
			}
		}
		for _, t := range s.Tables {
			if t.Title != "" {
				fmt.Fprintf(&b, "<h3>%s</h3>", esc(t.Title))
			}
			b.WriteString("<table><tr>")
			for _, h := range t.Header {
				fmt.Fprintf(&b, "<th>%s</th>", esc(h))
			}
			b.WriteString("</tr>")
			for _, r := range t.Rows {
				b.WriteString("<tr>")
				for _, c := range r {
					fmt.Fprintf(&b, "<td>%s</td>", esc(c))
				}
				b.WriteString("</tr>")
			}
			b.WriteString("</table>")
			if t.Note != "" {
				fmt.Fprintf(&b, "<p class=\"note\">%s</p>", esc(t.Note))
			}
		}
		for _, p := range s.Plots {
			data, err := os.ReadFile(filepath.Join(dir, p))
			if err != nil {
				return fmt.Errorf("report: inline plot %s: %w", p, err)
			}
			fmt.Fprintf(&b, "<img alt=\"%s\" src=\"data:image/png;base64,%s\">", esc(p), base64.StdEncoding.EncodeToString(data))
		}
	}
	b.WriteString("</body></html>\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}
