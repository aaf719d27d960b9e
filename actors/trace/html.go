package trace

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"slices"
	"time"
)

// WriteHTML writes a self-contained page (no network, no script) with a
// waterfall chart of each trace: one bar per span in tree order, coloured
// by node, the critical path outlined, each bar's time in its tooltip.
// jaegerURL, if set, links each trace to Jaeger.
func WriteHTML(w io.Writer, traces []StepTrace, jaegerURL string) error {
	// Labels are monospace at about charW pixels a character: the label
	// column fits the longest, and the bars get barsW pixels after it.
	labelW := 0.0
	for _, t := range traces {
		for _, s := range treeOrder(t) {
			labelW = max(labelW, 4+10*float64(s.depth)+charW*float64(len(spanLabel(s.span))))
		}
	}
	labelW += 12
	width := labelW + barsW + 60 // room for the time after a bar that ends the step
	var charts []chart
	for _, t := range traces {
		charts = append(charts, waterfall(t, labelW, jaegerURL))
	}
	return page.Execute(w, struct {
		Width, LabelW float64
		Charts        []chart
		Created       string
	}{width, labelW, charts, time.Now().UTC().Format(time.RFC3339)})
}

// Chart geometry, in pixels: a row per span, about charW a label
// character, barsW for the bars after the label column.
const row, charW, barsW = 18.0, 6.7, 800.0

// palette colours the nodes of a trace, in the order they first appear.
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"}

// chart is one trace's waterfall.
type chart struct {
	Title, Link string
	Height      float64
	Bars        []bar
	Legend      []struct{ Node, Color string }
}

// bar is one span of a chart.
type bar struct {
	X, Y, W    float64
	Label, Tip string
	Color      string
	Critical   bool
	LabelX     float64
	Took       string
	TookX      float64
}

// waterfall is t's chart, its bars starting labelW pixels in.
func waterfall(t StepTrace, labelW float64, jaegerURL string) chart {
	onPath := map[string]bool{}
	for _, s := range CriticalPath(t) {
		onPath[s.Span.ID] = true
	}
	colors := map[string]string{}
	c := chart{Title: fmt.Sprintf("step %d: %s%s, trace %s", t.Step(), round(t.Root.Duration), map[bool]string{true: " (slow)"}[t.Slow()], t.ID)}
	if jaegerURL != "" {
		c.Link = jaegerURL + "/trace/" + t.ID
	}
	total := float64(max(t.Root.Duration, time.Microsecond))
	for i, s := range treeOrder(t) {
		col, ok := colors[s.span.Node]
		if !ok {
			col = palette[len(colors)%len(palette)]
			colors[s.span.Node] = col
			c.Legend = append(c.Legend, struct{ Node, Color string }{s.span.Node, col})
		}
		x := labelW + barsW*float64(s.span.Start.Sub(t.Root.Start))/total
		wd := max(barsW*float64(s.span.Duration)/total, 1)
		label := spanLabel(s.span)
		c.Bars = append(c.Bars, bar{X: x, Y: float64(i) * row, W: wd, Color: col, Critical: onPath[s.span.ID],
			Label: label, LabelX: 4 + 10*float64(s.depth), Took: round(s.span.Duration), TookX: x + wd + 4,
			Tip: fmt.Sprintf("%s on %s: %s (%.0f%% of the step)", label, s.span.Node, round(s.span.Duration), 100*float64(s.span.Duration)/total)})
	}
	c.Height = float64(len(c.Bars))*row + 4
	return c
}

// treeSpan is a span with its depth in the trace tree.
type treeSpan struct {
	span  Span
	depth int
}

// treeOrder lists t's spans depth first from the root, children by start.
func treeOrder(t StepTrace) []treeSpan {
	children := map[string][]Span{}
	for _, s := range t.Spans {
		children[s.Parent] = append(children[s.Parent], s)
	}
	var out []treeSpan
	var visit func(s Span, depth int)
	visit = func(s Span, depth int) {
		out = append(out, treeSpan{s, depth})
		kids := children[s.ID]
		slices.SortFunc(kids, func(a, b Span) int { return cmp.Compare(a.Start.UnixNano(), b.Start.UnixNano()) })
		for _, k := range kids {
			visit(k, depth+1)
		}
	}
	visit(t.Root, 0)
	return out
}

// round prints a duration to the millisecond (microseconds below one).
func round(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// spanLabel is a span's name and, when it names one, its actor.
func spanLabel(s Span) string {
	if s.Actor != "" {
		return s.Name + " " + s.Actor
	}
	return s.Name
}

var page = template.Must(template.New("traces").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>mgrpo: slowest steps</title>
<style>
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222 }
h1 { font-size: 18px } h2 { font-size: 14px; margin: 24px 0 4px }
svg text { font: 11px ui-monospace, monospace; fill: #222 }
.crit { stroke: #000; stroke-width: 1.5 }
svg text.took { fill: #777 }
.legend span { display: inline-block; margin-right: 14px }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px }
</style></head><body>
<h1>mgrpo: slowest steps</h1>
<p>One chart per step trace, slowest first: a bar per span, indented under its parent and coloured by
node; outlined bars are on the step's critical path. Hover a bar for its time. Written {{.Created}}.</p>
{{range .Charts}}
<h2>{{if .Link}}<a href="{{.Link}}">{{.Title}}</a>{{else}}{{.Title}}{{end}}</h2>
<div class="legend">{{range .Legend}}<span><i style="background:{{.Color}}"></i>{{.Node}}</span>{{end}}</div>
<svg width="{{$.Width}}" height="{{.Height}}" role="img">
<line x1="{{$.LabelW}}" x2="{{$.LabelW}}" y1="0" y2="{{.Height}}" stroke="#ccc"></line>
{{range .Bars}}<g><title>{{.Tip}}</title>
<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="14" fill="{{.Color}}"{{if .Critical}} class="crit"{{end}}></rect>
<text x="{{.LabelX}}" y="{{.Y}}" dy="11">{{.Label}}</text>
<text x="{{.TookX}}" y="{{.Y}}" dy="11" class="took">{{.Took}}</text></g>
{{end}}</svg>
{{end}}
</body></html>
`))
