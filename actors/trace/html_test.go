package trace

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWriteHTML: one chart per trace, one bar per span in tree order
// (the root first, a child after its parent), the critical path outlined,
// a legend entry per node and the link to Jaeger.
func TestWriteHTML(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	span := func(id, parent, name, node string, start, d time.Duration) Span {
		return Span{ID: id, Parent: parent, Name: name, Node: node, Start: t0.Add(start), Duration: d}
	}
	root := span("1", "", "step", "learner", 0, 100*time.Millisecond)
	root.Attrs = map[string]string{"mgrpo.step": "3"}
	tr := StepTrace{ID: "abc", Root: root, Spans: []Span{root,
		span("2", "1", "generate", "learner", 0, 60*time.Millisecond),
		span("3", "2", "generate.part", "worker-1", 5*time.Millisecond, 50*time.Millisecond),
		span("4", "1", "learn", "learner", 60*time.Millisecond, 40*time.Millisecond)}}
	var b bytes.Buffer
	if err := WriteHTML(&b, []StepTrace{tr, tr}, "http://jaeger:16686"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"step 3: 100ms", "http://jaeger:16686/trace/abc", "worker-1"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(page, "<rect "); n != 8 {
		t.Errorf("%d bars for 2 traces of 4 spans", n)
	}
	var tips []string
	for _, m := range regexp.MustCompile(`<title>(\w[\w.]*) on `).FindAllStringSubmatch(page, 4) {
		tips = append(tips, m[1])
	}
	if strings.Join(tips, " ") != "step generate generate.part learn" {
		t.Errorf("bars in order %v, want step, generate, generate.part, learn", tips)
	}
	if n := strings.Count(page, `class="crit"`); n == 0 {
		t.Error("no bar on the critical path")
	}
}
