package runlog

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
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
	maxChartPoints         = 2000 // longer series are thinned to about this many points
)

// Page and chart styling (inline, so the page needs no network).
const (
	reportStyle             = `body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}.grid{display:flex;flex-wrap:wrap;gap:14px}figure{margin:0;border:1px solid #ddd;padding:6px}figcaption{font-size:.85em;font-family:monospace}svg text{font-size:10px;font-family:monospace;fill:#555}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 8px;font-family:monospace;text-align:right}`
	reportPolylineAttrs     = `fill="none" stroke="#1f77b4" stroke-width="1.5"`
	reportGridStrokeAttrs   = `stroke="#eee"`
	reportAxisStrokeAttrs   = `stroke="#999"`
	reportMissingValueLabel = "-"
)

// WriteReport renders report.html from the run's metrics.jsonl, atomically.
// Call it at each checkpoint and at the end of the run.
func (d *Dir) WriteReport() error {
	return WriteReport(d.path)
}

// WriteReport renders runDir/report.html from runDir/metrics.jsonl,
// atomically. It reads the metrics a line at a time and keeps only the
// series, so its memory is that of the numbers charted, not of the file
// (rebuilding the report from the whole file at every checkpoint grew the
// process by ~40 MB over 2500 steps). Lines it cannot read are left out.
func WriteReport(runDir string) error {
	f, err := os.Open(filepath.Join(runDir, MetricsFile))
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	defer f.Close()
	set := newSeriesSet()
	if _, _, _, err := scanMetrics(f, -1, func(line []byte, fl fate) error {
		if fl == keepLine {
			rec, _ := DecodeMetrics(line) // keepLine: it decodes
			set.add(rec)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(runDir, ReportFile), set.render(filepath.Base(runDir))); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// series is one metric over steps; NaN marks a null value.
type series struct {
	key   string
	steps []int
	vals  []float64
}

// RenderReport returns a self-contained HTML page (inline CSS and SVG, no
// script, no network) with one line chart per metric key in recs: first the
// headline charts (reward, accuracy, entropy, KL, tau, beta, weight
// entropy, when present), then every other key in name order. Each chart is
// one <svg> whose <polyline> elements hold one point per finite value
// (nulls break the line). The output depends only on its inputs.
func RenderReport(title string, recs []Record) []byte {
	set := newSeriesSet()
	for _, r := range recs {
		set.add(r)
	}
	return set.render(title)
}

// seriesSet gathers metrics records, in step order, into one series per
// key.
type seriesSet struct {
	all         map[string]*series
	n           int // records added
	first, last int // their first and last step
}

func newSeriesSet() *seriesSet { return &seriesSet{all: map[string]*series{}} }

// add appends every value of r to its key's series.
func (set *seriesSet) add(r Record) {
	if set.n == 0 {
		set.first = r.Step
	}
	set.n, set.last = set.n+1, r.Step
	for k, v := range r.Values {
		s := set.all[k]
		if s == nil {
			s = &series{key: k}
			set.all[k] = s
		}
		s.steps = append(s.steps, r.Step)
		s.vals = append(s.vals, v)
	}
}

// render is the report page of the records added (see RenderReport).
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
		fmt.Fprintf(b, "<td>%s</td>", formatValue(s.vals[len(s.vals)-1]))
	}
	b.WriteString("</tr>\n</table>\n")
}

// writeChart writes one <figure> with an SVG line chart of s.
func writeChart(b *bytes.Buffer, title string, s *series) {
	lo, hi, ok := finiteRange(s.vals)
	caption := fmt.Sprintf("%s (%s) last %s", title, s.key, formatValue(s.vals[len(s.vals)-1]))
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
	x0, x1 := s.steps[0], s.steps[len(s.steps)-1]
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
	for _, run := range finiteRuns(s, maxChartPoints) {
		b.WriteString("<polyline " + reportPolylineAttrs + " points=\"")
		for i, j := range run {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(b, "%.1f,%.1f", xpos(s.steps[j]), ypos(s.vals[j]))
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

// finiteRange returns the smallest and largest finite value of vals.
func finiteRange(vals []float64) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if isFinite(v) {
			lo, hi, ok = math.Min(lo, v), math.Max(hi, v), true
		}
	}
	return lo, hi, ok
}

// finiteRuns returns the indices of s's finite values split into runs at
// non-finite ones; when there are more than limit finite values, every
// stride-th index is kept (and each run's last).
func finiteRuns(s *series, limit int) [][]int {
	n := 0
	for _, v := range s.vals {
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
	for i, v := range s.vals {
		if !isFinite(v) {
			if len(cur) > 0 {
				runs = append(runs, cur)
			}
			cur = nil
			continue
		}
		last := i+1 == len(s.vals) || !isFinite(s.vals[i+1])
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
