package runlog

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
	"github.com/mgrpo/mgrpo/rewards"
)

// headlineChart is one of the report's first charts: a title and the
// metric keys that may hold it, the first present key winning.
type headlineChart struct {
	title string
	keys  []string
}

// headlineCharts lists the report's first charts, in order. Every other key
// found in metrics.jsonl is charted below them, sorted by name.
func headlineCharts() []headlineChart {
	return []headlineChart{
		{"Reward", []string{rewards.KeyReward}},
		{"Accuracy", []string{rewards.KeyAccuracy, KeyEvalGreedyAccuracy}},
		{"Policy entropy", []string{rewards.KeyPolicyEntropy}},
		{"KL", []string{rewards.KeyKL}},
		{"tau", []string{rewards.KeyTau}},
		{"beta", []string{rewards.KeyBeta}},
		{"Weight entropy", []string{rewards.KeyWeightEntropy}},
	}
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 460, 200
	padL, padR, padT, padB = 62, 12, 12, 28
	maxChartPoints         = 500 // longer series are thinned to about this many points (a chart is ~400 px wide)
)

// Page and chart styling (inline, so the page needs no network).
const (
	reportStyle             = `body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}.grid{display:flex;flex-wrap:wrap;gap:14px}figure{margin:0;border:1px solid #ddd;padding:6px}figcaption{font-size:.85em;font-family:monospace}svg text{font-size:10px;font-family:monospace;fill:#555}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 8px;font-family:monospace;text-align:right}`
	reportPolylineAttrs     = `fill="none" stroke="#1f77b4" stroke-width="1.5"`
	reportGridStrokeAttrs   = `stroke="#eee"`
	reportAxisStrokeAttrs   = `stroke="#999"`
	reportMissingValueLabel = "-"
)

