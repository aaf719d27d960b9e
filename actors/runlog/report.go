package runlog

import (
	"bytes"
	_ "embed"
	"fmt"
	"html"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// The page's script and style sheet, inlined into every page: the page
// needs no network.
var (
	//go:embed report.js
	pageScript string
	//go:embed report.css
	pageStyle string
)

// livePollMillis is how often a live page asks for new lines.
const livePollMillis = 2000

// WriteReport renders the run's page, report.html, atomically, from the
// logs the Dir keeps in memory (read once when it was opened, then fed by
// WriteMetrics and WriteWarmStart, each thinned to at most maxPageRows
// ordinary lines) and the run's config.yaml and sample tables: its memory
// is bounded however long the run, and no log is read again. Call it at
// each checkpoint and at the end of the run.
func (d *Dir) WriteReport() error {
	r := &pageRun{name: d.Name()}
	if err := r.readFiles(d.path); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	d.mu.Lock()
	r.metrics, r.warm = d.metrics.page, d.warm.page
	page := renderPage([]*pageRun{r}, false)
	d.mu.Unlock()
	if err := atomicfile.WriteBytes(filepath.Join(d.path, ReportFile), page); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WritePage renders the page of the runs in runDirs to path, atomically:
// one run's page, or the runs overlaid, one colour per run. The page is
// self-contained (inline script, style and data; no network): the
// headline (task, model, objective, steps, wall time, greedy accuracy
// against the warm start, tokens/s) and the guards' alerts, curves of the
// metrics the objective uses (raw and smoothed), every other metric on
// demand, the stage times per step with links to their traces, and the
// sample tables.
func WritePage(path string, runDirs ...string) error {
	runs, err := loadRuns(runDirs)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := atomicfile.WriteBytes(path, renderPage(runs, false)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// loadRuns reads each run directory for its page.
func loadRuns(dirs []string) ([]*pageRun, error) {
	runs := make([]*pageRun, len(dirs))
	for i, dir := range dirs {
		r, err := loadRun(dir)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", dir, err)
		}
		runs[i] = r
	}
	return runs, nil
}

// renderPage returns the HTML page of runs. A live page polls the server
// that rendered it for the lines written after those it carries.
func renderPage(runs []*pageRun, live bool) []byte {
	names := make([]string, len(runs))
	for i, r := range runs {
		names[i] = r.name
	}
	title := strings.Join(names, " vs ")
	var b bytes.Buffer
	b.Grow(1 << 16)
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>%s: mgrpo</title>\n<style>\n%s</style>\n</head>\n<body>\n",
		html.EscapeString(title), pageStyle)
	b.WriteString("<noscript><p>This page draws its charts with its own inline script; allow scripts to see them (it uses no network).</p></noscript>\n")
	b.WriteString("<div id=\"page\"></div>\n<script id=\"run-data\" type=\"application/json\">")
	appendPageData(&b, title, runs, live)
	b.WriteString("</script>\n<script>\n")
	b.WriteString(pageScript)
	b.WriteString("</script>\n</body>\n</html>\n")
	return b.Bytes()
}

// appendPageData appends the page's data as one JSON object:
//
//	{"title": ..., "live": bool, "poll_ms": N, "runs": [{"name", "config",
//	 "base", "metrics", "metrics_offset", "warm", "warm_offset",
//	 "samples": [{"step", "table"}]}]}
//
// where metrics and warm are pageLog.appendJSON objects, config is config.yaml's
// tree and base is the live server's path of the run.
func appendPageData(b *bytes.Buffer, title string, runs []*pageRun, live bool) {
	b.WriteString(`{"title":`)
	appendJSON(b, title)
	fmt.Fprintf(b, `,"live":%t,"poll_ms":%d,"runs":[`, live, livePollMillis)
	for i, r := range runs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":`)
		appendJSON(b, r.name)
		b.WriteString(`,"config":`)
		appendJSON(b, r.config)
		b.WriteString(`,"base":`)
		appendJSON(b, "run/"+strconv.Itoa(i)+"/")
		b.WriteString(`,"metrics":`)
		r.metrics.appendJSON(b)
		fmt.Fprintf(b, `,"metrics_offset":%d,"warm":`, r.metrics.off)
		r.warm.appendJSON(b)
		fmt.Fprintf(b, `,"warm_offset":%d,"samples":`, r.warm.off)
		appendSamples(b, r.samples)
		b.WriteByte('}')
	}
	b.WriteString("]}")
}

// appendSamples appends sample tables as [{"step": N, "table": {...}}, ...],
// the tables' text with <, > and & escaped.
func appendSamples(b *bytes.Buffer, samples []pageSamples) {
	b.WriteByte('[')
	for i, s := range samples {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, `{"step":%d,"table":`, s.step)
		appendJSON(b, s.table)
		b.WriteByte('}')
	}
	b.WriteByte(']')
}
