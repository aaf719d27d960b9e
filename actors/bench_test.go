package actors

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
)

// benchConfig is the small preset at the CI batch size (16 prompts × 8).
func benchConfig(b *testing.B, preset string, staleness int) *settings {
	cfg := config.Default()
	cfg.Model.Preset = preset
	cfg.Train.MaxStaleness = staleness
	cfg.Train.Seed = 1
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	return testSettings(b, cfg)
}

// BenchmarkEndToEnd measures training steps through the actors, in
// synchronous (max_staleness 0) and asynchronous (max_staleness 2) mode:
// steps/s and completion tokens/s.
func BenchmarkEndToEnd(b *testing.B) {
	for _, c := range []struct {
		name      string
		staleness int
	}{{"sync", 0}, {"async", 2}} {
		b.Run("preset=small/mode="+c.name, func(b *testing.B) {
			s := benchConfig(b, "small", c.staleness)
			p := StartPipeline(s, testEnv(), testModels(b, s), testControl(s), s.pipeline, nil)
			defer p.Stop()
			var tokens int64
			b.ResetTimer()
			start := time.Now()
			_, err := drive(context.Background(), p.Trainer, 0, int64(b.N), batchesAhead(c.staleness, 1),
				func(_ context.Context, res stepResult) error {
					if res.out != nil {
						tokens += res.out.Report.GetTokens()
					}
					return nil
				})
			if err != nil {
				b.Fatal(err)
			}
			sec := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/sec, "steps/s")
			b.ReportMetric(float64(tokens)/sec, "tok/s")
		})
	}
}

// BenchmarkDeliver measures the actor-messaging overhead of a step: the
// same synchronous step through plain calls and through the actors (the
// difference is time in mailboxes, futures and scatter/gather), one stage
// request's round trip through a coordinator and a pool member (a step
// makes six: generate, score, reference, learn, control, publish), and
// the cost of serialising the step's messages as a network would (ns/op
// and bytes/step of marshal + unmarshal; in process nothing is serialised).
func BenchmarkDeliver(b *testing.B) {
	s := benchConfig(b, "small", 0)
	b.Run("driver=plain", func(b *testing.B) {
		t := NewTrainer(s, "bench", testModels(b, s), testControl(s))
		b.ResetTimer()
		for n := range int64(b.N) {
			plainStep(b, t, n)
		}
	})
	b.Run("driver=actors", func(b *testing.B) {
		p := StartPipeline(s, testEnv(), testModels(b, s), testControl(s), s.pipeline, nil)
		defer p.Stop()
		b.ResetTimer()
		for n := range int64(b.N) {
			plainStep(b, p.Trainer, n)
		}
	})
	b.Run("scatter", func(b *testing.B) { // one stage request: root → parent → pool member → parent → root
		sys := NewSystem(nil, nil)
		defer sys.Shutdown()
		var none atomic.Int32
		parent := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &scatterParent{panics: &none} }))
		parts := []any{1}
		b.ResetTimer()
		for range b.N {
			if _, err := sys.Root.RequestFuture(parent, parts, 10*time.Second).Result(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal", func(b *testing.B) {
		t := NewTrainer(s, "bench", testModels(b, s), testControl(s))
		batch, err := t.produce(context.Background(), 0)
		if err != nil {
			b.Fatal(err)
		}
		rs := batch.ref
		pb, _, err := prepare(s.step.prepare, rs, t.control)
		if err != nil {
			b.Fatal(err)
		}
		msgs := []proto.Message{promptsOf(rs.GetScored().GetRollouts()), rs.GetScored().GetRollouts(), rs.GetScored(), rs, pb}
		var bytes int
		b.ResetTimer()
		for range b.N {
			bytes = 0
			for _, m := range msgs {
				data, err := proto.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				bytes += len(data)
				if err := proto.Unmarshal(data, m.ProtoReflect().New().Interface()); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(bytes), "bytes/step")
	})
}

// BenchmarkWeightSync measures one weight publication to a worker node's
// actor through the weight port over loopback, as a synchronous step
// waits for it: the learner cuts its snapshot into chunks, the worker
// fetches them, checks and assembles them, and builds its model. MB/s
// counts the float32 weights. Set MGRPO_SYNC_PRESETS (space-separated) to
// measure others than base, e.g. smollm2-135m (540 MB).
func BenchmarkWeightSync(b *testing.B) {
	for _, preset := range syncPresets() {
		b.Run("preset="+preset, func(b *testing.B) {
			cfg, err := gpu.Preset(preset)
			if err != nil {
				b.Fatal(err)
			}
			m, err := gpu.NewModel(cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			server, err := node.NewBlobServer("127.0.0.1", "127.0.0.1", 0, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer server.Close()
			client := node.NewBlobClient(nil)
			defer client.Close()
			w := &publisher{runID: "bench", chunkSize: config.Default().Cluster.WeightChunkBytes, blobs: server}
			r := weightReceiver{cfg: cfg, blobs: client}
			from := actor.NewPID("127.0.0.1:1", "learner")
			b.SetBytes(int64(cfg.WeightBytes()))
			b.ResetTimer()
			weights := m.Weights()
			for i := range int64(b.N) {
				b.StopTimer()
				v, err := gpu.NewModelFromWeights(cfg, weights, i+1) // the learner's snapshot
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				offer := w.offer(i+1, w.chunksOf(v, i+1))
				got, err := r.fetch(from, offer)
				if err != nil {
					b.Fatal(err)
				}
				w.answered(i + 1)
				if got.Version() != i+1 {
					b.Fatalf("version %d, want %d", got.Version(), i+1)
				}
			}
		})
	}
}

// syncPresets are the presets the weight benchmarks measure:
// MGRPO_SYNC_PRESETS (space-separated), else base.
func syncPresets() []string {
	if p := os.Getenv("MGRPO_SYNC_PRESETS"); p != "" {
		return strings.Fields(p)
	}
	return []string{"base"}
}
