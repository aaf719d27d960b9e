package actors

import (
	"io"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/metric"
)

// NewSystem returns an actor system whose own log lines (proto.actor logs
// at INFO to stdout by default) go to w at WARN and above; a nil w
// discards them. A non-nil mp turns on proto.actor's own actor metrics
// (see actors/meter).
func NewSystem(w io.Writer, mp metric.MeterProvider) *actor.ActorSystem {
	if w == nil {
		w = io.Discard
	}
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }),
		actor.WithMetricProviders(mp))
}
