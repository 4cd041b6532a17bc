//go:build e2e

package observe

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// maxLines bounds the lines of one picture; the rest are left out (the
// legend says how many).
const maxLines = 12

// WritePNGs draws, for each dashboard row, its main series (every query
// of the row's first panel) over the load as dir/<nn>-<row>.png, from the
// query results of EvaluateDashboard. Time is in seconds since start.
// It returns the files written.
func WritePNGs(dir string, results []QueryResult, start time.Time) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", dir, err)
	}
	type main struct {
		row, panel string
		qs         []QueryResult
	}
	var rows []main
	for _, q := range results {
		if len(rows) == 0 || rows[len(rows)-1].row != q.Row {
			rows = append(rows, main{row: q.Row, panel: q.Panel})
		}
		if r := &rows[len(rows)-1]; r.panel == q.Panel {
			r.qs = append(r.qs, q)
		}
	}
	var files []string
	for i, r := range rows {
		p := plot.New()
		p.Title.Text = r.row + ": " + r.panel
		p.X.Label.Text = "seconds since the load started"
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		n, left := 0, 0
		for _, q := range r.qs {
			for _, s := range q.Series {
				if n >= maxLines {
					left++
					continue
				}
				xys := xyOf(s, start)
				if len(xys) == 0 {
					continue
				}
				l, err := plotter.NewLine(xys)
				if err != nil {
					return files, err
				}
				l.Color = plotutil.Color(n)
				l.Dashes = plotutil.Dashes(n / len(plotutil.DefaultColors))
				l.Width = vg.Points(1.5)
				p.Add(l)
				p.Legend.Add(clip(legend(q.Target.LegendFormat, s.Metric), 40), l)
				n++
			}
		}
		if left > 0 {
			l, _ := plotter.NewLine(plotter.XYs{})
			l.Color = color.Transparent
			p.Legend.Add(fmt.Sprintf("(%d more series not drawn)", left), l)
		}
		name := filepath.Join(dir, fmt.Sprintf("%02d-%s.png", i+1, slug(r.row)))
		if err := p.Save(9*vg.Inch, 4.5*vg.Inch, name); err != nil {
			return files, fmt.Errorf("cannot write %s: %w", name, err)
		}
		files = append(files, name)
	}
	return files, nil
}

// xyOf returns the finite points of s, x in seconds since start.
func xyOf(s series, start time.Time) plotter.XYs {
	ts, vs := s.points()
	var xys plotter.XYs
	for i := range ts {
		if math.IsNaN(vs[i]) || math.IsInf(vs[i], 0) {
			continue
		}
		xys = append(xys, plotter.XY{X: ts[i].Sub(start).Seconds(), Y: vs[i]})
	}
	return xys
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

func slug(s string) string {
	s = strings.Trim(nonWord.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if s == "" {
		return "panels"
	}
	return s
}
