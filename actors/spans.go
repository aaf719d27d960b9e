package actors

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mgrpo/mgrpo/actors/meter"
	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/messages"
)

// Span names of a step's trace (one trace per step, rooted at spanStep).
// The trainer makes the stage spans; the coordinator one request span per
// try of a part, naming the actor it went to; the actor one span for its
// work, on whichever node it runs.
const (
	spanStep      = "step"
	spanGenerate  = "generate"
	spanReward    = "reward"
	spanReference = "reference"
	spanPrepare   = "prepare"
	spanLearn     = "learn"
	spanControl   = "control"
	spanPublish   = "publish"
	spanEvaluate  = "evaluate"   // the held-out evaluation of an eval step
	spanSave      = "checkpoint" // a checkpoint written after the step
	spanWeights   = "weights"    // a worker node's generator takes a published version into use

	spanRewardReference   = "reward_reference"   // each part scored, then reference-scored, in one pass
	spanGenerateReference = "generate_reference" // each part generated, scored and reference-scored in one pass
)

// Span attribute keys, spelled once.
const (
	attrRun       = attribute.Key("mgrpo.run")
	attrStep      = attribute.Key("mgrpo.step")
	attrVersion   = attribute.Key("mgrpo.policy_version")
	attrActor     = attribute.Key("mgrpo.actor")
	attrNode      = attribute.Key("mgrpo.node")
	attrPart      = attribute.Key("mgrpo.part")
	attrTry       = attribute.Key("mgrpo.try")
	attrRelay     = attribute.Key("mgrpo.relay") // the actor a part was relayed to
	attrPrompts   = attribute.Key("mgrpo.prompts")
	attrSamples   = attribute.Key("mgrpo.completions")
	attrTokens    = attribute.Key("mgrpo.tokens")
	attrTokensPS  = attribute.Key("mgrpo.tokens_per_s")
	attrBytes     = attribute.Key("mgrpo.bytes")
	attrChunks    = attribute.Key("mgrpo.chunks")
	attrSkip      = attribute.Key("mgrpo.skip_reason")
	attrSlow      = attribute.Key("mgrpo.slow")
	attrStaleness = attribute.Key("mgrpo.staleness")
	attrObjective = attribute.Key("mgrpo.objective")
	attrTau       = attribute.Key("mgrpo.tau")
	attrBeta      = attribute.Key("mgrpo.beta")
	attrFunction  = attribute.Key("mgrpo.reward_function")
	attrRound     = attribute.Key("mgrpo.round")
	attrAhead     = attribute.Key("mgrpo.fetched_ahead") // the version was fetched before its offer came
)

// telemetry is where one process's actors report: spans from tracer,
// naming the node they ran on, and OTel metrics on meter (nil: off). The
// wiring (Run, Serve) opens what it comes from and shuts it down.
type telemetry struct {
	tracer oteltrace.Tracer
	node   string
	meter  *meter.Instruments
}

// quiet is the telemetry of a process that reports nothing: a no-op
// tracer and no metrics.
func quiet() telemetry {
	return telemetry{tracer: noop.NewTracerProvider().Tracer(trace.ScopeName), node: "local"}
}

// actorSpan starts the span of a stage actor's work on a message: a child
// of the span that sent it (its StepMeta.trace), on tel's node.
func (tel telemetry) actorSpan(meta *messages.StepMeta, name, actor string, attrs ...attribute.KeyValue) (context.Context, oteltrace.Span) {
	ctx := trace.Extract(context.Background(), meta)
	attrs = append(attrs, attrActor.String(actor), attrNode.String(tel.node), attrStep.Int64(meta.GetStep()))
	return tel.tracer.Start(ctx, name, oteltrace.WithSpanKind(oteltrace.SpanKindConsumer), oteltrace.WithAttributes(attrs...))
}

// endSpan ends span, with an error status (and the skip reason) when err
// is not nil.
func endSpan(span oteltrace.Span, err error) {
	if err != nil {
		var s *SkipError
		if errors.As(err, &s) {
			span.SetAttributes(attrSkip.String(s.Reason.String()))
		}
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// childSpan records a finished piece of work that took d, ending at end,
// as a child of ctx's span (phases timed inside a plain function).
func childSpan(ctx context.Context, tr oteltrace.Tracer, name string, end time.Time, d time.Duration, attrs ...attribute.KeyValue) {
	_, s := tr.Start(ctx, name, oteltrace.WithTimestamp(end.Add(-d)), oteltrace.WithAttributes(attrs...))
	s.End(oteltrace.WithTimestamp(end))
}

// withSpan gives each part a header carrying ctx's span (a shallow copy:
// a part may be a message already received).
func withSpan[M interface {
	messages.Header
}](ctx context.Context, parts []M) []M {
	if !oteltrace.SpanContextFromContext(ctx).IsValid() {
		return parts
	}
	out := make([]M, len(parts))
	for i, p := range parts {
		out[i] = messages.WithMeta(p, trace.WithSpan(ctx, p.GetMeta()))
	}
	return out
}
