package runlog

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/rewards"
	"golang.org/x/net/html"
)

// svgChart is what the test reads back from one chart.
type svgChart struct {
	label  string // aria-label: the metric key
	points []int  // points per polyline
}

// parseCharts parses page as HTML and returns its charts in order.
func parseCharts(t *testing.T, page []byte) []svgChart {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("report does not parse: %v", err)
	}
	var charts []svgChart
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "link", "img", "iframe":
				t.Errorf("report has a <%s> element (must be self-contained)", n.Data)
			case "svg":
				charts = append(charts, svgChart{label: attr(n, "aria-label")})
			case "polyline":
				c := &charts[len(charts)-1]
				c.points = append(c.points, len(strings.Fields(attr(n, "points"))))
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return charts
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func TestRenderReport(t *testing.T) {
	const steps = 25
	var recs []Record
	for s := 1; s <= steps; s++ {
		recs = append(recs, Record{Step: s, Values: map[string]float64{
			"train/weight_entropy":   1 / float64(s),
			rewards.KeyReward:        float64(s) / steps,
			rewards.KeyAccuracy:      0.3,
			rewards.KeyTau:           0.5,
			rewards.KeyBeta:          0,
			rewards.KeyKL:            float64(s) * 1e-3,
			rewards.KeyPolicyEntropy: 2,
			"time/learner_s":         0.1,
			"train/zz<&>":            1,
		}})
	}
	charts := parseCharts(t, renderReport("run <1>", recs))
	wantOrder := []string{rewards.KeyReward, rewards.KeyAccuracy, rewards.KeyPolicyEntropy, rewards.KeyKL, rewards.KeyTau, rewards.KeyBeta, rewards.KeyWeightEntropy, "time/learner_s", "train/zz<&>"}
	if len(charts) != len(wantOrder) {
		t.Fatalf("%d charts, want one per metric (%d)", len(charts), len(wantOrder))
	}
	for i, c := range charts {
		if c.label != wantOrder[i] {
			t.Errorf("chart %d is %q, want %q", i, c.label, wantOrder[i])
		}
		if len(c.points) != 1 || c.points[0] != steps {
			t.Errorf("chart %s: polylines %v, want one with %d points", c.label, c.points, steps)
		}
	}
}

func TestRenderReportNullsBreakLines(t *testing.T) {
	vals := []float64{1, 2, math.NaN(), 4, 5, 6, math.Inf(1)}
	var recs []Record
	for i, v := range vals {
		recs = append(recs, Record{Step: i, Values: map[string]float64{rewards.KeyKL: v}})
	}
	charts := parseCharts(t, renderReport("r", recs))
	if len(charts) != 1 || len(charts[0].points) != 2 || charts[0].points[0] != 2 || charts[0].points[1] != 3 {
		t.Errorf("charts = %+v, want one chart with polylines of 2 and 3 points", charts)
	}
}

func TestRenderReportThinsLongSeries(t *testing.T) {
	const n = 5000
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Step: i, Values: map[string]float64{rewards.KeyReward: float64(i % 7)}}
	}
	charts := parseCharts(t, renderReport("r", recs))
	// Thinned while read to at most maxChartPoints (500): every 16th of the
	// 5000 values (313 points) plus the last.
	if len(charts) != 1 || len(charts[0].points) != 1 || charts[0].points[0] != 314 {
		t.Errorf("charts = %+v, want one polyline of 314 points", charts)
	}
}

// TestSeriesMemoryBounded: however many values a series is given, it
// keeps at most maxChartPoints finite ones, its exact range, its last
// point and the last point before each break.
func TestSeriesMemoryBounded(t *testing.T) {
	s := &series{key: "k", stride: 1, lo: math.Inf(1), hi: math.Inf(-1)}
	for i := range 100000 {
		v := float64(i % 1000)
		if i == 50001 {
			v = math.NaN()
		}
		s.add(i, v)
	}
	steps, vals := s.points()
	if len(s.vals) > maxChartPoints+2 || len(vals) < maxChartPoints/2 {
		t.Errorf("%d points kept (%d drawn), want between %d and %d", len(s.vals), len(vals), maxChartPoints/2, maxChartPoints+2)
	}
	if s.lo != 0 || s.hi != 999 || steps[len(steps)-1] != 99999 || vals[len(vals)-1] != 999 {
		t.Errorf("range [%v, %v], last point (%d, %v); want [0, 999] and (99999, 999)", s.lo, s.hi, steps[len(steps)-1], vals[len(vals)-1])
	}
	for i, v := range vals {
		if math.IsNaN(v) && (steps[i] != 50001 || steps[i-1] != 50000) {
			t.Errorf("break at step %d after step %d, want 50001 after 50000", steps[i], steps[i-1])
		}
	}
}

func TestRenderReportEmpty(t *testing.T) {
	if charts := parseCharts(t, renderReport("r", nil)); len(charts) != 0 {
		t.Errorf("%d charts for no metrics", len(charts))
	}
}

func TestWriteReportFromRun(t *testing.T) {
	d, err := Create(t.TempDir(), "rep")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for s := 1; s <= 4; s++ {
		if err := d.WriteMetrics(s, map[string]float64{rewards.KeyReward: float64(s), rewards.KeyTau: math.NaN()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WriteReport(); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(d.Path(), ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	charts := parseCharts(t, page)
	// tau is all null: its chart is drawn with no line.
	if len(charts) != 2 || len(charts[0].points) != 1 || charts[0].points[0] != 4 || len(charts[1].points) != 0 {
		t.Errorf("charts = %+v, want reward with 4 points and an empty tau chart", charts)
	}
}

func TestWriteReportWhileWriting(t *testing.T) {
	d, err := Create(t.TempDir(), "race")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	done := make(chan error)
	go func() {
		for s := 1; s <= 50; s++ {
			if err := d.WriteMetrics(s, map[string]float64{rewards.KeyReward: float64(s)}); err != nil {
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
	if charts := parseCharts(t, page); len(charts) != 1 || charts[0].points[0] != 50 {
		t.Errorf("final report charts %+v, want one with 50 points", charts)
	}
}
