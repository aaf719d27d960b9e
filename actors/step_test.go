package actors

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// emptyEvery returns no tokens for every completion of the prompts whose
// seed is 0 mod n: a generator fault that depends only on the prompt, so
// it hits the same groups whichever generator draws them, and a retry
// round (which reseeds the prompts) can mend it.
type emptyEvery struct {
	Sampler
	n uint64
}

func (e emptyEvery) Sample(prompts [][]int, k int, opt gpu.SampleOptions) ([]gpu.Sample, error) {
	s, err := e.Sampler.Sample(prompts, k, opt)
	for i := range prompts {
		if err == nil && opt.Seeds[i]%e.n == 0 {
			for j := range k {
				s[i*k+j].Tokens, s[i*k+j].LogProbs, s[i*k+j].Entropies = nil, nil, nil
			}
		}
	}
	return s, err
}

// pipelineCase is one configuration TestPipelineMatchesStep runs both ways.
type pipelineCase struct {
	name                 string
	mutate               func(c *config.Config)
	generators, rewarded int
	faulty               bool // emptyEvery{n: 3}: some groups need a retry round
}

// pipelineCases are the configurations TestPipelineMatchesStep runs both
// ways: every objective and policy loss with one generator, and batches
// split over 3 generators (or 1) with faults mended by retry rounds and
// dynamic sampling.
func pipelineCases() []pipelineCase {
	var cases []pipelineCase
	for _, tc := range []struct{ objective, policyLoss string }{
		{config.ObjectiveGRPO, config.PolicyLossVanilla},
		{config.ObjectiveGRPO, config.PolicyLossGSPO},
		{config.ObjectiveGRPO, config.PolicyLossCISPO},
		{config.ObjectiveGRPOEntropyBonus, config.PolicyLossVanilla},
		{config.ObjectiveMaxEntListwise, config.PolicyLossVanilla},
		{config.ObjectiveMaxEntEntropy, config.PolicyLossVanilla},
	} {
		cases = append(cases, pipelineCase{name: tc.objective + "/" + tc.policyLoss, generators: 1, rewarded: 1,
			mutate: func(c *config.Config) { c.MaxEnt.Objective, c.Loss.PolicyLoss = tc.objective, tc.policyLoss }})
	}
	split := func(objective string, seed bool) func(c *config.Config) {
		return func(c *config.Config) {
			c.MaxEnt.Objective = objective
			c.MaxEnt.SeedGRPO.Enabled = seed
			c.Train.PromptsPerStep, c.Train.PromptsPerPart = 6, 2
			c.Train.DynamicSampling = true
		}
	}
	cases = append(cases,
		pipelineCase{name: "3 generators/entropy bonus", generators: 3, rewarded: 2, faulty: true, mutate: split(config.ObjectiveGRPOEntropyBonus, false)},
		pipelineCase{name: "3 generators/seed-grpo", generators: 3, rewarded: 2, faulty: true, mutate: split(config.ObjectiveGRPO, true)},
		pipelineCase{name: "3 generators/listwise", generators: 3, rewarded: 2, faulty: true, mutate: split(config.ObjectiveMaxEntListwise, false)},
		pipelineCase{name: "1 generator/listwise", generators: 1, rewarded: 1, faulty: true, mutate: split(config.ObjectiveMaxEntListwise, false)},
	)
	return cases
}

// TestPipelineMatchesStep runs 3 synchronous steps of the tiny preset
// (seed 1) through Step's plain calls and through the actors, and requires
// the same outcome bit for bit: the learner's report, the scored batch,
// everything rewards.Prepare derived and the controller's update
// (DESIGN §2). The pipeline spreads parts of 2 prompts over 1 or 3
// generators and 1 or 2 reward evaluators, with retry rounds and dynamic
// sampling, under objectives that read every field a completion carries
// (entropy bonus: entropies; SEED: texts and log-probs; listwise: q and
// reference log-probs).
func TestPipelineMatchesStep(t *testing.T) {
	for _, tc := range pipelineCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, func(c *config.Config) {
				c.MaxEnt.Alpha, c.MaxEnt.Beta, c.MaxEnt.EntropyBonusCoef = 0.1, 0.01, 0.1
				tc.mutate(c)
				if c.MaxEnt.Objective != config.ObjectiveGRPOEntropyBonus {
					c.MaxEnt.EntropyBonusCoef = 0
				}
			})
			s := testSettings(t, cfg)
			wrap := func(_ string, s Sampler) Sampler {
				if tc.faulty {
					return emptyEvery{Sampler: s, n: 3}
				}
				return s
			}
			m := testModels(t, s)
			m.Policy = wrap("", m.Policy)
			plain := NewTrainer(s, "test", m, testControl(s))
			opt := s.pipeline
			opt.Generators, opt.RewardEvaluators, opt.Wrap = tc.generators, tc.rewarded, wrap
			p := StartPipeline(s, testEnv(), testModels(t, s), testControl(s), opt, nil)
			defer p.Stop()
			for n := range int64(3) {
				want := plainStep(t, plain, n)
				got := plainStep(t, p.Trainer, n)
				sameOutcome(t, fmt.Sprintf("step %d", n), got, want)
				if v := got.Report.GetMeta().GetPolicyVersion(); v != n+1 {
					t.Errorf("step %d: policy version %d, want %d", n, v, n+1)
				}
				checkCompletions(t, fmt.Sprintf("step %d", n), got.Scored, tc.generators)
			}
		})
	}
}

