package actors

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/messages/messagestest"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// freezingStages hashes every message at the moment a stage is handed it
// (and every reply) and checks them all after the step.
type freezingStages struct {
	inner  stages
	t      *testing.T
	mu     sync.Mutex
	checks []func()
}

func (f *freezingStages) freeze(ms ...proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range ms {
		f.checks = append(f.checks, messagestest.Freeze(f.t, m))
	}
}

func freezeAll[T proto.Message](f *freezingStages, xs []T) {
	for _, x := range xs {
		f.freeze(x)
	}
}

func (f *freezingStages) generate(ctx context.Context, parts []*messages.PromptBatch) ([]*messages.Rollouts, error) {
	freezeAll(f, parts)
	ros, err := f.inner.generate(ctx, parts)
	freezeAll(f, ros)
	return ros, err
}

func (f *freezingStages) score(ctx context.Context, parts []*messages.Rollouts) ([]*messages.Scored, error) {
	freezeAll(f, parts)
	scs, err := f.inner.score(ctx, parts)
	freezeAll(f, scs)
	return scs, err
}

func (f *freezingStages) reference(ctx context.Context, parts []*messages.Scored) ([]*messages.RefScored, error) {
	freezeAll(f, parts)
	rss, err := f.inner.reference(ctx, parts)
	freezeAll(f, rss)
	return rss, err
}

func (f *freezingStages) scoreReference(ctx context.Context, parts []*messages.Rollouts) ([]*messages.RefScored, error) {
	freezeAll(f, parts)
	rss, err := f.inner.scoreReference(ctx, parts)
	freezeAll(f, rss)
	return rss, err
}

func (f *freezingStages) generateReference(ctx context.Context, parts []*messages.PromptBatch) ([]chained, error) {
	freezeAll(f, parts)
	cs, err := f.inner.generateReference(ctx, parts)
	for _, c := range cs {
		if c.ref != nil {
			f.freeze(c.ref)
		} else {
			f.freeze(c.ro)
		}
	}
	return cs, err
}

func (f *freezingStages) learn(ctx context.Context, pb *messages.PreparedBatch) (*learnerReply, error) {
	f.freeze(pb)
	lr, err := f.inner.learn(ctx, pb)
	if err == nil {
		f.freeze(lr.report)
	}
	return lr, err
}

func (f *freezingStages) control(ctx context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error) {
	f.freeze(st)
	up, err := f.inner.control(ctx, st)
	if err == nil {
		f.freeze(up)
	}
	return up, err
}

func (f *freezingStages) publish(ctx context.Context, m *gpu.Model) error {
	return f.inner.publish(ctx, m)
}

func (f *freezingStages) stats(ctx context.Context) ClusterStats { return f.inner.stats(ctx) }

func (f *freezingStages) parts(ctx context.Context) partsInFlight { return f.inner.parts(ctx) }

func (f *freezingStages) checkpoint(ctx context.Context, dir string) error {
	return f.inner.checkpoint(ctx, dir)
}

// TestMessagesNotMutated hashes every message when it is sent and checks,
// after two traced steps through the actors (2 generators, 2 reward
// evaluators, parts of 2 prompts), that none changed.
func TestMessagesNotMutated(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) {
		c.MaxEnt.Objective = config.ObjectiveMaxEntListwise
		c.Train.PromptsPerPart = 2
	})
	s := testSettings(t, cfg)
	env := testEnv()
	env.tel.tracer, _ = memoryTracer(1) // tracing writes trace context into headers: never into a sent message
	opt := s.pipeline
	opt.Generators, opt.RewardEvaluators = 2, 2
	p := StartPipeline(s, env, testModels(t, s), testControl(s), opt, nil)
	defer p.Stop()
	f := &freezingStages{inner: p.Trainer.stages, t: t}
	p.Trainer.stages = f
	for n := range int64(2) {
		plainStep(t, p.Trainer, n)
	}
	if len(f.checks) < 10 {
		t.Fatalf("only %d messages frozen", len(f.checks))
	}
	for _, check := range f.checks {
		check()
	}
}

// panicOnce panics on its first Sample call.
type panicOnce struct {
	Sampler
	armed *atomic.Bool
}

func (p panicOnce) Sample(prompts [][]int, n int, opt gpu.SampleOptions) ([]gpu.Sample, error) {
	if p.armed.CompareAndSwap(true, false) {
		panic("injected generator fault")
	}
	return p.Sampler.Sample(prompts, n, opt)
}

