package actors

// Regression tests of the fault probe of issue 10: each reproduces one
// fault through Run alone (they also build, and fail, on the code before
// the fix). docs/RELIABILITY.md lists them.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/optim"
	"github.com/mgrpo/mgrpo/gpu/safetensors"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// quietRun is runConfig without evaluations and sample tables.
func quietRun(t *testing.T, mutate func(*config.Config)) *config.Config {
	return runConfig(t, func(c *config.Config) {
		c.Train.EvalEvery, c.Output.SampleEvery = 0, 0
		if mutate != nil {
			mutate(c)
		}
	})
}

// latestWeights loads the weights of the run's newest complete checkpoint.
func latestWeights(t *testing.T, run string) (int, []float32) {
	t.Helper()
	dir, step, err := runlog.LatestComplete(filepath.Join(run, runlog.CheckpointsDir))
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Read(filepath.Join(dir, gpu.WeightsFileName))
	if err != nil {
		t.Fatal(err)
	}
	var w []float32
	for _, name := range f.Tensors() {
		v, _, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		w = append(w, v...)
	}
	return step, w
}

// TestFaultNonFiniteUpdateNeverLands: optim.lr 1e308 (config refuses it;
// Run is given it directly) turns every weight NaN in one AdamW step. The
// learner rolls each such step back and records it as skipped, and after
// train.max_skipped_steps (default 10) skips in a row the run stops with
// an error and a checkpoint whose weights are the last good ones. Before
// the fix, every checkpoint was all NaN and the run ended "done".
func TestFaultNonFiniteUpdateNeverLands(t *testing.T) {
	cfg := quietRun(t, func(c *config.Config) { c.Train.Steps, c.Train.CheckpointEvery = 12, 4 })
	cfg.Optim.LR = 1e308
	err := Run(context.Background(), cfg, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "stopped at step 10: 10 steps in a row skipped") {
		t.Errorf("run: err %v, want it stopped at step 10 after 10 skipped steps", err)
	}
	run := filepath.Join(cfg.Output.Dir, "run")
	step, w := latestWeights(t, run)
	for i, x := range w {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("checkpoint step-%d: weight %d is %v", step, i, x)
		}
	}
	recs, rerr := rlRecords(filepath.Join(run, runlog.MetricsFile))
	if rerr != nil || len(recs) == 0 {
		t.Fatalf("metrics: %d records, %v", len(recs), rerr)
	}
	if r := recs[0].Values[keySkipReason]; r != float64(messages.SkipReason_BAD_UPDATE) {
		t.Errorf("step 1: skip reason %v, want BAD_UPDATE (%d)", r, messages.SkipReason_BAD_UPDATE)
	}
}

// TestFaultTimeoutNoStageMeetsStops: a request timeout no stage can meet
// (the probe's MGRPO_CLUSTER__REQUEST_TIMEOUT=1ns, which config now
// refuses) stops the run with an error naming the timeout, never "done":
// here at its first checkpoint, which the learner cannot write in 1ns.
func TestFaultTimeoutNoStageMeetsStops(t *testing.T) {
	cfg := quietRun(t, func(c *config.Config) { c.Train.Steps, c.Train.CheckpointEvery = 12, 0 })
	cfg.Cluster.RequestTimeout = time.Nanosecond
	var out bytes.Buffer
	err := Run(context.Background(), cfg, &out)
	if err == nil || !strings.Contains(err.Error(), "1ns (cluster.request_timeout)") || strings.Contains(out.String(), "done:") {
		t.Errorf("run: err %v, output %q; want an error naming the timeout", err, out.String())
	}
}

// TestFaultDamagedStateRefusedOnResume: a checkpoint whose weights,
// optimiser moments or controller state were damaged (NaN weights, NaN or
// negative moments, beta 1e308: what the probe wrote) is refused on resume
// with a line naming the file, and the run is left as it was. Before the
// fix such a resume trained on, saving NaN checkpoints.
func TestFaultDamagedStateRefusedOnResume(t *testing.T) {
	setTensor := func(path, suffix string, v float32) error {
		f, err := safetensors.Read(path)
		if err != nil {
			return err
		}
		var ts []safetensors.Tensor
		for _, name := range f.Tensors() {
			vals, shape, err := f.Float32(name)
			if err != nil {
				return err
			}
			vals = append([]float32(nil), vals...)
			if strings.HasSuffix(name, suffix) {
				vals[0] = v
			}
			ts = append(ts, safetensors.Tensor{Name: name, Shape: shape, F32: vals})
		}
		return safetensors.Write(path, ts, f.Metadata())
	}
	for _, tc := range []struct {
		name, file string
		damage     func(path string) error
	}{
		{"NaN weight", gpu.WeightsFileName, func(p string) error { return setTensor(p, "model.norm.weight", float32(math.NaN())) }},
		{"NaN moment", optim.StateFileName, func(p string) error { return setTensor(p, ".exp_avg", float32(math.NaN())) }},
		{"negative second moment", optim.StateFileName, func(p string) error { return setTensor(p, ".exp_avg_sq", -1) }},
		{"beta 1e308", rewards.ControllerStateFile, func(p string) error {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, bytes.Replace(data, []byte(`"beta": 0`), []byte(`"beta": 1e308`), 1), 0o644)
		}},
	} {
		cfg := quietRun(t, func(c *config.Config) { c.Train.Steps, c.Train.CheckpointEvery = 2, 0 })
		if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		run := filepath.Join(cfg.Output.Dir, "run")
		path := filepath.Join(run, runlog.CheckpointsDir, "step-2", tc.file)
		if err := tc.damage(path); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cfg.Train.Resume, cfg.Train.Steps = run, 4
		err := Run(context.Background(), cfg, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.file) {
			t.Errorf("%s: resume err %v, want one naming %s", tc.name, err, tc.file)
		}
		if step, _ := latestWeights(t, run); step != 2 {
			t.Errorf("%s: a refused resume wrote checkpoint step-%d", tc.name, step)
		}
	}
}

