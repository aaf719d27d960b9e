package actors

import (
	"io"
	"log/slog"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
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

// warmRegistry allocates, once, the maps in which proto.actor's process
// registry keeps PIDs: 1024 concurrent maps of 32 shards, each a Go map
// that allocates its storage on its first insert. A run's requests (a
// future PID each) reach them one at a time, so its memory crept up by
// ~9 MB over its first ~100k requests (about 6000 steps of the tiny
// preset), which a soak cannot tell from a leak; touched here, it is a
// fixed cost at the start.
func warmRegistry(sys *actor.ActorSystem) {
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		seen := map[*cmap.ConcurrentMapShared]bool{}
		for i := 0; len(seen) < cmap.SHARD_COUNT && i < 1<<16; i++ {
			key := "warm$" + strconv.Itoa(i)
			if shard := m.GetShard(key); !seen[shard] {
				seen[shard] = true
				m.Set(key, nil)
				m.Remove(key)
			}
		}
	}
}
