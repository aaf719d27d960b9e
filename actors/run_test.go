package actors

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// runConfig is a tiny run writing into a temporary directory.
func runConfig(t *testing.T, mutate func(*config.Config)) *config.Config {
	return testConfig(t, func(c *config.Config) {
		c.Train.WarmStartSteps, c.Train.WarmStartBatch = 3, 16
		c.Train.Steps, c.Train.CheckpointEvery, c.Train.EvalEvery, c.Train.EvalPrompts = 4, 2, 2, 8
		c.Output.Dir, c.Output.Name, c.Output.SampleEvery, c.Output.SampleRows = t.TempDir(), "run", 2, 5
		if mutate != nil {
			mutate(c)
		}
	})
}

// TestRunWritesOutputsAndResumes runs 4 steps, checks every output, then
// resumes the run to 6 steps from its last checkpoint.
func TestRunWritesOutputsAndResumes(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) { c.Metrics.TopKKL = 5 })
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	run := filepath.Join(cfg.Output.Dir, "run")
	for _, f := range []string{"config.yaml", "metrics.jsonl", "report.html", "samples/step_000002.json",
		"checkpoints/step-2/model.safetensors", "checkpoints/step-4/controller_state.json",
		"checkpoints/step-4/trainer_state.json", "reference/model.safetensors"} {
		if _, err := os.Stat(filepath.Join(run, f)); err != nil {
			t.Errorf("missing output %s: %v", f, err)
		}
	}
	recs, err := rlRecords(filepath.Join(run, "metrics.jsonl"))
	if err != nil || len(recs) != 4 {
		t.Fatalf("metrics: %d records, err %v; want 4", len(recs), err)
	}
	if _, ok := recs[1].Values["eval/greedy_accuracy"]; !ok {
		t.Errorf("step 2 metrics lack eval/greedy_accuracy: %v", recs[1].Values)
	}
	checkHighKLTable(t, filepath.Join(run, "samples/step_000002.json"), 5)
	cfg.Train.Steps, cfg.Train.Resume = 6, run
	out.Reset()
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	if recs, err = rlRecords(filepath.Join(run, "metrics.jsonl")); err != nil || len(recs) != 6 || recs[5].Step != 6 {
		t.Fatalf("after resume: %d records, err %v; want steps 1..6", len(recs), err)
	}
	all, err := runlog.ReadMetrics(filepath.Join(run, "metrics.jsonl"))
	if _, ok := all[0].Values["eval/greedy_accuracy"]; err != nil || all[0].Step != 0 || !ok || len(all[0].Values) != 2 || all[0].Values["guard/warm_start"] != 1 {
		t.Fatalf("line 0 = %+v (%v), want the starting policy's greedy accuracy and the 3-step warm start's guard warning", all[0], err)
	}
	if want := fmt.Sprintf("(start %.1f%%)", 100*all[0].Values["eval/greedy_accuracy"]); !strings.Contains(out.String(), want) {
		t.Errorf("the resumed run's last lines do not say %q:\n%s", want, out.String())
	}
	if _, err := os.Stat(filepath.Join(run, "checkpoints/step-6/COMPLETE")); err != nil {
		t.Errorf("no final checkpoint after resume: %v", err)
	}
}

// TestAsyncStalenessBounded: every consumed sample is at most
// max_staleness policy versions behind the learner, also when weights
// reach the generators only every sync_every steps.
func TestAsyncStalenessBounded(t *testing.T) {
	for _, tc := range []struct{ staleness, syncEvery int }{{2, 1}, {2, 3}, {1, 2}} {
		cfg := runConfig(t, func(c *config.Config) {
			c.Train.MaxStaleness, c.Train.SyncEvery = tc.staleness, tc.syncEvery
			c.Train.Steps, c.Train.EvalEvery, c.Train.CheckpointEvery = 8, 0, 0
			c.Output.SampleEvery = 0
		})
		if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		recs, err := rlRecords(filepath.Join(cfg.Output.Dir, "run", "metrics.jsonl"))
		if err != nil || len(recs) != 8 {
			t.Fatalf("%+v: %d records, err %v", tc, len(recs), err)
		}
		for _, r := range recs {
			lag, ok := r.Values["train/staleness_max"]
			if !ok || lag < 0 || lag > float64(tc.staleness) {
				t.Errorf("%+v: step %d: staleness %v (present %v), want 0..%d", tc, r.Step, lag, ok, tc.staleness)
			}
		}
	}
}

func TestBatchesAhead(t *testing.T) {
	for _, tc := range []struct{ staleness, syncEvery, want int }{
		{0, 1, 1}, {0, 5, 1}, {1, 1, 2}, {2, 1, 3}, {2, 2, 2}, {2, 3, 1}, {4, 3, 3},
	} {
		if got := batchesAhead(tc.staleness, tc.syncEvery); got != tc.want {
			t.Errorf("batchesAhead(%d, %d) = %d, want %d", tc.staleness, tc.syncEvery, got, tc.want)
		}
	}
}

