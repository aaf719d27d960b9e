package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// chromiumBin is Debian's chromium (make deps installs it); tests that
// render a page skip, saying so, where it is absent.
func chromiumBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (make deps installs it): the run page is not rendered")
	}
	return bin
}

// renderDOM loads url in headless Chromium and returns the document as
// the page's script left it. A file:// page gets no name resolution, so
// it cannot reach the network.
func renderDOM(t *testing.T, url string) *html.Node {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=5000", "--dump-dom", url}
	if strings.HasPrefix(url, "file://") {
		args = append(args, "--host-resolver-rules=MAP * ~NOTFOUND")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, chromiumBin(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	doc, err := html.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("chromium's DOM does not parse: %v", err)
	}
	return doc
}

// find returns the elements under n (n included) that match: a tag
// ("" any) and attribute conditions key=value ("class" matches one of
// the classes).
func find(n *html.Node, tag string, attrs ...string) []*html.Node {
	var out []*html.Node
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (tag == "" || n.Data == tag) && matches(n, attrs) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func matches(n *html.Node, attrs []string) bool {
	for _, kv := range attrs {
		k, v, _ := strings.Cut(kv, "=")
		got := attrOf(n, k)
		if k == "class" && !strings.Contains(" "+got+" ", " "+v+" ") || k != "class" && got != v {
			return false
		}
	}
	return true
}

func attrOf(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	for _, d := range find(n, "") {
		for c := d.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
	}
	return b.String()
}

// one returns the single element under n that matches, failing otherwise.
func one(t *testing.T, n *html.Node, tag string, attrs ...string) *html.Node {
	t.Helper()
	got := find(n, tag, attrs...)
	if len(got) != 1 {
		t.Fatalf("%d <%s %v> elements, want 1", len(got), tag, attrs)
	}
	return got[0]
}

// dataValue is an element's data-value (or another data-* attribute) as a
// number.
func dataValue(t *testing.T, n *html.Node, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(attrOf(n, key), 64)
	if err != nil {
		t.Fatalf("%s=%q of <%s id=%s>: %v", key, attrOf(n, key), n.Data, attrOf(n, "id"), err)
	}
	return v
}

// pageRunConfig is a short real run: a 4-step warm start (evaluated at steps
// 1-3), then steps RL steps evaluated every 2, sample tables every 2 with
// the 5 tokens of largest KL (metrics.top_k_kl); the guards warn.
func pageRunConfig(t *testing.T, root, name, objective string, steps int) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Model.Preset = "tiny"
	cfg.MaxEnt.Objective = objective
	cfg.Train.WarmStartSteps, cfg.Train.WarmStartBatch = 4, 8
	cfg.Train.Steps, cfg.Train.PromptsPerStep, cfg.Generation.NumGenerations = steps, 2, 4
	cfg.Train.EvalEvery, cfg.Train.EvalPrompts, cfg.Train.CheckpointEvery = 2, 4, 0
	cfg.Output.Dir, cfg.Output.Name, cfg.Output.SampleEvery, cfg.Output.SampleRows = root, name, 2, 8
	cfg.Train.Guard = "warn" // a tiny policy that never trained is rightly stopped at step 50
	cfg.Metrics.TopKKL = 5
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// train runs cfg to its end.
func train(t *testing.T, cfg *config.Config) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := runRole(context.Background(), cfg, &stdout, &stderr); code != exitOK {
		t.Fatalf("run %s: exit %d\n%s%s", cfg.Output.Name, code, stdout.String(), stderr.String())
	}
	return filepath.Join(cfg.Output.Dir, cfg.Output.Name)
}

// headline is what the run page's headline must show, computed here from
// metrics.jsonl and warm_start.jsonl.
type headline struct {
	steps, greedy, warm, tps, rl, warmTime float64
	evalPoints                             int // warm-start evaluations before RL, then RL's from line 0
}

func expectedHeadline(t *testing.T, dir string) headline {
	t.Helper()
	recs, err := runlog.ReadMetrics(filepath.Join(dir, runlog.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	warm, err := runlog.ReadMetrics(filepath.Join(dir, runlog.WarmStartFile))
	if err != nil {
		t.Fatal(err)
	}
	var h headline
	var tsum float64
	tn := 0
	for _, r := range recs {
		h.steps = float64(r.Step)
		if v, ok := r.Values[runlog.KeyEvalGreedyAccuracy]; ok {
			h.evalPoints++
			if r.Step == 0 {
				h.warm = v
			} else {
				h.greedy = v
			}
		}
		if v, ok := r.Values[runlog.KeyStepTime]; ok {
			h.rl += v
		}
		if v, ok := r.Values[runlog.KeyTokensPerSec]; ok {
			tsum += v
			tn++
		}
	}
	h.tps = tsum / float64(tn)
	last := warm[len(warm)-1]
	h.warmTime = last.Values[runlog.KeyWarmStartElapsed]
	for _, w := range warm {
		if _, ok := w.Values[runlog.KeyEvalGreedyAccuracy]; ok && w.Step < last.Step {
			h.evalPoints++
		}
	}
	return h
}

// checkHeadline compares run i's headline in doc with h.
func checkHeadline(t *testing.T, doc *html.Node, i int, h headline) {
	t.Helper()
	id := func(name string) *html.Node { return one(t, doc, "", fmt.Sprintf("id=h-%s-%d", name, i)) }
	for _, c := range []struct {
		name, key string
		want      float64
	}{
		{"steps", "data-value", h.steps}, {"greedy", "data-value", h.greedy}, {"warm", "data-value", h.warm},
		{"tps", "data-value", h.tps}, {"wall", "data-value", h.warmTime + h.rl},
	} {
		if got := dataValue(t, id(c.name), c.key); got != c.want {
			t.Errorf("run %d headline %s = %v, want %v from the run's logs", i, c.name, got, c.want)
		}
	}
	if got := text(id("greedy")); !strings.HasSuffix(got, "%") || math.Abs(parsePct(t, got)-100*h.greedy) > 0.05 {
		t.Errorf("run %d greedy accuracy reads %q, want %.1f%%", i, got, 100*h.greedy)
	}
}

func parsePct(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil {
		t.Fatalf("%q is not a percentage", s)
	}
	return v
}

// chart returns the headline chart of key.
func chart(t *testing.T, doc *html.Node, key string) *html.Node {
	t.Helper()
	return one(t, one(t, doc, "div", "id=charts"), "svg", "data-key="+key)
}

// TestReportPages renders the pages of two short real runs in headless
// Chromium: one run's page (headline numbers equal to its logs, the eval
// curve across the warm start and RL, the smoothing control, the samples,
// the stage times, no tau panel on GRPO) and the page of both overlaid.
func TestReportPages(t *testing.T) {
	chromiumBin(t)
	root := t.TempDir()
	grpo := train(t, pageRunConfig(t, root, "grpo", config.ObjectiveGRPO, 6))
	h := expectedHeadline(t, grpo)
	page := "file://" + filepath.Join(grpo, runlog.ReportFile)

	t.Run("run", func(t *testing.T) {
		raw := renderDOM(t, page+"#smooth=0")
		smooth := renderDOM(t, page+"#smooth=0.9")
		checkHeadline(t, raw, 0, h)
		ev := chart(t, raw, runlog.KeyEvalGreedyAccuracy)
		if n := len(find(ev, "circle", "class=evalpt")); n != h.evalPoints || len(find(ev, "path", "class=eval")) != 1 || len(find(ev, "rect", "class=warm")) != 1 {
			t.Errorf("eval chart: %d points, want %d (warm start and RL), one line and the warm-start band", n, h.evalPoints)
		}
		d := func(doc *html.Node, class string) string {
			return attrOf(one(t, chart(t, doc, "train/policy_entropy"), "path", "class="+class), "d")
		}
		if d(raw, "smooth") == "" || d(raw, "smooth") != d(raw, "raw") {
			t.Errorf("smoothing 0 draws %q over the raw %q: want the same path", d(raw, "smooth"), d(raw, "raw"))
		}
		if d(smooth, "smooth") == d(raw, "smooth") || d(smooth, "raw") != d(raw, "raw") {
			t.Errorf("smoothing 0.9 left the smoothed path as it was (or moved the raw one)")
		}
		if got := text(one(t, smooth, "output", "id=smoothing-value")); got != "0.90" {
			t.Errorf("smoothing control reads %q, want 0.90", got)
		}
		if n := len(find(one(t, raw, "div", "id=charts"), "svg", "data-key=train/tau")); n != 0 {
			t.Errorf("a GRPO run with a fixed tau has a tau panel")
		}
		rows := find(one(t, raw, "table", "id=samples-table"), "tr")
		marked := len(find(raw, "tr", "class=correct")) + len(find(raw, "tr", "class=wrong"))
		if len(rows) != 9 || marked != 8 {
			t.Errorf("sample table: %d rows (%d marked), want a header and 8 completions, each correct or wrong", len(rows), marked)
		}
		if rows := find(one(t, raw, "table", "id=high-kl-table"), "tr"); len(rows) != 6 {
			t.Errorf("high-KL table: %d rows, want a header and the step's 5 tokens (metrics.top_k_kl)", len(rows))
		}
		if len(find(one(t, raw, "figure", "id=time-chart"), "path", "class=stage")) < 2 {
			t.Errorf("no stacked stage times")
		}
	})

	t.Run("compare", func(t *testing.T) {
		listwise := train(t, pageRunConfig(t, root, "listwise", config.ObjectiveMaxEntListwise, 4))
		out := filepath.Join(root, "compare.html")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"report", "--out", out, grpo, listwise}, &stdout, &stderr); code != exitOK {
			t.Fatalf("report: exit %d: %s", code, stderr.String())
		}
		doc := renderDOM(t, "file://"+out)
		checkHeadline(t, doc, 0, h)
		checkHeadline(t, doc, 1, expectedHeadline(t, listwise))
		paths := find(chart(t, doc, "train/reward"), "path", "class=smooth")
		if len(paths) != 2 || attrOf(paths[0], "data-run") != "grpo" || attrOf(paths[1], "data-run") != "listwise" ||
			attrOf(paths[0], "stroke") == attrOf(paths[1], "stroke") {
			t.Errorf("reward chart: %d smoothed lines, want grpo's and listwise's in two colours", len(paths))
		}
		chart(t, doc, "train/tau") // a listwise run has the tau panel
	})
}

func TestReportUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"report"}, exitUsage, "give one or more run directories"},
		{[]string{"report", t.TempDir()}, exitUsage, "not a run directory"},
		{[]string{"report", "--bogus", "x"}, exitUsage, "unknown flag"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.out) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line with %q", tc.args, code, stderr.String(), tc.code, tc.out)
		}
	}
}

