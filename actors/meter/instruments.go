package meter

import (
	"context"
	"errors"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names (OpenTelemetry's; Prometheus shows them with "_" for
// ".", a unit suffix and "_total" on counters: docs/METRICS.md).
const (
	nameSteps       = "mgrpo.steps"
	nameStep        = "mgrpo.step"
	nameMetric      = "mgrpo.metric"
	nameParts       = "mgrpo.parts"
	nameTokens      = "mgrpo.generated_tokens"
	nameTokensPS    = "mgrpo.tokens_per_second"
	nameQueue       = "mgrpo.queue.depth"
	nameFailures    = "mgrpo.actor.failures"
	nameWeightBytes = "mgrpo.weight_sync"
)

// Attribute keys of the instruments.
const (
	attrOutcome   = attribute.Key("outcome")
	attrKey       = attribute.Key("key")
	attrStage     = attribute.Key("stage")
	attrActor     = attribute.Key("actor")
	attrPool      = attribute.Key("pool")
	attrState     = attribute.Key("state")
	attrDirective = attribute.Key("directive")
	attrDirection = attribute.Key("direction")
)

// Instruments record mgrpo's metrics of one node. A nil *Instruments
// (metrics off) records nothing. Its methods are safe for concurrent use.
type Instruments struct {
	steps       metric.Int64Counter
	step        metric.Int64Gauge
	values      metric.Float64Gauge
	parts       metric.Int64Counter
	tokens      metric.Int64Counter
	tokensPS    metric.Float64Gauge
	queue       metric.Int64Gauge
	failures    metric.Int64Counter
	weightBytes metric.Int64Counter
}

// newInstruments makes the instruments on m.
func newInstruments(m metric.Meter) (*Instruments, error) {
	var in Instruments
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	in.steps, err = m.Int64Counter(nameSteps, metric.WithUnit("{step}"),
		metric.WithDescription("training steps this process finished (outcome trained or skipped)"))
	add(err)
	in.step, err = m.Int64Gauge(nameStep, metric.WithUnit("{step}"), metric.WithDescription("the last finished step"))
	add(err)
	in.values, err = m.Float64Gauge(nameMetric,
		metric.WithDescription("every value of the last step's metrics (the keys of metrics.jsonl, as attribute key)"))
	add(err)
	in.parts, err = m.Int64Counter(nameParts, metric.WithUnit("{part}"),
		metric.WithDescription("parts this node's stage actors answered (stage generate, reward or reference; outcome done or skipped)"))
	add(err)
	in.tokens, err = m.Int64Counter(nameTokens, metric.WithUnit("{token}"),
		metric.WithDescription("completion tokens this node's generators sampled"))
	add(err)
	in.tokensPS, err = m.Float64Gauge(nameTokensPS,
		metric.WithDescription("completion tokens per second of each generator's last part"))
	add(err)
	in.queue, err = m.Int64Gauge(nameQueue, metric.WithUnit("{part}"),
		metric.WithDescription("parts of each pool waiting for an actor (state waiting) or sent and not answered (state in_flight)"))
	add(err)
	in.failures, err = m.Int64Counter(nameFailures, metric.WithUnit("{failure}"),
		metric.WithDescription("actor failures by their supervisor's directive (restart, or stop after too many)"))
	add(err)
	in.weightBytes, err = m.Int64Counter(nameWeightBytes, metric.WithUnit("By"),
		metric.WithDescription("policy weight bytes sent to or received from other nodes (direction sent or received)"))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &in, nil
}

// Step records a finished step: its number, whether it was skipped and
// its metrics (keys as in metrics.jsonl).
func (in *Instruments) Step(step int, skipped bool, values map[string]float64) {
	if in == nil {
		return
	}
	ctx := context.Background()
	outcome := "trained"
	if skipped {
		outcome = "skipped"
	}
	in.steps.Add(ctx, 1, metric.WithAttributes(attrOutcome.String(outcome)))
	in.step.Record(ctx, int64(step))
	for k, v := range values {
		in.values.Record(ctx, v, metric.WithAttributes(attrKey.String(k)))
	}
}

// Part records a part a stage actor answered (skipped: with a skip
// notice).
func (in *Instruments) Part(stage string, skipped bool) {
	if in == nil {
		return
	}
	outcome := "done"
	if skipped {
		outcome = "skipped"
	}
	in.parts.Add(context.Background(), 1, metric.WithAttributes(attrStage.String(stage), attrOutcome.String(outcome)))
}

// Generated records the completion tokens generator actor sampled for a
// part in seconds.
func (in *Instruments) Generated(actor string, tokens int, seconds float64) {
	if in == nil {
		return
	}
	ctx := context.Background()
	in.tokens.Add(ctx, int64(tokens))
	if seconds > 0 {
		in.tokensPS.Record(ctx, float64(tokens)/seconds, metric.WithAttributes(attrActor.String(actor)))
	}
}

// Queue records the depth of pool: parts waiting for an actor and parts
// in flight.
func (in *Instruments) Queue(pool string, waiting, inFlight int) {
	if in == nil {
		return
	}
	ctx := context.Background()
	in.queue.Record(ctx, int64(waiting), metric.WithAttributes(attrPool.String(pool), attrState.String("waiting")))
	in.queue.Record(ctx, int64(inFlight), metric.WithAttributes(attrPool.String(pool), attrState.String("in_flight")))
}

// WeightsSent records weight bytes sent to another node.
func (in *Instruments) WeightsSent(bytes int64) { in.weights("sent", bytes) }

// WeightsReceived records weight bytes received from another node.
func (in *Instruments) WeightsReceived(bytes int64) { in.weights("received", bytes) }

func (in *Instruments) weights(direction string, bytes int64) {
	if in == nil || bytes == 0 {
		return
	}
	in.weightBytes.Add(context.Background(), bytes, metric.WithAttributes(attrDirection.String(direction)))
}

// WatchSupervision counts the supervision decisions of sys (every
// actor.SupervisorEvent: a failed actor restarted, stopped, resumed or
// escalated) until the returned function is called.
func (in *Instruments) WatchSupervision(sys *actor.ActorSystem) (stop func()) {
	if in == nil {
		return func() {}
	}
	sub := sys.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok {
			in.failures.Add(context.Background(), 1, metric.WithAttributes(
				attrDirective.String(directiveName(e.Directive)), attrActor.String(e.Child.GetId())))
		}
	})
	return func() { sys.EventStream.Unsubscribe(sub) }
}

// directiveName is "restart" for actor.RestartDirective, and so on.
func directiveName(d actor.Directive) string {
	return strings.ToLower(strings.TrimSuffix(d.String(), "Directive"))
}