// WriteReport renders report.html, atomically, from the series the Dir
// keeps: read from metrics.jsonl once when the Dir is opened, then fed by
// WriteMetrics, each thinned to at most maxChartPoints points (series.add).
// Its memory is bounded however long the run (rebuilding the report from
// the whole metrics file at every checkpoint grew the process by ~40 MB
// over 2500 steps).
func (d *Dir) WriteReport() error {
	d.mu.Lock()
	page := d.charts.render(d.Name())
	d.mu.Unlock()
	if err := atomicfile.WriteBytes(filepath.Join(d.path, ReportFile), page); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// readCharts returns the series of the metrics file f, read a line at a
// time (lines that cannot be read are left out).
func readCharts(f io.ReadSeeker) (*seriesSet, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	set := newSeriesSet()
	if _, _, _, err := scanMetrics(f, -1, func(line []byte, fl fate) error {
		if fl == keepLine {
			rec, _ := DecodeMetrics(line) // keepLine: it decodes
			set.add(rec.Step, rec.Values)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	_, err := f.Seek(0, io.SeekEnd)
	return set, err
}

// series is one metric over steps, thinned as it grows: NaN marks a null
// value (a break in the line). Finite values are kept every stride-th;
// once maxChartPoints are kept, every other one is dropped and the stride
// doubles. The range, the last point and the last point before each break
// are always kept.
type series struct {
	key    string
	steps  []int
	vals   []float64
	stride int // keep every stride-th finite value
	seen   int // finite values offered

	lo, hi   float64 // range of the finite values
	finite   bool    // some value was finite
	pending  bool    // a finite value since the last kept point was not kept:
	pendStep int     // this one
	pendVal  float64
}

// add offers the value v of step (steps increase from call to call).
func (s *series) add(step int, v float64) {
	if !isFinite(v) {
		s.flush()
		s.steps, s.vals = append(s.steps, step), append(s.vals, v)
		return
	}
	s.lo, s.hi = math.Min(s.lo, v), math.Max(s.hi, v)
	s.finite = true
	keep := s.seen%s.stride == 0
	s.seen++
	if !keep {
		s.pending, s.pendStep, s.pendVal = true, step, v
		return
	}
	s.pending = false
	s.steps, s.vals = append(s.steps, step), append(s.vals, v)
	if len(s.vals) > maxChartPoints {
		s.halve()
	}
}

// flush keeps the pending point (a run's last before a break).
func (s *series) flush() {
	if s.pending {
		s.steps, s.vals = append(s.steps, s.pendStep), append(s.vals, s.pendVal)
		s.pending = false
	}
}

// halve drops every other finite point (breaks, and the points before
// them, stay) and doubles the stride.
func (s *series) halve() {
	n, odd := 0, false
	for i, v := range s.vals {
		if isFinite(v) {
			odd = !odd
			if !odd && (i+1 == len(s.vals) || isFinite(s.vals[i+1])) {
				continue
			}
		}
		s.steps[n], s.vals[n] = s.steps[i], v
		n++
	}
	s.steps, s.vals = s.steps[:n], s.vals[:n]
	s.stride *= 2
}

// points returns the kept points with the pending last one.
func (s *series) points() ([]int, []float64) {
	if !s.pending {
		return s.steps, s.vals
	}
	return append(s.steps[:len(s.steps):len(s.steps)], s.pendStep), append(s.vals[:len(s.vals):len(s.vals)], s.pendVal)
}

// renderReport returns a self-contained HTML page (inline CSS and SVG, no
// script, no network) with one line chart per metric key in recs: first
// the headline charts (reward, accuracy, entropy, KL, tau, beta, weight
// entropy, when present), then every other key in name order. Each chart
// is one <svg> whose <polyline> elements hold one point per kept finite
// value (nulls break the line; long series are thinned to about
// maxChartPoints). The output depends only on its inputs.
func renderReport(title string, recs []Record) []byte {
	set := newSeriesSet()
	for _, r := range recs {
		set.add(r.Step, r.Values)
	}
	return set.render(title)
}

// seriesSet gathers metrics lines, in step order, into one series per
// key.
type seriesSet struct {
	all         map[string]*series
	n           int // lines added
	first, last int // their first and last step
}

func newSeriesSet() *seriesSet { return &seriesSet{all: map[string]*series{}} }

// add appends the values of step's metrics line to their series.
func (set *seriesSet) add(step int, values map[string]float64) {
	if set.n == 0 {
		set.first = step
	}
	set.n, set.last = set.n+1, step
	for k, v := range values {
		s := set.all[k]
		if s == nil {
			s = &series{key: k, stride: 1, lo: math.Inf(1), hi: math.Inf(-1)}
			set.all[k] = s
		}
		s.add(step, v)
	}
}

// render is the report page of the lines added (see renderReport).
func (set *seriesSet) render(title string) []byte {
	all := set.all
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s: mgrpo report</title>\n<style>%s</style>\n</head>\n<body>\n",
		html.EscapeString(title), reportStyle)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(title))
	if set.n == 0 {
		b.WriteString("<p>No metrics yet.</p>\n</body>\n</html>\n")
		return b.Bytes()
	}
	fmt.Fprintf(&b, "<p>%d steps logged, steps %d to %d.</p>\n", set.n, set.first, set.last)
	used := map[string]bool{}
	var heads []*series
	var titles []string
	for _, h := range headlineCharts() {
		for _, k := range h.keys {
			if s, ok := all[k]; ok {
				heads, titles = append(heads, s), append(titles, h.title)
				used[k] = true
				break
			}
		}
	}
	writeSummary(&b, heads, titles)
	b.WriteString("<div class=\"grid\">\n")
	for i, s := range heads {
		writeChart(&b, titles[i], s)
	}
	b.WriteString("</div>\n")
	var rest []string
	for k := range all {
		if !used[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	if len(rest) > 0 {
		fmt.Fprintf(&b, "<details>\n<summary><h2 style=\"display:inline\">All other metrics (%d)</h2></summary>\n<div class=\"grid\">\n", len(rest))
		for _, k := range rest {
			writeChart(&b, k, all[k])
		}
		b.WriteString("</div>\n</details>\n")
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

// writeSummary writes a table of the last value of each headline series.
func writeSummary(b *bytes.Buffer, heads []*series, titles []string) {
	if len(heads) == 0 {
		return
	}
	b.WriteString("<table>\n<tr>")
	for _, t := range titles {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(t))
	}
	b.WriteString("</tr>\n<tr>")
	for _, s := range heads {
		_, vals := s.points()
		fmt.Fprintf(b, "<td>%s</td>", formatValue(vals[len(vals)-1]))
	}
	b.WriteString("</tr>\n</table>\n")
}

// writeChart writes one <figure> with an SVG line chart of s.
func writeChart(b *bytes.Buffer, title string, s *series) {
	steps, vals := s.points()
	lo, hi, ok := s.lo, s.hi, s.finite
	caption := fmt.Sprintf("%s (%s) last %s", title, s.key, formatValue(vals[len(vals)-1]))
	fmt.Fprintf(b, "<figure>\n<figcaption>%s</figcaption>\n", html.EscapeString(caption))
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">\n",
		chartW, chartH, chartW, chartH, html.EscapeString(s.key))
	if !ok {
		lo, hi = 0, 1
	}
	if hi == lo {
		d := math.Max(math.Abs(lo)*0.1, 1e-3)
		lo, hi = lo-d, hi+d
	}
	m := (hi - lo) * 0.05 // keep the line off the frame
	lo, hi = lo-m, hi+m
	x0, x1 := steps[0], steps[len(steps)-1]
	if x1 == x0 {
		x1 = x0 + 1
	}
	xpos := func(step int) float64 {
		return padL + float64(step-x0)/float64(x1-x0)*(chartW-padL-padR)
	}
	ypos := func(v float64) float64 {
		return padT + (hi-v)/(hi-lo)*(chartH-padT-padB)
	}
	writeAxes(b, lo, hi, x0, x1, ypos)
	for _, run := range finiteRuns(vals, maxChartPoints) {
		b.WriteString("<polyline " + reportPolylineAttrs + " points=\"")
		for i, j := range run {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(b, "%.1f,%.1f", xpos(steps[j]), ypos(vals[j]))
		}
		b.WriteString("\"/>\n")
	}
	b.WriteString("</svg>\n</figure>\n")
}

// writeAxes draws the plot frame, three horizontal grid lines with their
// values, and the first and last step under the x axis.
func writeAxes(b *bytes.Buffer, lo, hi float64, x0, x1 int, ypos func(float64) float64) {
	for _, v := range []float64{lo, (lo + hi) / 2, hi} {
		y := ypos(v)
		fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" %s/>\n", padL, y, chartW-padR, y, reportGridStrokeAttrs)
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", padL-4, y+3, formatValue(v))
	}
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" %s/>\n",
		padL, padT, chartW-padL-padR, chartH-padT-padB, reportAxisStrokeAttrs)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\">%d</text>\n", padL, chartH-10, x0)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%d</text>\n", chartW-padR, chartH-10, x1)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (padL+chartW-padR)/2, chartH-10)
}

// finiteRuns returns the indices of vals's finite values split into runs
// at non-finite ones; when there are more than limit finite values, every
// stride-th index is kept (and each run's last).
func finiteRuns(vals []float64, limit int) [][]int {
	n := 0
	for _, v := range vals {
		if isFinite(v) {
			n++
		}
	}
	stride := 1
	if n > limit {
		stride = (n + limit - 1) / limit
	}
	var runs [][]int
	var cur []int
	seen := 0
	for i, v := range vals {
		if !isFinite(v) {
			if len(cur) > 0 {
				runs = append(runs, cur)
			}
			cur = nil
			continue
		}
		last := i+1 == len(vals) || !isFinite(vals[i+1])
		if seen%stride == 0 || last {
			cur = append(cur, i)
		}
		seen++
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	return runs
}

// formatValue prints a metric value compactly (4 significant digits), or
// "-" when it is not finite.
func formatValue(v float64) string {
	if !isFinite(v) {
		return reportMissingValueLabel
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