// parityReward scores completions 1 or 0 by a hash of the completion,
// except for prompts with an even answer, whose groups all score 0.
func parityReward(c, a []string) []float64 {
	out := make([]float64, len(c))
	for i := range c {
		n, _ := strconv.Atoi(a[i])
		h := fnv.New32a()
		h.Write([]byte(c[i]))
		if n%2 == 1 && h.Sum32()%2 == 0 {
			out[i] = 1
		}
	}
	return out
}

// TestDynamicSamplingRefills: zero-variance groups are dropped and refill
// rounds top the batch up to prompts_per_step varied groups; a reward that
// never varies skips the step with ZERO_VARIANCE after the capped rounds.
func TestDynamicSamplingRefills(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) {
		c.Train.DynamicSampling, c.Train.DynamicSamplingMaxRounds = true, 4
		c.Train.PromptsPerStep = 6
	})
	s := testSettings(t, cfg)
	s.stages.reward.fns = []tasks.Weighted{{Name: "parity", Weight: 1, Fn: parityReward}}
	tr := NewTrainer(s, "test", testModels(t, s), testControl(s))
	b, err := tr.produce(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	sc := b.ref.GetScored()
	varied, err := variedGroups(sc, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sc.GetRollouts().GetPrompts()); n != 6 || len(varied) != 6 {
		t.Fatalf("%d groups, %d varied; want 6 varied", n, len(varied))
	}
	s.stages.reward.fns = []tasks.Weighted{{Name: "flat", Weight: 1, Fn: func(c, _ []string) []float64 { return make([]float64, len(c)) }}}
	_, err = NewTrainer(s, "test", testModels(t, s), testControl(s)).produce(context.Background(), 0)
	var skipped *SkipError
	if !errors.As(err, &skipped) || skipped.Reason != messages.SkipReason_ZERO_VARIANCE {
		t.Fatalf("flat rewards: err %v, want a ZERO_VARIANCE skip", err)
	}
}

// cancelOn cancels a context when a line containing marker is written.
type cancelOn struct {
	marker string
	cancel context.CancelFunc
}

func (c cancelOn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(c.marker)) {
		c.cancel()
	}
	return len(p), nil
}

// TestRunCancelCheckpoints: cancelling the run (SIGINT) at RL
// step 10 ends it cleanly with a final complete checkpoint and the report,
// and says where it stopped and how to resume (not "done").
func TestRunCancelCheckpoints(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) { c.Train.Steps = 50 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := Run(ctx, cfg, cancelOn{marker: "step 10/50", cancel: cancel})
	run := filepath.Join(cfg.Output.Dir, "run")
	dir, step, lerr := runlog.LatestComplete(filepath.Join(run, "checkpoints"))
	if lerr != nil || step >= 50 {
		t.Fatalf("latest checkpoint %q step %d, err %v; want one before step 50", dir, step, lerr)
	}
	var stop *stopError
	want := fmt.Sprintf("stopped at step %d; resume with: mgrpo-node --resume %s", step, run)
	if !errors.As(err, &stop) || !errors.Is(err, ErrInterrupted) || err.Error() != want {
		t.Fatalf("cancelled run: err %v, want %q (ErrInterrupted)", err, want)
	}
	if _, err := os.Stat(filepath.Join(run, "report.html")); err != nil {
		t.Errorf("no report after cancel: %v", err)
	}
}