// sameOutcome requires two outcomes of one step to agree bit for bit on
// everything but which generator drew a completion and message headers.
func sameOutcome(t *testing.T, what string, got, want *Outcome) {
	t.Helper()
	if !sameReport(got.Report, want.Report) {
		t.Errorf("%s: report\n%v\nwant\n%v", what, got.Report, want.Report)
	}
	if !proto.Equal(anonymous(got.Scored), anonymous(want.Scored)) {
		t.Errorf("%s: scored batches differ", what)
	}
	if !proto.Equal(got.Update.GetState(), want.Update.GetState()) {
		t.Errorf("%s: controller state %v, want %v", what, got.Update.GetState(), want.Update.GetState())
	}
	for _, f := range []struct {
		name      string
		got, want []float64
	}{
		{"utilities", got.Prepared.Utilities, want.Prepared.Utilities},
		{"advantages", got.Prepared.Advantages, want.Prepared.Advantages},
		{"q", got.Prepared.Q, want.Prepared.Q},
		{"weights", got.Prepared.Weights, want.Prepared.Weights},
	} {
		if !slices.EqualFunc(f.got, f.want, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
			t.Errorf("%s: %s %v, want %v", what, f.name, f.got, f.want)
		}
	}
}

// anonymous is sc without headers and generator ids.
func anonymous(sc *messages.Scored) *messages.Scored {
	c := proto.CloneOf(sc)
	c.Meta, c.Rollouts.Meta = nil, nil
	for _, r := range c.GetRollouts().GetRollouts() {
		r.GeneratorId = ""
	}
	return c
}

// checkCompletions checks what every completion of a trained batch must
// carry after all the splitting and joining: one log-prob and one entropy
// per token, the version and generator that drew it, and a prompt with a
// seed.
func checkCompletions(t *testing.T, what string, sc *messages.Scored, generators int) {
	t.Helper()
	ids := map[string]bool{}
	ro := sc.GetRollouts()
	for i, r := range ro.GetRollouts() {
		n := len(r.GetTokenIds())
		if n == 0 || len(r.GetLogp()) != n || len(r.GetEntropy()) != n || r.GetGeneratorId() == "" {
			t.Fatalf("%s: completion %d has %d tokens, %d log-probs, %d entropies, generator %q",
				what, i, n, len(r.GetLogp()), len(r.GetEntropy()), r.GetGeneratorId())
		}
		if ro.GetPrompts()[r.GetPromptIndex()].GetSeed() == 0 {
			t.Fatalf("%s: completion %d's prompt has no seed", what, i)
		}
		ids[r.GetGeneratorId()] = true
	}
	if generators > 1 && len(ids) < 2 {
		t.Errorf("%s: every completion came from %v with %d generators", what, ids, generators)
	}
}

