package trace

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// span is a test span starting at ms and lasting dur ms.
func span(id, parent, name string, ms, dur int) Span {
	t0 := time.Unix(1000, 0)
	return Span{ID: id, Parent: parent, Name: name, Start: t0.Add(time.Duration(ms) * time.Millisecond),
		Duration: time.Duration(dur) * time.Millisecond, Attrs: map[string]string{}}
}

// TestCriticalPath: a step of 100 ms whose generate stage waits on the
// slower of two parallel requests; the path runs through it, and the
// segments add up to the step.
func TestCriticalPath(t *testing.T) {
	tr := StepTrace{Root: span("root", "", "step", 0, 100)}
	tr.Spans = []Span{tr.Root,
		span("gen", "root", "generate", 5, 60),
		span("reqA", "gen", "generator.request", 6, 20),
		span("reqB", "gen", "generator.request", 6, 55), // the slow one
		span("partB", "reqB", "generate.part", 50, 10),
		span("learn", "root", "learn", 70, 25),
	}
	path := CriticalPath(tr)
	var total time.Duration
	var names []string
	for _, s := range path {
		total += s.Duration
		names = append(names, fmt.Sprintf("%s:%s", s.Span.ID, s.Duration))
	}
	got := strings.Join(names, " ")
	want := "root:5ms gen:1ms reqB:44ms partB:10ms reqB:1ms gen:4ms root:5ms learn:25ms root:5ms"
	if got != want {
		t.Errorf("critical path\n%s\nwant\n%s", got, want)
	}
	if total != 100*time.Millisecond {
		t.Errorf("segments add up to %v, want the step's 100ms", total)
	}
	if l := Largest(path); l.Span.ID != "reqB" || l.Duration != 45*time.Millisecond {
		t.Errorf("largest share %s %v, want reqB 45ms", l.Span.ID, l.Duration)
	}
}

func TestParseJaeger(t *testing.T) {
	body := `{"data":[{"traceID":"abc","spans":[
	 {"spanID":"2","operationName":"generate","references":[{"refType":"CHILD_OF","spanID":"1"}],"startTime":1000,"duration":500,"tags":[],"processID":"p2"},
	 {"spanID":"1","operationName":"step","references":[],"startTime":900,"duration":900,"tags":[{"key":"mgrpo.step","value":7},{"key":"mgrpo.slow","value":true}],"processID":"p1"},
	 {"spanID":"3","operationName":"generate.part","references":[{"refType":"CHILD_OF","spanID":"2"}],"startTime":1100,"duration":100,
	  "tags":[{"key":"mgrpo.actor","value":"generator-n2-0"},{"key":"otel.status_code","value":"ERROR"}],"processID":"p2"}],
	 "processes":{"p1":{"serviceName":"mgrpo","tags":[{"key":"service.instance.id","value":"learner-n1"}]},
	              "p2":{"serviceName":"mgrpo","tags":[{"key":"service.instance.id","value":"generator-n2"}]}}},
	 {"traceID":"noroot","spans":[{"spanID":"9","operationName":"learner.request","references":[],"startTime":1,"duration":1,"tags":[],"processID":"p1"}],
	  "processes":{"p1":{"serviceName":"mgrpo","tags":[]}}}]}`
	traces, err := ParseJaeger([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 1 {
		t.Fatalf("%d step traces, want 1 (the one without a step root left out)", len(traces))
	}
	tr := traces[0]
	if tr.ID != "abc" || tr.Root.Name != "step" || tr.Step() != 7 || !tr.Slow() || tr.Root.Duration != 900*time.Microsecond || tr.Root.Node != "learner-n1" {
		t.Errorf("root %+v (step %d, slow %v)", tr.Root, tr.Step(), tr.Slow())
	}
	part := tr.Spans[2]
	if part.Actor != "generator-n2-0" || part.Node != "generator-n2" || part.Parent != "2" || !part.Error {
		t.Errorf("part span %+v", part)
	}
}

// TestParseJaegerOrder: Jaeger returns a trace's spans in any order; the
// parsed trace has the root first and the rest by start time (then name
// and ID), so a report reads the same every time.
func TestParseJaegerOrder(t *testing.T) {
	spans := []string{
		`{"spanID":"1","operationName":"step","references":[],"startTime":900,"duration":900,"tags":[],"processID":"p"}`,
		`{"spanID":"4","operationName":"reward","references":[{"refType":"CHILD_OF","spanID":"1"}],"startTime":1000,"duration":50,"tags":[],"processID":"p"}`,
		`{"spanID":"3","operationName":"generate","references":[{"refType":"CHILD_OF","spanID":"1"}],"startTime":1000,"duration":90,"tags":[],"processID":"p"}`,
		`{"spanID":"5","operationName":"generate","references":[{"refType":"CHILD_OF","spanID":"1"}],"startTime":1000,"duration":10,"tags":[],"processID":"p"}`,
		`{"spanID":"2","operationName":"learn","references":[{"refType":"CHILD_OF","spanID":"1"}],"startTime":1500,"duration":300,"tags":[],"processID":"p"}`,
	}
	want := "1 3 5 4 2"
	for _, order := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 4, 0, 3, 1}} {
		var in []string
		for _, i := range order {
			in = append(in, spans[i])
		}
		body := `{"data":[{"traceID":"abc","spans":[` + strings.Join(in, ",") + `],"processes":{"p":{"serviceName":"mgrpo","tags":[]}}}]}`
		traces, err := ParseJaeger([]byte(body))
		if err != nil || len(traces) != 1 {
			t.Fatalf("order %v: %d traces, %v", order, len(traces), err)
		}
		var ids []string
		for _, s := range traces[0].Spans {
			ids = append(ids, s.ID)
		}
		if got := strings.Join(ids, " "); got != want {
			t.Errorf("spans given in order %v come out as %s, want %s", order, got, want)
		}
	}
}
