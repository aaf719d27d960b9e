package runlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// pageLogJSON is pageLog.appendJSON's JSON read back.
type pageLogJSON struct {
	Steps []int                      `json:"steps"`
	Cols  map[string]json.RawMessage `json:"cols"`
	Trace map[string]string          `json:"trace"`
	Sums  map[string][2]float64      `json:"sums"`
}

// pageData is the page's #run-data read back.
type pageData struct {
	Title  string `json:"title"`
	Live   bool   `json:"live"`
	PollMS int    `json:"poll_ms"`
	Runs   []struct {
		Name          string         `json:"name"`
		Config        map[string]any `json:"config"`
		Base          string         `json:"base"`
		Metrics       pageLogJSON    `json:"metrics"`
		MetricsOffset int64          `json:"metrics_offset"`
		Warm          pageLogJSON    `json:"warm"`
		WarmOffset    int64          `json:"warm_offset"`
		Samples       []struct {
			Step  int `json:"step"`
			Table struct {
				Columns []string `json:"columns"`
				Data    [][]any  `json:"data"`
			} `json:"table"`
		} `json:"samples"`
	} `json:"runs"`
}

// decodeColumn returns a column's values over n steps, NaN for null,
// expanding a constant.
func decodeColumn(t *testing.T, raw json.RawMessage, n int) []float64 {
	t.Helper()
	var c float64
	if json.Unmarshal(raw, &c) == nil {
		out := make([]float64, n)
		for i := range out {
			out[i] = c
		}
		return out
	}
	var vals []*float64
	if err := json.Unmarshal(raw, &vals); err != nil {
		t.Fatalf("column %s: %v", raw, err)
	}
	out := make([]float64, len(vals))
	for i, v := range vals {
		out[i] = math.NaN()
		if v != nil {
			out[i] = *v
		}
	}
	return out
}

// parsePage checks that page is self-contained HTML (inline script and
// style only, no element loading anything) and returns its data.
func parsePage(t *testing.T, page []byte) pageData {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("page does not parse: %v", err)
	}
	var data string
	scripts := 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "src" || (a.Key == "href" && n.Data != "a") {
					t.Errorf("<%s %s=%q> loads from outside the page", n.Data, a.Key, a.Val)
				}
			}
			switch n.Data {
			case "link", "img", "iframe", "object", "embed":
				t.Errorf("page has a <%s> element (must be self-contained)", n.Data)
			case "script":
				scripts++
				if attr(n, "id") == "run-data" && n.FirstChild != nil {
					data = n.FirstChild.Data
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if scripts != 2 {
		t.Errorf("%d <script> elements, want 2 (the data and the inline script)", scripts)
	}
	var d pageData
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatalf("run-data is not JSON: %v", err)
	}
	return d
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// logJSON is recs as a page log's JSON, read back.
func logJSON(t *testing.T, recs []Record) pageLogJSON {
	t.Helper()
	l := newPageLog()
	for _, r := range recs {
		l.add(r, 10)
	}
	var b bytes.Buffer
	l.appendJSON(&b)
	var got pageLogJSON
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%s: %v", b.String(), err)
	}
	return got
}

// TestPageLogJSON: every value comes back where it was, null where a line
// lacks it, constants as one number, the headline keys exactly and the
// others to 6 significant digits, trace ids by step, each key's sum and
// count.
func TestPageLogJSON(t *testing.T) {
	recs := []Record{
		{Step: 0, Values: map[string]float64{KeyEvalGreedyAccuracy: 0.7578125}},
		{Step: 1, Values: map[string]float64{"train/reward": 0.48593750000000047, "train/tau": 0.5, KeyStepTime: 0.087530323, "x": math.NaN()}, TraceID: "4bf9"},
		{Step: 2, Values: map[string]float64{"train/reward": 0.6123456789, "train/tau": 0.5, KeyStepTime: 0.1}},
	}
	got := logJSON(t, recs)
	if fmt.Sprint(got.Steps) != "[0 1 2]" || len(got.Trace) != 1 || got.Trace["1"] != "4bf9" {
		t.Errorf("steps %v, trace %v; want [0 1 2] and step 1's id", got.Steps, got.Trace)
	}
	for _, tc := range []struct {
		key  string
		want []float64
	}{
		{KeyEvalGreedyAccuracy, []float64{0.7578125, math.NaN(), math.NaN()}},
		{"train/reward", []float64{math.NaN(), 0.485938, 0.612346}},
		{KeyStepTime, []float64{math.NaN(), 0.087530323, 0.1}},
		{"x", []float64{math.NaN(), math.NaN(), math.NaN()}},
	} {
		c := decodeColumn(t, got.Cols[tc.key], len(recs))
		if fmt.Sprint(c) != fmt.Sprint(tc.want) {
			t.Errorf("%s = %v, want %v", tc.key, c, tc.want)
		}
	}
	if string(got.Cols["train/tau"]) != "[null,0.5,0.5]" {
		t.Errorf("tau = %s: a key missing on a line is not constant", got.Cols["train/tau"])
	}
	if got.Sums[KeyStepTime] != [2]float64{0.087530323 + 0.1, 2} || got.Sums["x"] != [2]float64{0, 0} {
		t.Errorf("sums %v", got.Sums)
	}
	if got := logJSON(t, recs[1:]); string(got.Cols["train/tau"]) != "0.5" {
		t.Errorf("tau on every line = %s, want the constant 0.5", got.Cols["train/tau"])
	}
}

