package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
)

// TestMemoryLimit: the Go memory limit is the plan with half again and
// 1 GiB, at most what the process can have, never below the plan.
func TestMemoryLimit(t *testing.T) {
	const gib = int64(1 << 30)
	for _, tc := range []struct {
		plan int64
		r    gpu.MemoryReading
		want int64
	}{
		{4 * gib, gpu.MemoryReading{Machine: 20 * gib, Known: true, Held: gib}, 7 * gib},
		{4 * gib, gpu.MemoryReading{Machine: 5 * gib, Known: true, Held: gib}, 6 * gib},
		{4 * gib, gpu.MemoryReading{Machine: 2 * gib, Known: true, Held: gib}, 4 * gib},
		{4 * gib, gpu.MemoryReading{Known: false}, 7 * gib},
		{0, gpu.MemoryReading{Machine: 20 * gib, Known: true}, gib},
	} {
		if got := memoryLimit(tc.plan, tc.r); got != tc.want {
			t.Errorf("memoryLimit(%d, %+v) = %d, want %d", tc.plan, tc.r, got, tc.want)
		}
	}
}

// TestSetMemoryLimit: a run sets the limit from its plan and restores the
// one before; a GOMEMLIMIT the user set is left as it is.
func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	line, restore := setMemoryLimit(1<<30, "")
	if got := debug.SetMemoryLimit(-1); got < 1<<30 || got == before || !strings.Contains(line, "GOMEMLIMIT sets another") {
		t.Errorf("limit %d (before %d), line %q; want one from the plan", got, before, line)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after the run the limit is %d, want %d", got, before)
	}
	line, restore = setMemoryLimit(1<<30, "14GiB")
	defer restore()
	if got := debug.SetMemoryLimit(-1); got != before || !strings.Contains(line, "GOMEMLIMIT=14GiB") {
		t.Errorf("with GOMEMLIMIT set: limit %d (want %d), line %q", got, before, line)
	}
}

// TestSetWorkerGC: a worker collects at workerGCPercent under a limit of
// the memory available, unless the environment sets GOGC (then nothing
// changes) or GOMEMLIMIT (then only the target does); restore puts both
// back.
func TestSetWorkerGC(t *testing.T) {
	cases := []struct {
		name, gogc, limit string
		percent           int
		newLimit          bool
	}{
		{"default", "", "", workerGCPercent, true},
		{"GOMEMLIMIT set", "", "1GiB", workerGCPercent, false},
		{"GOGC set", "50", "", -1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
			debug.SetGCPercent(gc)
			line, restore := setWorkerGC(tc.gogc, tc.limit)
			nowGC, nowLimit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
			debug.SetGCPercent(nowGC)
			restore()
			if want := tc.percent; want < 0 && nowGC != gc || want >= 0 && nowGC != want {
				t.Errorf("GC percent %d (before %d), want %d", nowGC, gc, tc.percent)
			}
			if known := gpu.ReadMemory().Known; (nowLimit != limit) != (tc.newLimit && known) {
				t.Errorf("memory limit %d (before %d), want a new one: %v", nowLimit, limit, tc.newLimit && known)
			}
			if (line == "") != (tc.gogc != "") {
				t.Errorf("line %q", line)
			}
			if g, l := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1); g != gc || l != limit {
				t.Errorf("restored to %d, %d; want %d, %d", g, l, gc, limit)
			}
			debug.SetGCPercent(gc)
		})
	}
}

// TestFitHint: a run that does not fit is told the largest value of each
// memory knob that makes it fit, each computed: it fits, one more does not.
func TestFitHint(t *testing.T) {
	cfg := testConfig(t, func(c *config.Config) {
		c.Model.Preset = "base"
		c.Train.PromptsPerStep, c.Generation.NumGenerations, c.Generation.MaxCompletionLen = 64, 16, 40
	})
	s := testSettings(t, cfg)
	prompt, _, err := longestPrompt(s.step)
	if err != nil {
		t.Fatal(err)
	}
	need := runBytes(cfg, s.model, prompt)
	avail := need * 3 / 4
	_, hint := fitHint(cfg, s.model, prompt, avail)
	for _, k := range memoryKnobs() {
		v := 0
		for _, part := range strings.Split(strings.TrimPrefix(hint, "it fits with "), ", or ") {
			if key, rest, ok := strings.Cut(part, " "); ok && key == k.key {
				if _, err := fmt.Sscan(rest, &v); err != nil {
					t.Fatalf("%s in %q: %v", k.key, hint, err)
				}
			}
		}
		if low := k.with(*cfg, k.lo); v == 0 && runBytes(&low, s.model, prompt) <= avail {
			t.Errorf("hint %q does not name %s, which fits at %d", hint, k.key, k.lo)
			continue
		}
		if v == 0 {
			continue
		}
		fits, next := k.with(*cfg, v), k.with(*cfg, v+1)
		if runBytes(&fits, s.model, prompt) > avail || runBytes(&next, s.model, prompt) <= avail {
			t.Errorf("%s %d: needs %d, %d needs %d; want the largest value under %d", k.key, v,
				runBytes(&fits, s.model, prompt), v+1, runBytes(&next, s.model, prompt), avail)
		}
	}
	if key, got := fitHint(cfg, s.model, prompt, 1); !strings.Contains(got, "no value") || key != "model" {
		t.Errorf("with 1 byte: %s: %q, want model: nothing fits", key, got)
	}
}

