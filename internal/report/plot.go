package report

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// palette is ten well-separated colours (Tableau 10), so neighbouring series
// never look alike; series beyond ten reuse them with dashes.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

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

// LinePlot draws series as lines into a PNG at path, with the legend in its
// own column to the right of the plot so it never hides a line.
func LinePlot(path string, o LineOptions, series ...Series) error {
	p := plot.New()
	p.Title.Text = o.Title
	p.X.Label.Text = o.XLabel
	p.Y.Label.Text = o.YLabel
	if o.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top = true
	legend.Left = true
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
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.6)
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(2)}
		}
		p.Add(l)
		legend.Add(s.Name, l)
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
	w, h := o.Width, o.Height
	if w == 0 {
		w = 10 * vg.Inch
	}
	if h == 0 {
		h = 4 * vg.Inch
	}
	if len(series) <= 1 {
		return save(p, path, w, h)
	}
	// Size the legend column to its longest entry.
	width := vg.Length(0)
	for _, s := range series {
		width = max(width, legend.TextStyle.Width(s.Name))
	}
	width += legend.ThumbnailWidth + 3*vg.Points(6)
	img := vgimg.New(w, h)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -width, 0, 0))
	legend.Draw(draw.Crop(dc, w-width+vg.Points(6), 0, 0, -vg.Points(24)))
	return writePNG(path, img)
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
	bars.Color = palette[0]
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

func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: save %s: %w", path, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("report: save %s: %w", path, err)
	}
	return f.Close()
}