// TestPageLogBounded: however many lines a page log is given, it keeps at
// most maxPageRows ordinary ones, spread over the run, with every
// evaluation and alert, the last line, and exact sums.
func TestPageLogBounded(t *testing.T) {
	l := newPageLog()
	const n = 100003
	var sum float64
	for s := 1; s <= n; s++ {
		m := map[string]float64{KeyStepTime: float64(s % 13), "guard/no_reward": 0}
		sum += m[KeyStepTime]
		if s%1000 == 0 {
			m[KeyEvalGreedyAccuracy] = 0.5
		}
		if s == 77777 {
			m["guard/no_reward"] = 1
		}
		l.add(Record{Step: s, Values: m}, 1)
	}
	evals, alert := 0, false
	for i, s := range l.steps {
		evals += map[bool]int{true: 1}[string(l.cols[KeyEvalGreedyAccuracy].value(i)) != "null"]
		alert = alert || s == 77777
		if i > 0 && s <= l.steps[i-1] {
			t.Fatalf("steps out of order at %d: %d after %d", i, s, l.steps[i-1])
		}
		if got, want := string(l.cols[KeyStepTime].value(i)), strconv.Itoa(s%13); got != want {
			t.Fatalf("line %d (step %d): %s %s, want %s", i, s, KeyStepTime, got, want)
		}
	}
	if len(l.steps) > maxPageRows+n/1000+2 || len(l.steps) < maxPageRows/2 || evals != n/1000 || !alert {
		t.Errorf("%d lines kept, %d evaluations, alert %v; want at most %d ordinary lines, all %d evaluations and the alert",
			len(l.steps), evals, alert, maxPageRows, n/1000)
	}
	if last := l.steps[len(l.steps)-1]; last != n || l.off != n || l.sums[KeyStepTime] != [2]float64{sum, n} {
		t.Errorf("last step %d, offset %d, sum %v; want %d, %d, [%v %d]", last, l.off, l.sums[KeyStepTime], n, n, sum, n)
	}
	for k, c := range l.cols {
		if len(c.ends) != len(l.steps) {
			t.Errorf("column %s has %d values for %d lines", k, len(c.ends), len(l.steps))
		}
	}
}

func TestThinSteps(t *testing.T) {
	steps := make([]int, 1000)
	for i := range steps {
		steps[i] = 10 * (i + 1)
	}
	for _, tc := range []struct {
		n, limit int
	}{{5, 10}, {1000, 120}, {121, 120}, {1000, 2}} {
		got := thinSteps(steps[:tc.n], tc.limit)
		if len(got) != min(tc.n, tc.limit) || got[0] != steps[0] || got[len(got)-1] != steps[tc.n-1] {
			t.Errorf("thin %d to %d: %d steps from %d to %d", tc.n, tc.limit, len(got), got[0], got[len(got)-1])
		}
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Errorf("thin %d to %d: not increasing at %d: %v", tc.n, tc.limit, i, got[i-1:i+1])
			}
		}
	}
}