// TestGeneratorPanicRestarts: a generator that panics on its first batch
// is restarted and the batch re-sent; the step completes with the same
// report as a run without the fault.
func TestGeneratorPanicRestarts(t *testing.T) {
	cfg := testConfig(t, nil)
	s := testSettings(t, cfg)
	want := plainStep(t, NewTrainer(s, "test", testModels(t, s), testControl(s)), 0).Report
	var armed atomic.Bool
	armed.Store(true)
	opt := s.pipeline
	opt.Wrap = func(_ string, p Sampler) Sampler { return panicOnce{Sampler: p, armed: &armed} }
	p := StartPipeline(s, testEnv(), testModels(t, s), testControl(s), opt, nil)
	defer p.Stop()
	out, err := Step(context.Background(), p.Trainer, 0, inOrder)
	if err != nil {
		t.Fatalf("step after a generator panic: %v", err)
	}
	if armed.Load() {
		t.Fatal("the fault was never injected")
	}
	if got := out.Report; !sameReport(got, want) {
		t.Errorf("report after restart\n%v\nwant\n%v", got, want)
	}
}

// panicFirst panics on its first n Sample calls.
type panicFirst struct {
	Sampler
	left *atomic.Int32
}

func (p panicFirst) Sample(prompts [][]int, n int, opt gpu.SampleOptions) ([]gpu.Sample, error) {
	if p.left.Add(-1) >= 0 {
		panic("injected generator fault")
	}
	return p.Sampler.Sample(prompts, n, opt)
}

// TestGeneratorReplacedAfterRepeatedFailures: the only generator panics
// more often than its supervisor restarts it (5 times a minute), so it is
// stopped; the coordinator starts a new one, the request lost with the old
// one is retried on it after its timeout, and the step completes with the
// report of a run without faults. Without the replacement every later
// request hits a dead letter and the step skips.
func TestGeneratorReplacedAfterRepeatedFailures(t *testing.T) {
	cfg := testConfig(t, nil)
	s := testSettings(t, cfg)
	trainer := NewTrainer(s, "test", testModels(t, s), testControl(s))
	var want []*messages.StepReport
	for n := range int64(2) {
		want = append(want, plainStep(t, trainer, n).Report)
	}
	var left atomic.Int32
	left.Store(7) // 1 + 5 restarts stop it; the 7th panic is on its replacement
	opt := s.pipeline
	opt.Generators, opt.RequestTimeout = 1, 2*time.Second
	opt.Wrap = func(_ string, p Sampler) Sampler { return panicFirst{Sampler: p, left: &left} }
	p := StartPipeline(s, testEnv(), testModels(t, s), testControl(s), opt, nil)
	defer p.Stop()
	for n := range int64(2) {
		out, err := Step(context.Background(), p.Trainer, n, inOrder)
		if err != nil {
			t.Fatalf("step %d after the generator was stopped: %v", n, err)
		}
		if got := out.Report; !sameReport(got, want[n]) {
			t.Errorf("step %d report\n%v\nwant\n%v", n, got, want[n])
		}
	}
	if left.Load() >= 0 {
		t.Fatalf("only %d of 7 faults injected", 7-left.Load())
	}
}

// TestNaNRewardSkips: a reward function returning NaN for every completion
// skips the batch with reason NON_FINITE_REWARD, and the run goes on.
func TestNaNRewardSkips(t *testing.T) {
	cfg := testConfig(t, nil)
	s := testSettings(t, cfg)
	var calls atomic.Int32
	good := s.stages.reward.fns[0].Fn
	nanFirst := []tasks.Weighted{{Name: "accuracy", Weight: 1, Fn: func(c, a []string) []float64 {
		if calls.Add(1) > 1 {
			return good(c, a)
		}
		out := make([]float64, len(c))
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}}}
	bad := *s
	bad.stages.reward.fns = nanFirst
	p := StartPipeline(&bad, testEnv(), testModels(t, s), testControl(s), s.pipeline, nil)
	defer p.Stop()
	_, err := Step(context.Background(), p.Trainer, 0, inOrder)
	var skipped *SkipError
	if !errors.As(err, &skipped) || skipped.Stage != messages.Stage_REWARD || skipped.Reason != messages.SkipReason_NON_FINITE_REWARD {
		t.Fatalf("err = %v, want a REWARD / NON_FINITE_REWARD skip", err)
	}
	if _, err := Step(context.Background(), p.Trainer, 1, inOrder); err != nil {
		t.Fatalf("step after a skip: %v", err)
	}
}

// emptyFirst returns an empty completion for every sample of prompt 0 on
// its first call.
type emptyFirst struct {
	Sampler
	armed *atomic.Bool
}

func (e emptyFirst) Sample(prompts [][]int, n int, opt gpu.SampleOptions) ([]gpu.Sample, error) {
	s, err := e.Sampler.Sample(prompts, n, opt)
	if err == nil && e.armed.CompareAndSwap(true, false) {
		for j := range n {
			s[j].Tokens, s[j].LogProbs = nil, nil
		}
	}
	return s, err
}

