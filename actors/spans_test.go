package actors

import (
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/config"
)

// memoryTracer is a tracer that keeps every ended span in memory,
// sampling steps at ratio.
func memoryTracer(ratio float64) (oteltrace.Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
	return tp.Tracer(trace.ScopeName), exp
}

// TestStepTraces: each step through the actors is one trace, rooted at
// step, holding a span of every stage and the publication of the weights
// it made, every span's parent in it; with a
// sample ratio of 0 no step leaves a span.
func TestStepTraces(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Train.PromptsPerPart = 2 })
	s := testSettings(t, cfg)
	env := testEnv()
	var exp *tracetest.InMemoryExporter
	env.tel.tracer, exp = memoryTracer(1)
	opt := s.pipeline
	opt.Generators = 2
	p := StartPipeline(s, env, testModels(t, s), testControl(s), opt, nil)
	defer p.Stop()
	for n := range int64(2) {
		plainStep(t, p.Trainer, n)
	}
	checkStepTraces(t, exp.GetSpans(), 2)

	env.tel.tracer, exp = memoryTracer(0)
	q := StartPipeline(s, env, testModels(t, s), testControl(s), opt, nil)
	defer q.Stop()
	plainStep(t, q.Trainer, 0)
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("a step not sampled left %d spans", n)
	}
}

// checkStepTraces requires spans to hold one trace per step, rooted at
// step, with a span of every stage and every span's parent in it.
func checkStepTraces(t *testing.T, spans tracetest.SpanStubs, steps int) {
	t.Helper()
	byTrace := map[oteltrace.TraceID][]tracetest.SpanStub{}
	for _, s := range spans {
		byTrace[s.SpanContext.TraceID()] = append(byTrace[s.SpanContext.TraceID()], s)
	}
	if len(byTrace) != steps {
		t.Fatalf("%d traces for %d steps", len(byTrace), steps)
	}
	for id, spans := range byTrace {
		checkStepTrace(t, id, spans)
	}
}

// checkStepTrace checks one step's trace.
func checkStepTrace(t *testing.T, id oteltrace.TraceID, spans []tracetest.SpanStub) {
	t.Helper()
	ids, roots := map[oteltrace.SpanID]bool{}, 0
	var names []string
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
		names = append(names, s.Name)
	}
	for _, s := range spans {
		switch {
		case !s.Parent.IsValid():
			roots++
			if s.Name != spanStep {
				t.Errorf("trace %s: root %s, want %s", id, s.Name, spanStep)
			}
		case !ids[s.Parent.SpanID()]:
			t.Errorf("trace %s: span %s's parent is not in the trace", id, s.Name)
		}
	}
	if roots != 1 {
		t.Errorf("trace %s has %d roots", id, roots)
	}
	want := []string{spanStep, spanGenerateReference, "generator.request", "generate.part",
		"reward.part", "reward.function", "reference.part", spanPrepare,
		"learner.request", spanLearn, "learn.forward", "learn.backward", "learn.optimizer", "controller.request", spanControl}
	want = append(want, spanPublish) // the weights the step made, handed on as it ends (in order, a step may follow)
	for _, want := range want {
		if !slices.Contains(names, want) {
			t.Errorf("trace %s lacks a %s span: %v", id, want, names)
		}
	}
}