// writeRun makes a run directory like a real run's: config.yaml, line 0,
// steps 1..steps with the keys of every kind, a warm-start log and a
// sample table every 2 steps.
func writeRun(t testing.TB, root, name string, steps int) *Dir {
	t.Helper()
	d, err := Create(root, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.WriteConfig([]byte("task:\n  name: addition # task\n  digits: 2\nmaxent:\n  objective: grpo\ntrain:\n  steps: 10\n")); err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 4; s++ {
		m := map[string]float64{KeyWarmStartLoss: 2 / float64(s), KeyWarmStartElapsed: 0.1 * float64(s)}
		if s%2 == 0 {
			m[KeyEvalGreedyAccuracy] = 0.1 * float64(s)
		}
		if err := d.WriteWarmStart(s, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WriteMetrics(0, map[string]float64{KeyEvalGreedyAccuracy: 0.4}); err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= steps; s++ {
		writeStep(t, d, s)
	}
	return d
}

// stepValues are step s's metrics in writeRun's runs.
func stepValues(s int) map[string]float64 {
	m := map[string]float64{"train/reward": float64(s%7) / 7, "train/tau": 0.5, KeyStepTime: 0.05 + 0.001*float64(s%5),
		"time/learn_s": 0.03, KeyTokensPerSec: 5e4 + float64(s)}
	if s%2 == 0 {
		m[KeyEvalGreedyAccuracy] = 0.5
	}
	return m
}

// writeStep writes step s's metrics line (and its sample table on even
// steps).
func writeStep(t testing.TB, d *Dir, s int) {
	t.Helper()
	if err := d.WriteTracedMetrics(s, stepValues(s), fmt.Sprintf("%032x", s)); err != nil {
		t.Fatal(err)
	}
	if s%2 == 0 {
		cols := StandardSampleColumns([]string{"accuracy"})
		row := []any{s, 0, 0, 2, 1, "1+1=", "2 </script>", 1.0, 0.5, math.NaN(), 0.5, 0.5, 1.0, "generator-0"}
		if err := d.WriteSamples(s, cols, [][]any{row}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWriteReportFromRun(t *testing.T) {
	d := writeRun(t, t.TempDir(), "rep", 6)
	if err := d.WriteReport(); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(d.Path(), ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	data := parsePage(t, page)
	if data.Live || len(data.Runs) != 1 {
		t.Fatalf("live %v, %d runs; want a static page of one run", data.Live, len(data.Runs))
	}
	r := data.Runs[0]
	if r.Name != "rep" || r.Config["task"].(map[string]any)["name"] != "addition" {
		t.Errorf("run %q, config %v", r.Name, r.Config)
	}
	if fmt.Sprint(r.Metrics.Steps) != "[0 1 2 3 4 5 6]" || len(r.Metrics.Trace) != 6 || fmt.Sprint(r.Warm.Steps) != "[1 2 3 4]" {
		t.Errorf("metrics steps %v (%d traced), warm steps %v", r.Metrics.Steps, len(r.Metrics.Trace), r.Warm.Steps)
	}
	for _, f := range []struct {
		name string
		off  int64
	}{{MetricsFile, r.MetricsOffset}, {WarmStartFile, r.WarmOffset}} {
		if st, err := os.Stat(filepath.Join(d.Path(), f.name)); err != nil || st.Size() != f.off {
			t.Errorf("%s offset %d, want its size (%v)", f.name, f.off, err)
		}
	}
	if len(r.Samples) != 3 || r.Samples[2].Step != 6 || r.Samples[2].Table.Data[0][6] != "2 </script>" {
		t.Errorf("samples %+v, want steps 2, 4, 6 with their text", r.Samples)
	}
	if bytes.Contains(page, []byte("2 </script>")) {
		t.Error("a completion's </script> is in the page unescaped")
	}
}

func TestPageOfSeveralRuns(t *testing.T) {
	root := t.TempDir()
	writeRun(t, root, "a", 3)
	writeRun(t, root, "b", 5)
	out := filepath.Join(t.TempDir(), "compare.html")
	if err := WritePage(out, filepath.Join(root, "a"), filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	data := parsePage(t, page)
	if data.Title != "a vs b" || len(data.Runs) != 2 || len(data.Runs[1].Metrics.Steps) != 6 || data.Runs[1].Base != "run/1/" {
		t.Errorf("title %q, %d runs", data.Title, len(data.Runs))
	}
}

// TestWritePageErrors: a line that cannot be read is left out, as a
// resume sets it aside; a directory without metrics.jsonl is an error.
func TestWritePageErrors(t *testing.T) {
	root := t.TempDir()
	d := writeRun(t, root, "bad", 1)
	if err := os.WriteFile(d.MetricsPath(), []byte("{\"step\":1}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "page.html")
	if err := WritePage(out, d.Path()); err != nil {
		t.Errorf("a run with an unreadable metrics line: %v, want its page without the line", err)
	}
	if err := WritePage(out, filepath.Join(root, "missing")); err == nil {
		t.Error("no error for a directory that does not exist")
	}
}

func TestRenderPageEmptyRun(t *testing.T) {
	d, err := Create(t.TempDir(), "empty")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteReport(); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(d.Path(), ReportFile))
	if data := parsePage(t, page); len(data.Runs[0].Metrics.Steps) != 0 || data.Runs[0].Config != nil {
		t.Errorf("empty run's data %+v", data.Runs[0])
	}
}

// TestPageAssetsStayInline: the page's script and style cannot end the
// elements they are inlined into.
func TestPageAssetsStayInline(t *testing.T) {
	for name, text := range map[string]string{"report.js": pageScript, "report.css": pageStyle} {
		if strings.Contains(strings.ToLower(text), "</script") || strings.Contains(strings.ToLower(text), "</style") {
			t.Errorf("%s contains a closing tag", name)
		}
		if strings.Contains(text, "http://") && name == "report.css" {
			t.Errorf("%s refers to the network", name)
		}
	}
}

func TestWriteReportWhileWriting(t *testing.T) {
	d := writeRun(t, t.TempDir(), "race", 0)
	done := make(chan error)
	go func() {
		for s := 1; s <= 50; s++ {
			if err := d.WriteMetrics(s, stepValues(s)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 5 {
		if err := d.WriteReport(); err != nil {
			t.Error(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := d.WriteReport(); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(d.Path(), ReportFile))
	if data := parsePage(t, page); len(data.Runs[0].Metrics.Steps) != 51 {
		t.Errorf("final page has %d metrics lines, want 51", len(data.Runs[0].Metrics.Steps))
	}
}

// BenchmarkWriteReport renders the page of a run of 200 and of 3000 steps
// with a real run's keys (what a checkpoint costs).
func BenchmarkWriteReport(b *testing.B) {
	for _, steps := range []int{200, 3000} {
		b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) {
			d := syntheticRun(b, b.TempDir(), steps)
			b.ResetTimer()
			for range b.N {
				if err := d.WriteReport(); err != nil {
					b.Fatal(err)
				}
			}
			st, _ := os.Stat(filepath.Join(d.Path(), ReportFile))
			b.ReportMetric(float64(st.Size())/1e6, "MB")
		})
	}
}

// syntheticRun writes a run of steps steps whose lines carry the 135 keys
// of the default recipe's lines, varying from step to step, and a sample
// table every 10 steps.
func syntheticRun(t testing.TB, root string, steps int) *Dir {
	t.Helper()
	d := writeRun(t, root, fmt.Sprintf("synthetic-%d", steps), 0)
	keys := make([]string, 0, 135)
	for i := range 100 {
		keys = append(keys, fmt.Sprintf("train/k%03d", i))
	}
	for i := range 35 {
		keys = append(keys, fmt.Sprintf("train/const%02d", i))
	}
	for s := 1; s <= steps; s++ {
		m := make(map[string]float64, len(keys))
		for i, k := range keys {
			m[k] = float64(i)
			if i < 100 {
				m[k] = math.Sin(float64(s*(i+1))) * float64(i+1) / 7
			}
		}
		m[KeyStepTime], m[KeyTokensPerSec] = 0.08+0.01*math.Sin(float64(s)), 6e4+float64(s%97)
		if s%25 == 0 {
			m[KeyEvalGreedyAccuracy] = 0.75 + float64(s)/float64(steps)/10
		}
		if err := d.WriteMetrics(s, m); err != nil {
			t.Fatal(err)
		}
		if s%10 == 0 {
			rows := make([][]any, 16)
			for i := range rows {
				rows[i] = []any{s, i / 8, i % 8, 8, 1, "37+45=", "82", 1.0, 0.54, math.NaN(), 0.54, 0.54, 1.0, "generator-0"}
			}
			if err := d.WriteSamples(s, StandardSampleColumns([]string{"accuracy"}), rows); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}
