/*
Copyright The book-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command chart draws the soak's series (test/soak's soak.csv, faults.csv
// and meta.csv) as soak.png: heap in use, goroutines, open FDs and queue
// depth over time, one line per replica process, a dashed line at each
// fault, the warm-up and the end of the churn marked.
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	dir := flag.String("dir", "_output/soak", "the directory holding soak.csv, faults.csv and meta.csv; soak.png is written there")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "soak chart:", err)
		os.Exit(1)
	}
}

// panel is one of the chart's four plots: a column of soak.csv.
type panel struct {
	column, title, unit string
	scale               float64
}

var panels = []panel{
	{"heap_inuse_bytes", "heap in use (go_memstats_heap_inuse_bytes)", "MiB", 1.0 / (1 << 20)},
	{"goroutines", "goroutines (go_goroutines)", "goroutines", 1},
	{"open_fds", "open FDs (process_open_fds)", "FDs", 1},
	{"queue_depth", `queue depth (workqueue_depth{name="book"})`, "keys", 1},
}

func run(dir string) error {
	samples, err := readCSV(filepath.Join(dir, "soak.csv"))
	if err != nil {
		return err
	}
	faults, err := readCSV(filepath.Join(dir, "faults.csv"))
	if err != nil {
		return err
	}
	meta, err := readCSV(filepath.Join(dir, "meta.csv"))
	if err != nil {
		return err
	}
	marks := map[string]float64{}
	for _, m := range meta {
		if v, err := strconv.ParseFloat(m["value"], 64); err == nil {
			marks[m["key"]] = v / 60
		}
	}
	// One line per process: slot and generation.
	var procs []string
	for _, s := range samples {
		p := s["slot"] + "#" + s["gen"]
		if !slices.Contains(procs, p) {
			procs = append(procs, p)
		}
	}
	slices.Sort(procs)

	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "minutes since the churn started"
		p.Y.Label.Text = pn.unit
		p.Legend.Top = true
		ymax := 0.0
		for k, proc := range procs {
			var xys plotter.XYs
			for _, s := range samples {
				if s["slot"]+"#"+s["gen"] != proc {
					continue
				}
				x, err1 := strconv.ParseFloat(s["at_s"], 64)
				y, err2 := strconv.ParseFloat(s[pn.column], 64)
				if err1 != nil || err2 != nil {
					return fmt.Errorf("soak.csv: a row with %s=%q %s=%q", "at_s", s["at_s"], pn.column, s[pn.column])
				}
				xys = append(xys, plotter.XY{X: x / 60, Y: y * pn.scale})
				ymax = max(ymax, y*pn.scale)
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(k)
			line.Width = vg.Points(1)
			p.Add(line)
			if i == 0 {
				p.Legend.Add("replica "+proc, line)
			}
		}
		ymax = max(ymax*1.05, 1)
		for _, f := range faults {
			at, err := strconv.ParseFloat(f["at_s"], 64)
			if err != nil {
				return fmt.Errorf("faults.csv: at_s=%q", f["at_s"])
			}
			c := color.RGBA{R: 200, A: 255} // API server restarts
			if f["kind"] == "leader-kill" {
				c = color.RGBA{R: 120, B: 200, A: 255}
			}
			if err := vline(p, at/60, ymax, c, true); err != nil {
				return err
			}
		}
		for _, key := range []string{"warmup_s", "churn_end_s"} {
			if x, ok := marks[key]; ok {
				if err := vline(p, x, ymax, color.Gray{Y: 80}, false); err != nil {
					return err
				}
			}
		}
		p.Y.Min, p.Y.Max = 0, ymax
		plots[i] = []*plot.Plot{p}
	}
	const w, h = 30 * vg.Centimeter, 40 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	t := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Centimeter, PadBottom: vg.Millimeter * 5,
		PadLeft: vg.Millimeter * 5, PadRight: vg.Millimeter * 5, PadY: vg.Centimeter}
	canvases := plot.Align(plots, t, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	dc.FillText(draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 11), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter},
		vg.Point{X: w / 2, Y: h - vg.Millimeter*7},
		"book-controller soak: dashed red = API server restart, dashed violet = leader kill, grey = end of warm-up / of churn")
	out := filepath.Join(dir, "soak.png")
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Println("soak chart:", out)
	return nil
}

// vline draws a vertical line at x from 0 to ymax.
func vline(p *plot.Plot, x, ymax float64, c color.Color, dashed bool) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: ymax}})
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(0.8)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	return nil
}

// readCSV reads a CSV file with a header into one map per row.
func readCSV(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no header", path)
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, k := range rows[0] {
			m[k] = r[i]
		}
		out = append(out, m)
	}
	return out, nil
}