// TestFaultBadMetricsLineKeepsTheRest: one unreadable line in
// metrics.jsonl is moved aside at the next resume and every readable line
// after it is kept (it used to cut the file at the bad line, silently).
func TestFaultBadMetricsLineKeepsTheRest(t *testing.T) {
	cfg := quietRun(t, func(c *config.Config) { c.Train.Steps, c.Train.CheckpointEvery = 4, 2 })
	if err := Run(context.Background(), cfg, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(cfg.Output.Dir, "run")
	path := filepath.Join(run, runlog.MetricsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	bad := -1
	for i, l := range lines {
		if strings.HasPrefix(l, `{"step":2,`) {
			bad, lines[i] = i, `{"step":2,"train/loss":`+"\x00garbage\n"
		}
	}
	if bad < 0 {
		t.Fatalf("no step 2 line in %q", data)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg.Train.Resume, cfg.Train.Steps = run, 6
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	recs, err := rlRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, r := range recs {
		steps = append(steps, r.Step)
	}
	if fmt.Sprint(steps) != "[1 3 4 5 6]" {
		t.Errorf("steps after resume %v, want [1 3 4 5 6]: only the bad line removed", steps)
	}
	aside, err := os.ReadFile(filepath.Join(run, "metrics.jsonl.unreadable"))
	if err != nil || string(aside) != lines[bad] {
		t.Errorf("metrics.jsonl.unreadable = %q (%v), want the bad line", aside, err)
	}
	if !strings.Contains(out.String(), "1 unreadable or out-of-order lines moved to metrics.jsonl.unreadable") {
		t.Errorf("the resume did not say it moved a line:\n%s", out.String())
	}
}

// TestFaultAsyncResumeIsExact: an asynchronous run (train.max_staleness
// 2) resumed from a checkpoint takes the steps the uninterrupted run took,
// bit for bit: each batch is generated from the weights of a step fixed by
// its own step number, and a checkpoint keeps those weights. Before the
// fix the resumed batches used the checkpoint's weights (staleness 0
// instead of 2) and the final model differed.
func TestFaultAsyncResumeIsExact(t *testing.T) {
	async := func(steps int) func(*config.Config) {
		return func(c *config.Config) {
			c.Train.MaxStaleness, c.Train.Steps, c.Train.CheckpointEvery = 2, steps, 0
		}
	}
	straight := quietRun(t, async(8))
	if err := Run(context.Background(), straight, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	split := quietRun(t, async(4))
	if err := Run(context.Background(), split, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	split.Train.Steps, split.Train.Resume = 8, filepath.Join(split.Output.Dir, "run")
	if err := Run(context.Background(), split, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	want, err := rlRecords(filepath.Join(straight.Output.Dir, "run", runlog.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := rlRecords(filepath.Join(split.Output.Dir, "run", runlog.MetricsFile))
	if err != nil || len(got) != 8 || len(want) != 8 {
		t.Fatalf("%d and %d records (%v), want 8", len(got), len(want), err)
	}
	for i := range got {
		for k, v := range want[i].Values {
			if strings.HasPrefix(k, "time/") || strings.HasPrefix(k, "perf/") {
				continue
			}
			if g := got[i].Values[k]; g != v && !(math.IsNaN(g) && math.IsNaN(v)) {
				t.Errorf("step %d %s: resumed %v, straight %v", got[i].Step, k, g, v)
			}
		}
	}
	if lag := want[5].Values["train/staleness_max"]; lag != 2 {
		t.Errorf("step 6 of the straight run: staleness %v, want 2 (the test must exercise stale batches)", lag)
	}
	_, a := latestWeights(t, filepath.Join(straight.Output.Dir, "run"))
	_, b := latestWeights(t, filepath.Join(split.Output.Dir, "run"))
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("final weights differ between the resumed and the straight run")
	}
}

// TestFaultDerivedNamesNeverClash: a run without output.name whose derived
// name is held by a running process (two runs started in the same second)
// takes the next free suffix instead of failing "in use".
func TestFaultDerivedNamesNeverClash(t *testing.T) {
	cfg := quietRun(t, func(c *config.Config) { c.Train.Steps, c.Output.Name = 1, "" })
	prefix := fmt.Sprintf("%s-%s-%s-", cfg.Task.Name, cfg.Model.Preset, cfg.MaxEnt.Objective)
	now := time.Now().UTC()
	for s := range 3 { // the names of this second and the next two, held by "other runs"
		held, err := runlog.Create(cfg.Output.Dir, prefix+now.Add(time.Duration(s)*time.Second).Format("20060102-150405"))
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
	}
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(out.String(), "-2\n") {
		t.Errorf("run did not take a -2 name:\n%s", out.String())
	}
}