// TestResumeIsExact: 2 steps, then a resume to 4, give the same losses,
// rewards and cumulative token counts at steps 3 and 4 as 4 steps in one go (prompts and sampling seeds
// depend only on (seed, step); model, optimiser and controller state come
// from the checkpoint).
func TestResumeIsExact(t *testing.T) {
	metrics := func(cfg *config.Config) []runlog.Record {
		t.Helper()
		recs, err := rlRecords(filepath.Join(cfg.Output.Dir, "run", "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	straight := runConfig(t, func(c *config.Config) { c.Train.EvalEvery = 0 })
	if err := Run(context.Background(), straight, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	split := runConfig(t, func(c *config.Config) { c.Train.EvalEvery, c.Train.Steps = 0, 2 })
	if err := Run(context.Background(), split, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	split.Train.Steps, split.Train.Resume = 4, filepath.Join(split.Output.Dir, "run")
	if err := Run(context.Background(), split, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	want, got := metrics(straight), metrics(split)
	if len(got) != 4 || len(want) != 4 {
		t.Fatalf("%d and %d records, want 4", len(got), len(want))
	}
	// Every completion (4 prompts × 4 here) has a prompt of at least 4 tokens.
	if first := want[0].Values["train/num_tokens"]; first < 16*4 {
		t.Errorf("step 1: num_tokens %v counts no prompt tokens", first)
	}
	for i := 2; i < 4; i++ {
		for _, k := range []string{"train/loss", "train/reward", "train/kl", "train/grad_norm", "train/num_tokens"} {
			if got[i].Values[k] != want[i].Values[k] {
				t.Errorf("step %d %s: resumed %v, straight %v", i+1, k, got[i].Values[k], want[i].Values[k])
			}
		}
	}
}

// TestRunRecordsSkips: a run whose batches are unusable (dynamic sampling
// with a reward that never varies: the random policy's completions are
// never correct) skips every step with its reason in metrics.jsonl and
// still finishes; its last lines give the final greedy accuracy (the last
// step was skipped) and count the skipped steps with their reason (it
// said "done: 3 steps").
func TestRunRecordsSkips(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) {
		c.Rewards.Funcs, c.Rewards.Weights = []string{"correct"}, []float64{1}
		c.Train.DynamicSampling, c.Train.DynamicSamplingMaxRounds = true, 1
		c.Train.Steps, c.Train.EvalEvery = 3, 0
	})
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-2:]
	if !strings.HasPrefix(last[0], "greedy accuracy ") || !strings.HasPrefix(last[1], "done: 3 steps, 3 skipped (3 at REWARD, ZERO_VARIANCE: ") {
		t.Errorf("last lines %q; want the greedy accuracy, then the 3 skipped steps and their reason", last)
	}
	for n := 1; n <= 3; n++ { // the reason names the step the line does (it named the one before)
		if want := fmt.Sprintf("step %d skipped: skip at REWARD (ZERO_VARIANCE): step %d: ", n, n); !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	recs, err := rlRecords(filepath.Join(cfg.Output.Dir, "run", "metrics.jsonl"))
	if err != nil || len(recs) != 3 {
		t.Fatalf("%d records, err %v; want 3", len(recs), err)
	}
	for _, r := range recs {
		if r.Values["train/skipped"] != 1 || r.Values["train/skip_reason"] != float64(messages.SkipReason_ZERO_VARIANCE) {
			t.Errorf("step %d: skipped %v reason %v, want 1 and ZERO_VARIANCE", r.Step, r.Values["train/skipped"], r.Values["train/skip_reason"])
		}
	}
}

// TestRunRefusesBadInputBeforeWriting checks that input the run cannot use
// (a device this build lacks, a dataset with a bad line) stops it with an
// error naming the problem before the run directory exists.
func TestRunRefusesBadInputBeforeWriting(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"prompt\":\"1+1=\",\"answer\":\"2\"}\n{\"prompt\": 5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"cuda without the tag", func(c *config.Config) { c.Model.Device = "cuda" }, "built without CUDA support"},
		{"bad dataset line", func(c *config.Config) { c.Task.Dataset = bad }, "line 2"},
	} {
		if tc.name == "cuda without the tag" && gpu.CUDABuilt {
			continue // a cudaemu build opens the emulator
		}
		cfg := runConfig(t, tc.mutate)
		err := Run(context.Background(), cfg, new(bytes.Buffer))
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%s: err = %v, want one mentioning %q", tc.name, err, tc.want)
		}
		if _, statErr := os.Stat(filepath.Join(cfg.Output.Dir, "run")); !errors.Is(statErr, os.ErrNotExist) {
			t.Errorf("%s: run directory exists after a refused start (%v)", tc.name, statErr)
		}
	}
}

// TestRunNameTakenGetsSuffix checks that a generated run name already in
// use (two runs started in the same second) gets a numeric suffix.
func TestRunNameTakenGetsSuffix(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) { c.Output.Name = "" })
	name := runName(cfg)
	taken := filepath.Join(cfg.Output.Dir, name)
	if err := os.MkdirAll(taken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(taken, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, _, _, err := openRun(cfg, name, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if got, want := dir.Name(), name+"-2"; got != want {
		t.Errorf("run name = %q, want %q", got, want)
	}
}

// cancelOnCall cancels a context on its n-th Sample call, then samples.
type cancelOnCall struct {
	Sampler
	calls  *atomic.Int32
	n      int32
	cancel context.CancelFunc
}

func (c cancelOnCall) Sample(prompts [][]int, n int, opt gpu.SampleOptions) ([]gpu.Sample, error) {
	if c.calls.Add(1) == c.n {
		c.cancel()
	}
	return c.Sampler.Sample(prompts, n, opt)
}

// TestCancelCountsOnlyStepsTaken: a cancel (SIGINT) while a step's batch
// is being generated drops that batch at its next stage and stops; drive
// counts exactly the steps the learner took, and records no skip. (A
// cancelled step used to be recorded as a skip while the run's step count
// moved on, so a resume never trained it.) The generator's wrapper is
// replaced by the first published weights, so the cancel comes in step 1.
func TestCancelCountsOnlyStepsTaken(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	m := testModels(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	opt := s.pipeline
	opt.Generators = 1
	opt.Wrap = func(_ string, s Sampler) Sampler {
		return cancelOnCall{Sampler: s, calls: &calls, n: 1, cancel: cancel}
	}
	p := StartPipeline(s, testEnv(), m, testControl(s), opt, nil)
	defer p.Stop()
	v0 := m.Learner.Version()
	var recorded []int64
	last, err := drive(ctx, p.Trainer, 0, 6, 1, func(_ context.Context, res stepResult) error {
		if res.err != nil {
			t.Errorf("step %d recorded with error %v", res.n+1, res.err)
		}
		recorded = append(recorded, res.n)
		return nil
	})
	if err != nil || calls.Load() != 1 || last != int64(len(recorded)) {
		t.Fatalf("drive = %d, %v after recording steps %v (%d generations)", last, err, recorded, calls.Load())
	}
	if got := m.Learner.Version() - v0; got != last {
		t.Errorf("learner took %d steps, drive counted %d", got, last)
	}
}

// TestCancelFinishesLearning: a cancel that comes once the learner has a
// batch lets that step finish and be recorded, then drive stops.
func TestCancelFinishesLearning(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	m := testModels(t, s)
	p := StartPipeline(s, testEnv(), m, testControl(s), s.pipeline, nil)
	defer p.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.Trainer.stages = cancelBeforeLearn{stages: p.Trainer.stages, cancel: cancel}
	v0 := m.Learner.Version()
	last, err := drive(ctx, p.Trainer, 0, 6, 1, func(_ context.Context, res stepResult) error {
		if res.err != nil {
			t.Errorf("step %d recorded with error %v", res.n+1, res.err)
		}
		return nil
	})
	if err != nil || last != 1 || m.Learner.Version()-v0 != 1 {
		t.Errorf("drive = %d, %v; learner took %d steps; want 1 and 1", last, err, m.Learner.Version()-v0)
	}
}

// cancelBeforeLearn cancels the run just before each learn request.
type cancelBeforeLearn struct {
	stages
	cancel context.CancelFunc
}

func (c cancelBeforeLearn) learn(ctx context.Context, pb *messages.PreparedBatch) (*learnerReply, error) {
	c.cancel()
	return c.stages.learn(ctx, pb)
}

// TestLearnerTimeoutStopsRun: a learner that does not answer in time is an
// error that ends the run (ErrNoAnswer), not a skipped step: the request
// is still in its mailbox and will run, so the step cannot be retried or
// recorded as skipped.
func TestLearnerTimeoutStopsRun(t *testing.T) {
	s := testSettings(t, testConfig(t, nil))
	m := testModels(t, s)
	p := StartPipeline(s, testEnv(), m, testControl(s), s.pipeline, nil)
	b, err := p.Trainer.produce(context.Background(), 0)
	p.Stop()
	if err != nil {
		t.Fatal(err)
	}
	opt := s.pipeline
	opt.RequestTimeout = time.Microsecond // shorter than any learner step
	p2 := StartPipeline(s, testEnv(), m, testControl(s), opt, nil)
	defer p2.Stop()
	_, err = p2.Trainer.consume(context.Background(), 0, b, true)
	var skipped *SkipError
	if !errors.Is(err, ErrNoAnswer) || errors.As(err, &skipped) {
		t.Errorf("consume error %v: want ErrNoAnswer, not a skip", err)
	}
}

// TestRunRemovesDirectoryItCreatedOnEarlyFailure: a run that fails or is
// interrupted after creating its directory but before any metrics line
// or checkpoint removes the directory, so the same name can be used
// again; inputs checkable up front (a bad model.checkpoint config, a
// dataset prompt longer than the context, a run too large for memory)
// are refused before the directory exists.
func TestRunRemovesDirectoryItCreatedOnEarlyFailure(t *testing.T) {
	tiny, _ := gpu.Preset("tiny")
	m, _ := gpu.NewModel(tiny, 1)
	corrupt := t.TempDir()
	if err := gpu.SaveCheckpoint(corrupt, m, nil); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(corrupt, gpu.WeightsFileName), []byte("not safetensors"), 0o644)
	badConfig := t.TempDir()
	os.WriteFile(filepath.Join(badConfig, "config.json"), []byte(`{"model_type": "llama", "vocab_size": 2000000000}`), 0o644)
	long := filepath.Join(t.TempDir(), "long.jsonl")
	os.WriteFile(long, []byte(`{"prompt":"`+string(bytes.Repeat([]byte("1"), 80))+`=","answer":"2"}`+"\n"), 0o644)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		mutate func(*config.Config)
		want   string // "" for no error
		output string
	}{
		{"corrupt weights", context.Background(), func(c *config.Config) { c.Model.Checkpoint = corrupt }, "safetensors", "removed "},
		{"interrupted warm start", cancelled, func(c *config.Config) { c.Train.WarmStartSteps = 50 }, "interrupted during the warm start: nothing saved", "removed "},
		{"bad checkpoint config", context.Background(), func(c *config.Config) { c.Model.Checkpoint = badConfig }, "config: model.checkpoint = ", ""},
		{"prompt too long", context.Background(), func(c *config.Config) { c.Task.Dataset = long }, "problem 1: prompt of 82 tokens (BOS included) leaves no room", ""},
		{"too large for memory", context.Background(), func(c *config.Config) { c.Train.PromptsPerStep = 1 << 30 }, "gpu: not enough memory: training", ""},
	} {
		cfg := runConfig(t, tc.mutate)
		for attempt := 1; attempt <= 2; attempt++ { // the second run is not refused for an existing directory
			var out bytes.Buffer
			err := Run(tc.ctx, cfg, &out)
			if (tc.want == "") != (err == nil) || (err != nil && !bytes.Contains([]byte(err.Error()), []byte(tc.want))) {
				t.Errorf("%s, run %d: err = %v, want %q", tc.name, attempt, err, tc.want)
			}
			if !bytes.Contains(out.Bytes(), []byte(tc.output)) {
				t.Errorf("%s: output %q lacks %q", tc.name, out.String(), tc.output)
			}
			if _, statErr := os.Stat(filepath.Join(cfg.Output.Dir, "run")); !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("%s, run %d: run directory left behind (%v)", tc.name, attempt, statErr)
			}
		}
	}
}

// TestRunKeepsDirectoryOnFailedResume: a resume that fails (here on a
// trainer_state.json edited to a negative step, which the checkpoint's
// manifest catches first) leaves the run as it was.
func TestRunKeepsDirectoryOnFailedResume(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) { c.Train.Steps, c.Train.EvalEvery = 2, 0 })
	if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(cfg.Output.Dir, "run")
	state := filepath.Join(run, "checkpoints", "step-2", runlog.TrainerStateFile)
	if err := os.WriteFile(state, []byte(`{"format_version": 1, "step": -5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Train.Resume, cfg.Train.Steps = run, 4
	err := Run(context.Background(), cfg, &bytes.Buffer{})
	if !errors.Is(err, runlog.ErrDamaged) || !bytes.Contains([]byte(err.Error()), []byte("trainer_state.json does not match its SHA-256")) {
		t.Fatalf("resume: err = %v, want the edited file named", err)
	}
	for _, f := range []string{"config.yaml", "metrics.jsonl", "checkpoints/step-2/model.safetensors", "reference/model.safetensors"} {
		if _, err := os.Stat(filepath.Join(run, f)); err != nil {
			t.Errorf("%s gone after a failed resume: %v", f, err)
		}
	}
}

// TestLearningRateSchedule: optim.schedule and optim.warmup_steps reach the
// learner (they were ignored: every run used a constant rate). The rate of
// each step is logged as train/learning_rate.
func TestLearningRateSchedule(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		warmup   int
		want     []float64 // × optim.lr, steps 1..4
	}{
		{config.ScheduleConstant, 0, []float64{1, 1, 1, 1}},
		{config.ScheduleConstant, 2, []float64{0.5, 1, 1, 1}},
		{config.ScheduleLinear, 0, []float64{1, 0.75, 0.5, 0.25}},
		{config.ScheduleLinear, 2, []float64{0.5, 1, 1, 0.5}},
		{config.ScheduleCosine, 0, []float64{1, 0.5 + 0.5*math.Sqrt2/2, 0.5, 0.5 - 0.5*math.Sqrt2/2}},
	} {
		cfg := runConfig(t, func(c *config.Config) {
			c.Optim.Schedule, c.Optim.WarmupSteps = tc.schedule, tc.warmup
			c.Train.EvalEvery, c.Train.CheckpointEvery, c.Output.SampleEvery = 0, 0, 0
		})
		if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		recs, err := rlRecords(filepath.Join(cfg.Output.Dir, "run", "metrics.jsonl"))
		if err != nil || len(recs) != len(tc.want) {
			t.Fatalf("%s: %d records, err %v", tc.schedule, len(recs), err)
		}
		for i, r := range recs {
			if got, want := r.Values["train/learning_rate"], tc.want[i]*cfg.Optim.LR; math.Abs(got-want) > 1e-12 {
				t.Errorf("%s warmup %d: step %d learning rate %g, want %g", tc.schedule, tc.warmup, r.Step, got, want)
			}
		}
	}
}

// rlRecords reads a run's metrics.jsonl without its line 0 (the starting
// policy's evaluation): one record per RL step written.
func rlRecords(path string) ([]runlog.Record, error) {
	recs, err := runlog.ReadMetrics(path)
	if len(recs) > 0 && recs[0].Step == 0 {
		recs = recs[1:]
	}
	return recs, err
}

// TestResumeRangeChecksState: state that passes its checkpoint's manifest
// (re-sealed after the edit, as a tool writing a bad state would) is still
// range-checked on resume: NaN weights, a negative second moment and a
// beta of 1e308 are refused naming the value.
func TestResumeRangeChecksState(t *testing.T) {
	for _, tc := range []struct {
		name, file, from, to, want string
	}{
		{"beta 1e308", rewards.ControllerStateFile, `"beta": 0`, `"beta": 1e308`, "beta = 1e+308: must be in [0, 1e+06]"},
		{"negative tau", rewards.ControllerStateFile, `"tau": 0.5`, `"tau": -1`, "tau = -1: must be in [0, 1e+06]"},
	} {
		cfg := runConfig(t, func(c *config.Config) { c.Train.Steps, c.Train.EvalEvery, c.Train.CheckpointEvery = 2, 0, 0 })
		if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		run := filepath.Join(cfg.Output.Dir, "run")
		ckpt := filepath.Join(run, runlog.CheckpointsDir, "step-2")
		path := filepath.Join(ckpt, tc.file)
		data, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(data, []byte(tc.from)) {
			t.Fatalf("%s: %s lacks %s (%v): %s", tc.name, tc.file, tc.from, err, data)
		}
		os.WriteFile(path, bytes.Replace(data, []byte(tc.from), []byte(tc.to), 1), 0o644)
		if err := runlog.Seal(ckpt); err != nil {
			t.Fatal(err)
		}
		cfg.Train.Resume, cfg.Train.Steps = run, 4
		err = Run(context.Background(), cfg, &bytes.Buffer{})
		if !errors.Is(err, runlog.ErrBadCheckpoint) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: resume err %v, want ErrBadCheckpoint saying %q", tc.name, err, tc.want)
		}
	}
}

// TestResumeFromStepZero: a new run checkpoints step 0 (the policy RL
// starts from) before its first step, so a run killed after its warm start
// and before any other checkpoint resumes, and takes the steps the
// uninterrupted run took.
func TestResumeFromStepZero(t *testing.T) {
	metrics := func(cfg *config.Config) []runlog.Record {
		t.Helper()
		recs, err := rlRecords(filepath.Join(cfg.Output.Dir, "run", runlog.MetricsFile))
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	quiet := func(c *config.Config) { c.Train.EvalEvery, c.Train.CheckpointEvery, c.Train.Steps = 0, 0, 3 }
	straight := runConfig(t, quiet)
	if err := Run(context.Background(), straight, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	killed := runConfig(t, quiet)
	if err := Run(context.Background(), killed, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(killed.Output.Dir, "run")
	steps, err := runlog.CompleteSteps(filepath.Join(run, runlog.CheckpointsDir))
	if err != nil || fmt.Sprint(steps) != "[0 3]" {
		t.Fatalf("checkpoints %v (%v), want [0 3]", steps, err)
	}
	os.RemoveAll(filepath.Join(run, runlog.CheckpointsDir, "step-3")) // killed before it
	killed.Train.Resume = run
	var out bytes.Buffer
	if err := Run(context.Background(), killed, &out); err != nil {
		t.Fatalf("resume from step 0: %v\n%s", err, out.String())
	}
	want, got := metrics(straight), metrics(killed)
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("%d and %d records, want 3", len(got), len(want))
	}
	for i := range got {
		if got[i].Values["train/loss"] != want[i].Values["train/loss"] {
			t.Errorf("step %d loss: resumed %v, straight %v", i+1, got[i].Values["train/loss"], want[i].Values["train/loss"])
		}
	}
}

// TestRunKeepsCheckpoints: output.keep_checkpoints keeps the newest N
// checkpoints and the one with the best greedy accuracy.
func TestRunKeepsCheckpoints(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) {
		c.Train.Steps, c.Train.CheckpointEvery, c.Train.EvalEvery, c.Output.KeepCheckpoints = 8, 1, 2, 2
		c.Output.SampleEvery = 0
	})
	if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(cfg.Output.Dir, "run")
	steps, err := runlog.CompleteSteps(filepath.Join(run, runlog.CheckpointsDir))
	if err != nil {
		t.Fatal(err)
	}
	best, acc := -1, -1.0
	recs, _ := rlRecords(filepath.Join(run, runlog.MetricsFile))
	for _, r := range recs {
		if a, ok := r.Values[runlog.KeyEvalGreedyAccuracy]; ok && a >= acc {
			best, acc = r.Step, a
		}
	}
	want := []int{7, 8}
	if best < 7 {
		want = []int{best, 7, 8}
	}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("checkpoints kept %v, want %v (the newest 2 and the best, step %d at %v)", steps, want, best, acc)
	}
}

// checkHighKLTable requires the sample file to hold want metrics.top_k_kl
// tokens, the largest per-token KL first, each with its K3 = e^d − d − 1
// of its own log-probs and the text of its token.
func checkHighKLTable(t *testing.T, path string, want int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		HighKL struct {
			Columns []string `json:"columns"`
			Data    [][]any  `json:"data"`
		} `json:"high_kl_tokens"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	hk := f.HighKL
	if !slices.Equal(hk.Columns, runlog.HighKLColumns()) || len(hk.Data) != want {
		t.Fatalf("%s: high-KL table %v with %d rows, want %d", path, hk.Columns, len(hk.Data), want)
	}
	col := func(row []any, name string) any { return row[slices.Index(hk.Columns, name)] }
	prev := math.Inf(1)
	for _, row := range hk.Data {
		kl, old, lp := col(row, "kl").(float64), col(row, "logp_old").(float64), col(row, "logp_new").(float64)
		if d := lp - old; kl > prev || math.Abs(kl-(math.Exp(d)-d-1)) > 1e-12 || col(row, "token") == "" {
			t.Errorf("high-KL row %v: not sorted, not its own K3 or no token text", row)
		}
		prev = kl
	}
}

// TestSkipHintNamesTimeout: a step skipped because a stage timed out
// names the stage's timeout (a part relayed through later stages, the
// time it waited) and the setting that bounds it, one refused
// memory the settings that lower it; other skips add nothing.
func TestSkipHintNamesTimeout(t *testing.T) {
	timeouts := map[messages.Stage]time.Duration{messages.Stage_GENERATE: 90 * time.Second}
	r := &runner{settings: &settings{record: recordSettings{timeouts: timeouts}}}
	if got := r.skipHint(&SkipError{Stage: messages.Stage_GENERATE, Reason: messages.SkipReason_TIMEOUT}); !strings.Contains(got, "its timeout, 1m30s") || !strings.Contains(got, "cluster.request_timeout") {
		t.Errorf("timeout hint %q", got)
	}
	relayed := &SkipError{Stage: messages.Stage_GENERATE, Reason: messages.SkipReason_TIMEOUT, Waited: 4 * time.Minute}
	if got := r.skipHint(relayed); !strings.Contains(got, "the stages it went through, 4m0s") {
		t.Errorf("timeout hint of a relayed part %q, want the time it waited", got)
	}
	memory := &SkipError{Stage: messages.Stage_LEARN, Reason: messages.SkipReason_INTERNAL,
		Err: fmt.Errorf("learner-1: learner step: %v: a learner batch of 32 sequences × 80 tokens needs 3.2 GB", gpu.ErrMemory)}
	if got := r.skipHint(memory); !strings.Contains(got, "train.micro_batch") {
		t.Errorf("memory hint %q", got)
	}
	if got := r.skipHint(&SkipError{Stage: messages.Stage_REWARD, Reason: messages.SkipReason_ZERO_VARIANCE, Err: ErrZeroVariance}); got != "" {
		t.Errorf("zero-variance hint %q, want none", got)
	}
}

// treeState is every file under dir with its size, modification time and
// SHA-256: what a process that writes nothing leaves as it was.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		state[path] = fmt.Sprintf("%d %s %x", info.Size(), info.ModTime(), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// TestResumeOfFinishedRunWritesNothing: resuming a run that took its last
// step and recorded its final evaluation says so in one line, naming the
// step, the accuracy and where the outputs are, and changes no file (it
// evaluated the policy again, wrote the last checkpoint again without its
// greedy accuracy, and the report).
func TestResumeOfFinishedRunWritesNothing(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) { c.Output.TensorBoard = true })
	if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(cfg.Output.Dir, "run")
	final, err := runlog.ReadFinalEval(run)
	if err != nil || final.Step != 4 || final.GreedyAccuracy == nil || final.Problems != 8 {
		t.Fatalf("final evaluation %+v (%v), want step 4's greedy accuracy on 8 problems", final, err)
	}
	before := treeState(t, run)
	cfg.Train.Resume = run
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	want := fmt.Sprintf("already done at step 4 of 4 (greedy accuracy %.1f%% on 8 held-out problems): nothing was run; outputs in %s (a larger --train.steps extends it)\n",
		100**final.GreedyAccuracy, run)
	if out.String() != want {
		t.Errorf("resume of a finished run said\n%s\nwant\n%s", out.String(), want)
	}
	if after := treeState(t, run); !maps.Equal(before, after) {
		t.Errorf("resume of a finished run changed its files:\nbefore %v\nafter  %v", before, after)
	}
}

