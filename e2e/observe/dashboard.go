//go:build e2e

package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// DashboardPath is the shipped dashboard, relative to the repository root.
const DashboardPath = "deploy/helm/loom/dashboards/loom.json"

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel (a row is a panel of type row).
type Panel struct {
	Type    string   `json:"type"`
	Title   string   `json:"title"`
	Targets []Target `json:"targets"`
	// Panels of a collapsed row.
	Panels []Panel `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	Exemplar     bool   `json:"exemplar"`
}

// ReadDashboard reads the dashboard at path.
func ReadDashboard(path string) (Dashboard, error) {
	var d Dashboard
	b, err := os.ReadFile(path)
	if err != nil {
		return d, fmt.Errorf("cannot read the dashboard: %w", err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("cannot decode the dashboard %s: %w", path, err)
	}
	return d, nil
}

// Rows returns the dashboard's panels grouped by row, in order; panels
// before the first row are in a row titled "".
func (d Dashboard) Rows() []Row {
	var rows []Row
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, Row{Title: p.Title, Panels: p.Panels})
			continue
		}
		if len(rows) == 0 {
			rows = append(rows, Row{})
		}
		rows[len(rows)-1].Panels = append(rows[len(rows)-1].Panels, p)
	}
	return rows
}

// Row is a dashboard row and its panels.
type Row struct {
	Title  string
	Panels []Panel
}

// QueryResult is what one query of a panel returned over the load.
type QueryResult struct {
	Row, Panel string
	Target     Target
	Expr       string // as sent: the dashboard's variables substituted
	Series     []series
	Err        error
}

// Summary describes the result in one line: series count, the largest and
// the last value over all series.
func (q QueryResult) Summary() string {
	if q.Err != nil {
		return "error: " + q.Err.Error()
	}
	if len(q.Series) == 0 {
		return "no series"
	}
	peak, last := math.Inf(-1), math.Inf(-1)
	for _, s := range q.Series {
		_, vs := s.points()
		for _, v := range vs {
			if !math.IsNaN(v) && v > peak {
				peak = v
			}
		}
		if len(vs) > 0 && !math.IsNaN(vs[len(vs)-1]) && vs[len(vs)-1] > last {
			last = vs[len(vs)-1]
		}
	}
	return fmt.Sprintf("%d series, max %s, last %s", len(q.Series), fmtValue(peak), fmtValue(last))
}

func fmtValue(v float64) string {
	switch {
	case math.IsInf(v, -1):
		return "NaN"
	case v != 0 && math.Abs(v) < 0.01:
		return fmt.Sprintf("%.2g", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// variables substitutes the dashboard's variables as Grafana does with
// every job selected ($job: .*) and $__rate_interval at its floor, four
// scrape intervals.
func variables(expr string, scrape time.Duration) string {
	r := strings.NewReplacer(
		"$__rate_interval", (4 * scrape).String(),
		"${__rate_interval}", (4 * scrape).String(),
		"$job", ".*",
		"${job}", ".*",
	)
	return r.Replace(expr)
}

var labelValuesDef = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// EvaluateDashboard runs every query of every panel of the dashboard at
// path over [start, end] against Prometheus, and the query of each query
// variable. It returns every result, and an error naming each query that
// failed or returned no series.
func (s *Session) EvaluateDashboard(ctx context.Context, path string, start, end time.Time) ([]QueryResult, error) {
	d, err := ReadDashboard(path)
	if err != nil {
		return nil, err
	}
	pc := promClient{s.PrometheusURL}
	step := s.cfg.ScrapeInterval
	if span := end.Sub(start); span/step > 1000 {
		step = span / 1000
	}
	var out []QueryResult
	var problems []string
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesDef.FindStringSubmatch(v.Definition)
		if m == nil {
			problems = append(problems, fmt.Sprintf("variable %s: cannot evaluate %q", v.Name, v.Definition))
			continue
		}
		vals, err := pc.labelValues(ctx, m[2], m[1])
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("variable %s: %v", v.Name, err))
		case len(vals) == 0:
			problems = append(problems, fmt.Sprintf("variable %s: %s has no values", v.Name, v.Definition))
		}
	}
	for _, row := range d.Rows() {
		for _, p := range row.Panels {
			if len(p.Targets) == 0 {
				problems = append(problems, fmt.Sprintf("panel %q has no query", p.Title))
			}
			for _, t := range p.Targets {
				q := QueryResult{Row: row.Title, Panel: p.Title, Target: t, Expr: variables(t.Expr, s.cfg.ScrapeInterval)}
				q.Series, q.Err = pc.queryRange(ctx, q.Expr, start, end, step)
				if q.Err == nil && len(q.Series) == 0 {
					q.Err = errors.New("no series")
				}
				if q.Err != nil {
					problems = append(problems, fmt.Sprintf("panel %q query %s (%s): %v", p.Title, t.RefID, q.Expr, q.Err))
				}
				out = append(out, q)
			}
		}
	}
	if len(problems) > 0 {
		return out, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}

// Report writes the results as a Markdown table: row, panel, query,
// legend and what it showed.
func Report(results []QueryResult) string {
	var b strings.Builder
	b.WriteString("| row | panel | query | showed |\n|---|---|---|---|\n")
	for _, q := range results {
		legend := q.Target.LegendFormat
		if legend == "" {
			legend = q.Target.RefID
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", q.Row, q.Panel, legend, q.Summary())
	}
	return b.String()
}

// WriteReport writes Report(results) to dir/panels.md.
func WriteReport(dir string, results []QueryResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "panels.md"), []byte(Report(results)), 0o644)
}

// legend renders a Grafana legend format ("{{service}} p99") for a series.
func legend(format string, labels map[string]string) string {
	if format == "" || format == "__auto" {
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+"="+labels[k])
		}
		return strings.Join(parts, ",")
	}
	return regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`).ReplaceAllStringFunc(format, func(m string) string {
		k := strings.Trim(m, "{} ")
		return labels[k]
	})
}