// TestRunMicroBatch: train.micro_batch reaches the learners (the warm
// start's and RL's) and the plan, and a run in passes of 3 sequences
// takes the steps a whole-batch run takes, to float rounding.
func TestRunMicroBatch(t *testing.T) {
	losses := map[int][]float64{}
	for _, micro := range []int{0, 3} {
		cfg := runConfig(t, func(c *config.Config) { c.Train.MicroBatch, c.Train.Steps, c.Train.EvalEvery = micro, 3, 0 })
		s := testSettings(t, cfg)
		if got := s.optim.learnerConfig(s.optim.rl, gpu.CPU{}).MicroBatch; got != micro {
			t.Errorf("micro_batch %d: the learners get %d", micro, got)
		}
		if err := Run(context.Background(), cfg, io.Discard); err != nil {
			t.Fatal(err)
		}
		recs, err := rlRecords(filepath.Join(cfg.Output.Dir, "run", "metrics.jsonl"))
		if err != nil || len(recs) != 3 {
			t.Fatalf("micro_batch %d: %d records, %v", micro, len(recs), err)
		}
		for _, r := range recs {
			losses[micro] = append(losses[micro], r.Values["train/loss"])
		}
	}
	for i, l := range losses[0] {
		if m := losses[3][i]; math.Abs(m-l) > 1e-4*max(1, math.Abs(l)) {
			t.Errorf("step %d: loss %g in passes of 3, %g whole", i+1, m, l)
		}
	}
	cfg := testConfig(t, nil)
	whole := runBytes(cfg, testSettings(t, cfg).model, 10)
	cfg.Train.MicroBatch = 2
	if part := runBytes(cfg, testSettings(t, cfg).model, 10); part >= whole {
		t.Errorf("the plan in passes of 2: %d bytes, whole batches %d; want less", part, whole)
	}
}

// TestCUDARunHostBytes: a GPU run's host estimate counts the weights and a
// checkpoint's copies, not the CPU engine's workspaces, which live in GPU
// memory there: Qwen2.5-0.5B's shape would otherwise be refused on a host
// with memory to spare for it, or get a Go memory limit sized for the CPU.
func TestCUDARunHostBytes(t *testing.T) {
	model, err := gpu.Preset("qwen2.5-0.5b")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cpu := runBytes(cfg, model, 64)
	cfg.Model.Device = "cuda"
	seq := min(64+cfg.Generation.MaxCompletionLen, model.Context)
	if got, want := runBytes(cfg, model, 64), 4*model.WeightBytes()+int64(heldBytes(cfg, 64, seq)); got != want || got >= cpu {
		t.Errorf("cuda host estimate %d bytes, want %d (4 × the weights and what the host holds), under the CPU's %d", got, want, cpu)
	}
	if what := runMemoryWhat(cfg); !strings.Contains(what, "GPU run") {
		t.Errorf("what a cuda estimate counts: %q", what)
	}
}

// TestRunBytesCountsCarelessSettings: a huge train.warm_start_batch,
// train.max_staleness or train.eval_prompts, each once outside the plan
// (an eval_prompts of 1e9 crashed the run out of memory after preflight
// passed it), makes the plan refuse, names that setting as the key of a
// configuration error that also wraps gpu.ErrMemory, and the hint says
// the value that fits; train.micro_batch above the batch changes nothing.
func TestRunBytesCountsCarelessSettings(t *testing.T) {
	const huge = 1_000_000_000
	for _, tc := range []struct {
		key    string
		modify func(c *config.Config)
		grows  bool
	}{
		{"train.warm_start_batch", func(c *config.Config) { c.Train.WarmStartSteps, c.Train.WarmStartBatch = 1, huge }, true},
		{"train.max_staleness", func(c *config.Config) { c.Train.MaxStaleness, c.Train.Steps = huge, huge }, true},
		{"train.eval_prompts", func(c *config.Config) { c.Train.EvalPrompts = huge }, true},
		{"train.micro_batch", func(c *config.Config) { c.Train.MicroBatch = huge }, false},
	} {
		for _, device := range []string{"cpu", "cuda"} {
			base := testConfig(t, func(c *config.Config) { c.Model.Device = device })
			cfg := testConfig(t, func(c *config.Config) { c.Model.Device = device; tc.modify(c) })
			model := testSettings(t, base).model
			before, after := runBytes(base, model, 10), runBytes(cfg, model, 10)
			if !tc.grows {
				if after != before {
					t.Errorf("%s %s: plan %d bytes, %d without it; want the same", device, tc.key, after, before)
				}
				continue
			}
			if after < 100<<30 {
				t.Errorf("%s %s = %d: plan %d bytes, want at least 100 GiB", device, tc.key, huge, after)
			}
			key, hint := fitHint(cfg, model, 10, 2*before)
			if key != tc.key || !strings.Contains(hint, tc.key+" ") {
				t.Errorf("%s %s: fitHint names %s: %q", device, tc.key, key, hint)
			}
		}
	}
	err := error(&memoryError{key: "train.eval_prompts", hint: "it fits with train.eval_prompts 9", err: fmt.Errorf("%w: training needs 2 GB", gpu.ErrMemory)})
	var ce *config.Error
	if !errors.As(err, &ce) || !errors.Is(err, config.ErrConflict) || !errors.Is(err, gpu.ErrMemory) || ce.Key != "train.eval_prompts" {
		t.Errorf("memory refusal %q: want a config.Error naming train.eval_prompts that wraps gpu.ErrMemory", err)
	}
}