// TestResumeRunsAnUnendedFinalEvaluation: a run killed after its last
// checkpoint, before its final evaluation ended (no final_eval.json),
// runs that evaluation once on resume, keeping the last checkpoint as it
// was (its greedy accuracy included), and then is done.
func TestResumeRunsAnUnendedFinalEvaluation(t *testing.T) {
	cfg := runConfig(t, nil)
	if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(cfg.Output.Dir, "run")
	if err := os.Remove(filepath.Join(run, runlog.FinalEvalFile)); err != nil { // what the kill left
		t.Fatal(err)
	}
	last := filepath.Join(run, runlog.CheckpointsDir, "step-4")
	kept := treeState(t, last)
	cfg.Train.Resume = run
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("resume: %v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "greedy accuracy "); n != 1 || !strings.Contains(out.String(), "done: 4 steps") {
		t.Errorf("resume before the final evaluation: %d evaluations, output\n%s\nwant one and done", n, out.String())
	}
	if final, err := runlog.ReadFinalEval(run); err != nil || final.Step != 4 {
		t.Errorf("final evaluation after resume: %+v, %v; want step 4's", final, err)
	}
	if now := treeState(t, last); !maps.Equal(kept, now) {
		t.Errorf("resume rewrote checkpoint step-4:\nbefore %v\nafter  %v", kept, now)
	}
	if st, err := runlog.LoadTrainerState(last); err != nil || st.GreedyAccuracy == nil {
		t.Errorf("checkpoint step-4 after resume: %+v, %v; want its greedy accuracy kept", st, err)
	}
	out.Reset()
	if err := Run(context.Background(), cfg, &out); err != nil || !strings.HasPrefix(out.String(), "already done at step 4 of 4") {
		t.Errorf("second resume: %v, output %q; want already done", err, out.String())
	}
}

