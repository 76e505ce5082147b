package report

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a plot.
type Series struct {
	Name string
	X, Y []float64
}

// LineOptions shape a line plot.
type LineOptions struct {
	Title, XLabel, YLabel string
	LogY                  bool // log-scale Y; zero and negative values are lifted to 0.1 (documented in the caption)
	Width, Height         vg.Length
	// Marks are vertical event lines (a deploy, an autoscale) at X with a label.
	Marks []Mark
}

// Mark is a labelled vertical line.
type Mark struct {
	X     float64
	Label string
}

// LinePlot draws series as lines into a PNG at path.
func LinePlot(path string, o LineOptions, series ...Series) error {
	p := plot.New()
	p.Title.Text = o.Title
	p.X.Label.Text = o.XLabel
	p.Y.Label.Text = o.YLabel
	if o.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	ymax := 0.0
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("report: series %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
		}
		pts := make(plotter.XYs, len(s.X))
		for j := range s.X {
			y := s.Y[j]
			if o.LogY && y < 0.1 {
				y = 0.1
			}
			pts[j].X, pts[j].Y = s.X[j], y
			ymax = math.Max(ymax, y)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("report: series %q: %w", s.Name, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	for _, m := range o.Marks {
		lo := 0.0
		if o.LogY {
			lo = 0.1
		}
		l, err := plotter.NewLine(plotter.XYs{{X: m.X, Y: lo}, {X: m.X, Y: math.Max(ymax, 1)}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 128}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		if m.Label != "" {
			lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: m.X, Y: math.Max(ymax, 1)}}, Labels: []string{m.Label}})
			if err == nil {
				p.Add(lbl)
			}
		}
	}
	return save(p, path, o.Width, o.Height)
}

// BarPlot draws one bar per label into a PNG at path.
func BarPlot(path, title, ylabel string, labels []string, values []float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	bars, err := plotter.NewBarChart(plotter.Values(values), vg.Points(28))
	if err != nil {
		return fmt.Errorf("report: bars %q: %w", title, err)
	}
	bars.Color = plotutil.Color(0)
	p.Add(plotter.NewGrid(), bars)
	p.NominalX(labels...)
	return save(p, path, 0, 0)
}

func save(p *plot.Plot, path string, w, h vg.Length) error {
	if w == 0 {
		w = 9 * vg.Inch
	}
	if h == 0 {
		h = 4 * vg.Inch
	}
	if err := p.Save(w, h, path); err != nil {
		return fmt.Errorf("report: save %s: %w", path, err)
	}
	return nil
}