// TestChainFallsBack: a part whose group comes back incomplete is
// answered by its generator rather than relayed on, and the step's batch
// is made as without the chain (the group re-sampled, then every part
// scored and reference-scored): the same batch, in one process and
// through the actors.
func TestChainFallsBack(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) { c.Train.PromptsPerPart = 2 })
	s := testSettings(t, cfg)
	m := testModels(t, s)
	var armed atomic.Bool
	m.Policy = emptyFirst{Sampler: m.Policy, armed: &armed}
	ctx := context.Background()
	tr := NewTrainer(s, "test", m, testControl(s))
	armed.Store(true)
	ro, err := tr.rollouts(ctx, 0, 0, cfg.Train.PromptsPerStep)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tr.scoreReference(ctx, ro)
	if err != nil {
		t.Fatal(err)
	}
	p := StartPipeline(s, testEnv(), m, testControl(s), s.pipeline, nil)
	defer p.Stop()
	for name, tr := range map[string]*Trainer{"one process": tr, "actors": p.Trainer} {
		armed.Store(true)
		got, err := tr.generateReference(ctx, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if armed.Load() {
			t.Fatalf("%s: no group came back incomplete", name)
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s: the batch differs from the one made without the chain", name)
		}
	}
}

// TestIncompleteGroupsRetried: a group that comes back without tokens is
// re-sampled (generation.retry_rounds) and the batch keeps every prompt.
func TestIncompleteGroupsRetried(t *testing.T) {
	cfg := testConfig(t, nil)
	s := testSettings(t, cfg)
	m := testModels(t, s)
	var armed atomic.Bool
	armed.Store(true)
	m.Policy = emptyFirst{Sampler: m.Policy, armed: &armed}
	tr := NewTrainer(s, "test", m, testControl(s))
	ro, err := tr.rollouts(context.Background(), 0, 0, cfg.Train.PromptsPerStep)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(ro.GetPrompts()); got != cfg.Train.PromptsPerStep || len(incompleteGroups(ro)) != 0 {
		t.Fatalf("%d prompts (%d incomplete), want %d complete", got, len(incompleteGroups(ro)), cfg.Train.PromptsPerStep)
	}
	noRetries := *s
	noRetries.step.retries = 0 // without retries the group is dropped
	tr = NewTrainer(&noRetries, "test", m, testControl(s))
	armed.Store(true)
	if ro, err = tr.rollouts(context.Background(), 0, 0, cfg.Train.PromptsPerStep); err != nil {
		t.Fatal(err)
	}
	if got := len(ro.GetPrompts()); got != cfg.Train.PromptsPerStep-1 {
		t.Fatalf("%d prompts without retries, want %d", got, cfg.Train.PromptsPerStep-1)
	}
}

// TestChunkedWeightsRoundTrip splits a model into chunks of 1000 bytes and
// rebuilds it: same weights, same version.
func TestChunkedWeightsRoundTrip(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	m0, err := gpu.NewModel(s.model, 3)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpu.NewModelFromWeights(s.model, m0.Weights(), 7)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := chunkModel(messages.NewMeta("r", 7, "w", 7), m, 1000, &tensorLayout{})
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 4*m.NumParams()/1000 {
		t.Fatalf("%d chunks for %d bytes of 1000", len(chunks), 4*m.NumParams())
	}
	var a messages.Assembler
	var got *gpu.Model
	for i := len(chunks) - 1; i >= 0; i-- { // any order
		if got != nil {
			t.Fatalf("model complete before chunk %d", i)
		}
		if got, err = addWeightChunk(&a, s.model, nil, chunks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got == nil || got.Version() != 7 {
		t.Fatalf("assembled %v, want version 7", got)
	}
	w0, w1 := m.Weights(), got.Weights()
	for i := range w0 {
		if w0[i] != w1[i] {
			t.Fatalf("weight %d = %v, want %v", i, w1[i], w0[i])
		}
	}
}

// TestChunkedSyncMatchesStep runs the pipeline with weights sent as
// PolicyWeights chunks (as across a network): same reports as Step.
func TestChunkedSyncMatchesStep(t *testing.T) {
	cfg := testConfig(t, nil)
	s := testSettings(t, cfg)
	plain := NewTrainer(s, "test", testModels(t, s), testControl(s))
	opt := s.pipeline
	opt.ChunkWeights, opt.ChunkBytes = true, 4096
	p := StartPipeline(s, testEnv(), testModels(t, s), testControl(s), opt, nil)
	defer p.Stop()
	for n := range int64(3) {
		want := plainStep(t, plain, n).Report
		got := plainStep(t, p.Trainer, n).Report
		if !sameReport(got, want) {
			t.Fatalf("step %d: chunked sync report differs", n)
		}
	}
}