// TestInterruptDuringFinalEvaluation: a run interrupted after its last
// step, while its final evaluation runs, records none, says where it
// stopped and how to run the evaluation, and ends ErrInterrupted (it said
// "done" and ended nil, with no evaluation measured).
func TestInterruptDuringFinalEvaluation(t *testing.T) {
	cfg := runConfig(t, func(c *config.Config) { c.Train.EvalEvery = 0 }) // evaluations off: the final evaluation is its own

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := Run(ctx, cfg, cancelOn{marker: "step 4/4", cancel: cancel})
	run := filepath.Join(cfg.Output.Dir, "run")
	want := "stopped at step 4, the last, during its final evaluation; run the evaluation with: mgrpo-node --resume " + run
	if !errors.Is(err, ErrInterrupted) || err.Error() != want {
		t.Fatalf("interrupted final evaluation: err %v, want %q (ErrInterrupted)", err, want)
	}
	if _, err := runlog.ReadFinalEval(run); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("final evaluation recorded after an interrupt: %v", err)
	}
	cfg.Train.Resume = run
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, &out); err != nil || !strings.Contains(out.String(), "done: 4 steps") {
		t.Errorf("resume: %v, output\n%s\nwant the evaluation run and done", err, out.String())
	}
}

// TestModelLabel: a run from a checkpoint is named for the checkpoint, not
// for the preset it does not use.
func TestModelLabel(t *testing.T) {
	for _, tc := range []struct {
		preset, checkpoint, want string
	}{
		{"small", "", "small"},
		{"small", "models/SmolLM2-135M-Instruct/", "SmolLM2-135M-Instruct"},
		{"small", "/data/Qwen2.5-7B Instruct", "Qwen2.5-7B-Instruct"},
		{"small", "runs/gsm8k-1/reference", "gsm8k-1"},
		{"small", "runs/gsm8k-1/checkpoints/step-200", "gsm8k-1-step-200"},
		{"small", "models/模型", "--"},
	} {
		if got := modelLabel(config.Model{Preset: tc.preset, Checkpoint: tc.checkpoint}); got != tc.want {
			t.Errorf("modelLabel(%q, %q) = %q, want %q", tc.preset, tc.checkpoint, got, tc.want)
		}
	}
}