// TestHTMLOutRefused: report --out and traces --html take a page name
// ending in .html, not a directory, in a directory that exists: anything
// else is one line, exit 2, and nothing written (report wrote any name;
// traces queried Jaeger first).
func TestHTMLOutRefused(t *testing.T) {
	runDir, work := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(runDir, runlog.MetricsFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, page, want string
	}{
		{"text file", filepath.Join(work, "page.txt"), "ending in .html"},
		{"no extension", filepath.Join(work, "page"), "ending in .html"},
		{"a directory", t.TempDir() + "/x.html", ""},
		{"no such directory", filepath.Join(work, "missing", "page.html"), "does not exist"},
	} {
		if tc.name == "a directory" {
			if err := os.Mkdir(tc.page, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.want = "is a directory"
		}
		for _, args := range [][]string{
			{"report", "--out", tc.page, runDir},
			{"traces", "--slow", "--query_url", "http://127.0.0.1:1", "--html", tc.page},
		} {
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("%s %s: exit %d, stderr %q; want %d and one line with %q", args[0], tc.name, code, stderr.String(), exitUsage, tc.want)
			}
		}
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("refused pages left %d files in %s", len(entries), work)
	}
}

// TestReportLive trains with output.serve and reads the live page twice
// in Chromium while the run goes: the second shows more steps, and a poll
// from the offset the first page carried returns just the lines after it.
func TestReportLive(t *testing.T) {
	chromiumBin(t)
	cfg := pageRunConfig(t, t.TempDir(), "live", config.ObjectiveGRPO, 100000)
	cfg.Train.EvalEvery, cfg.Output.Serve = 0, "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() { done <- runRole(ctx, cfg, &stdout, &stderr) }()
	url := waitOutput(t, &stdout, regexp.MustCompile(`run page (http://\S+)`), done)
	dir := filepath.Join(cfg.Output.Dir, cfg.Output.Name)
	waitStep(t, dir, 1, done)

	first := renderDOM(t, url)
	steps := dataValue(t, one(t, first, "", "id=h-steps-0"), "data-value")
	var data struct {
		Runs []struct {
			Metrics struct {
				Steps []int `json:"steps"`
			} `json:"metrics"`
			Offset int64 `json:"metrics_offset"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(text(one(t, first, "script", "id=run-data"))), &data); err != nil {
		t.Fatal(err)
	}
	carried := data.Runs[0].Metrics.Steps
	if steps < 1 || float64(carried[len(carried)-1]) > steps {
		t.Fatalf("live page shows step %v, carried steps up to %d", steps, carried[len(carried)-1])
	}
	waitStep(t, dir, int(steps)+1, done)

	second := renderDOM(t, url)
	if later := dataValue(t, one(t, second, "", "id=h-steps-0"), "data-value"); later <= steps {
		t.Errorf("second look shows step %v, first %v: the live page did not move", later, steps)
	}
	res, err := http.Get(fmt.Sprintf("%srun/0/metrics?offset=%d", url, data.Runs[0].Offset))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	next := fmt.Sprintf(`{"step":%d,`, carried[len(carried)-1]+1)
	if !strings.HasPrefix(string(body), next) {
		t.Errorf("poll from the page's offset starts %.40q, want the next step's line %s...", body, next)
	}
	cancel()
	if code := <-done; code != exitStopped {
		t.Errorf("interrupted run exit %d, want %d: %s", code, exitStopped, stderr.String())
	}
	if _, err := http.Get(url); err == nil {
		t.Error("the run page is still served after the run ended")
	}
}

// waitOutput waits for re in out and returns its first group.
func waitOutput(t *testing.T, out *lockedBuffer, re *regexp.Regexp, done chan int) string {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("run ended (exit %d) before printing %s:\n%s", code, re, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no %s in:\n%s", re, out.String())
	return ""
}

// waitStep waits until the run in dir has a metrics line of step at least
// step.
func waitStep(t *testing.T, dir string, step int, done chan int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if recs, err := runlog.ReadMetrics(filepath.Join(dir, runlog.MetricsFile)); err == nil && len(recs) > 0 && recs[len(recs)-1].Step >= step {
			return
		}
		select {
		case code := <-done:
			t.Fatalf("run ended (exit %d) before step %d", code, step)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("run did not reach step %d", step)
}