// TestDriveMatchesStep: a run's driver (drive, the queue as the pace) runs
// the same step as Step called in order. Synchronously, the actors under
// drive give the plain calls' outcomes bit for bit; with max_staleness 2
// (batches made ahead while the learner works) the plain stages and the
// actors under drive agree with each other bit for bit.
func TestDriveMatchesStep(t *testing.T) {
	for _, staleness := range []int{0, 2} {
		s := testSettings(t, testConfig(t, func(c *config.Config) {
			c.Train.MaxStaleness, c.Train.PromptsPerPart = staleness, 2
		}))
		var want []*Outcome
		if staleness == 0 {
			plain := NewTrainer(s, "test", testModels(t, s), testControl(s))
			for n := range int64(4) {
				want = append(want, plainStep(t, plain, n))
			}
		} else {
			want = driven(t, NewTrainer(s, "test", testModels(t, s), testControl(s)), 4, batchesAhead(staleness, 1))
		}
		opt := s.pipeline
		opt.Generators = 2
		p := StartPipeline(s, testEnv(), testModels(t, s), testControl(s), opt, nil)
		got := driven(t, p.Trainer, 4, batchesAhead(staleness, 1))
		p.Stop()
		lag := int64(0)
		for n := range want {
			sameOutcome(t, fmt.Sprintf("max_staleness %d, step %d", staleness, n), got[n], want[n])
			lag = max(lag, got[n].Report.GetStalenessMax())
		}
		if lag != int64(staleness) {
			t.Errorf("max_staleness %d: the samples were at most %d versions old", staleness, lag)
		}
	}
}

// driven runs steps 0..steps-1 of tr under drive, up to ahead at once, and
// returns their outcomes in step order.
func driven(t *testing.T, tr *Trainer, steps int64, ahead int) []*Outcome {
	t.Helper()
	var outs []*Outcome
	last, err := drive(context.Background(), tr, 0, steps, ahead, func(_ context.Context, res stepResult) error {
		if res.err != nil {
			return res.err
		}
		outs = append(outs, res.out)
		return nil
	})
	if err != nil || last != steps {
		t.Fatalf("drive: %d steps, %v", last, err)
	}
	return outs
}

// publishLog records the order in which a trainer asks its stages for a
// batch, a learner step, a controller update and a publication (with the
// version published, counted from v0), and fails the learner step fail.
type publishLog struct {
	stages
	v0, fail int64

	mu     sync.Mutex
	learns int64
	events []string
}

func (l *publishLog) note(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *publishLog) generateReference(ctx context.Context, parts []*messages.PromptBatch) ([]chained, error) {
	l.note("generate")
	return l.stages.generateReference(ctx, parts)
}

func (l *publishLog) learn(ctx context.Context, pb *messages.PreparedBatch) (*learnerReply, error) {
	l.note("learn")
	l.mu.Lock()
	n := l.learns
	l.learns++
	l.mu.Unlock()
	if n == l.fail {
		return nil, fmt.Errorf("learner step %d: refused by the test", n)
	}
	return l.stages.learn(ctx, pb)
}

func (l *publishLog) control(ctx context.Context, st *messages.StepStats) (*messages.ControllerUpdate, error) {
	l.note("control")
	return l.stages.control(ctx, st)
}

func (l *publishLog) publish(ctx context.Context, m *gpu.Model) error {
	l.note(fmt.Sprintf("publish %d", m.Version()-l.v0))
	return l.stages.publish(ctx, m)
}

// TestPublishNext: in synchronous mode a step's new weights go to the
// generators between its learner step and its controller update, before
// the next batch is asked for; a skipped step (its learner step failed)
// publishes nothing, the next step's batch then needing no publication of
// its own (the same version), and a run's last step publishes nothing;
// in plain calls and through the actors alike.
func TestPublishNext(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	want := []string{
		"generate", "learn", "publish 1", "control", // step 0
		"generate", "learn", // step 1: skipped
		"generate", "learn", "publish 2", "control", // step 2
		"generate", "learn", "control", // step 3, the last
	}
	for _, actors := range []bool{false, true} {
		m := testModels(t, s)
		tr := NewTrainer(s, "test", m, testControl(s))
		if actors {
			p := StartPipeline(s, testEnv(), m, testControl(s), s.pipeline, nil)
			defer p.Stop()
			tr = p.Trainer
		}
		log := &publishLog{stages: tr.stages, v0: m.Policy.Version(), fail: 1}
		tr.stages = log
		skipped := 0
		last, err := drive(context.Background(), tr, 0, 4, 1, func(_ context.Context, res stepResult) error {
			if res.err != nil {
				skipped++
			}
			return nil
		})
		if err != nil || last != 4 || skipped != 1 {
			t.Fatalf("actors %v: drive = %d, %v with %d skipped; want 4 steps, 1 skipped", actors, last, err, skipped)
		}
		if !slices.Equal(log.events, want) {
			t.Errorf("actors %v: the stages were asked\n%q\nwant\n%q", actors, log.events, want)
		}
	}
}