// TestFinalEvaluationOfAnEvaluatedStep: the last step evaluates the
// policy, whether train.eval_every divides it or not, and the final
// evaluation is that one, not a second pass over the same problems with
// the same policy: an interrupt after the last step's line still ends
// "done", and the final accuracy is in the last step's metrics line.
func TestFinalEvaluationOfAnEvaluatedStep(t *testing.T) {
	for _, every := range []int{2, 3} { // 4 steps: evaluated at 2 and 4, or 3 and 4
		t.Run(fmt.Sprintf("eval_every=%d", every), func(t *testing.T) {
			cfg := runConfig(t, func(c *config.Config) { c.Train.EvalEvery = every })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out bytes.Buffer
			err := Run(ctx, cfg, io.MultiWriter(&out, cancelOn{marker: "step 4/4", cancel: cancel}))
			if err != nil || !strings.Contains(out.String(), "done: 4 steps") {
				t.Fatalf("run: %v, output\n%s\nwant done (no second evaluation to interrupt)", err, out.String())
			}
			run := filepath.Join(cfg.Output.Dir, "run")
			final, err := runlog.ReadFinalEval(run)
			if err != nil || final.GreedyAccuracy == nil || final.Problems != 8 {
				t.Fatalf("final evaluation %+v, %v", final, err)
			}
			recs, err := runlog.ReadMetrics(filepath.Join(run, runlog.MetricsFile))
			if err != nil {
				t.Fatal(err)
			}
			last := recs[len(recs)-1]
			if acc, ok := last.Values[runlog.KeyEvalGreedyAccuracy]; last.Step != 4 || !ok || acc != *final.GreedyAccuracy {
				t.Errorf("final accuracy %v; step %d's line has %v (%v): want the step's", *final.GreedyAccuracy, last.Step, acc, ok)
			}
		})
	}
}
