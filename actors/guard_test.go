package actors

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/actors/guard"
	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// TestRunGuards runs a tiny random policy rewarded only for correct
// answers: it never earns one, so every group ties from step 1 and the
// tied-groups and no-reward rules reach their stop level at step 50, the
// first step with a full window; its 3-step warm start is far below
// target. Under train.guard=stop the run ends there with a checkpoint;
// under warn it says the same and trains on; off says nothing.
func TestRunGuards(t *testing.T) {
	cases := []struct {
		guard     string
		wantSteps int    // metrics lines reach this step
		wantOut   string // in the output
	}{
		{config.GuardStop, 50, "stopped at step 50 by the tied_groups guard"},
		{config.GuardWarn, 55, "done: 55 steps"},
		{config.GuardOff, 55, "done: 55 steps"},
	}
	for _, tc := range cases {
		t.Run(tc.guard, func(t *testing.T) {
			cfg := runConfig(t, func(c *config.Config) {
				c.Train.Steps, c.Train.CheckpointEvery, c.Train.EvalEvery = 55, 0, 0
				c.Train.PromptsPerStep, c.Generation.NumGenerations = 2, 2
				c.Rewards.Funcs, c.Rewards.Weights = []string{"accuracy"}, []float64{1}
				c.Output.SampleEvery, c.Output.LogEvery = 0, 10
				c.Train.Guard = tc.guard
			})
			var out bytes.Buffer
			err := Run(context.Background(), cfg, &out)
			var stopped *stopError
			if stop := tc.guard == config.GuardStop; stop != (errors.As(err, &stopped) && stopped.Guard == guard.RuleTiedGroups && stopped.Step == 50) || (!stop && err != nil) {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output lacks %q:\n%s", tc.wantOut, out.String())
			}
			run := filepath.Join(cfg.Output.Dir, cfg.Output.Name)
			if _, err := runlog.Resolve(filepath.Join(run, runlog.CheckpointsDir, runlog.CheckpointName(tc.wantSteps))); err != nil {
				t.Errorf("no complete checkpoint at step %d: %v", tc.wantSteps, err)
			}
			got := guardKeys(t, filepath.Join(run, runlog.MetricsFile), tc.wantSteps)
			want := map[int]map[string]float64{
				0:  {"guard/warm_start": 1},
				50: {"guard/tied_groups": 2, "guard/no_reward": 2, "guard/no_correct": 1},
			}
			if tc.guard == config.GuardOff {
				want = map[int]map[string]float64{}
				if strings.Contains(out.String(), "warning") {
					t.Errorf("train.guard=off warned:\n%s", out.String())
				}
			} else {
				for _, line := range []string{"warning (warm_start): the warm start ended at", "(tied_groups) at step 50: 50 of the last 50 steps", "(no_reward) at step 50: mean reward 0.0000", "warning (no_correct) at step 50"} {
					if !strings.Contains(out.String(), line) {
						t.Errorf("output lacks %q:\n%s", line, out.String())
					}
				}
			}
			if !equalGuards(got, want) {
				t.Errorf("guard keys in metrics.jsonl %v, want %v", got, want)
			}
		})
	}
}

// guardKeys reads the guard keys of each line of a metrics file whose last
// line must be at step last: step → key → level.
func guardKeys(t *testing.T, path string, last int) map[int]map[string]float64 {
	t.Helper()
	recs, err := runlog.ReadMetrics(path)
	if err != nil || len(recs) == 0 || recs[len(recs)-1].Step != last {
		t.Fatalf("metrics: %d lines (%v), want the last at step %d", len(recs), err, last)
	}
	got := map[int]map[string]float64{}
	for _, r := range recs {
		for k, v := range r.Values {
			if strings.HasPrefix(k, guard.KeyPrefix) {
				if got[r.Step] == nil {
					got[r.Step] = map[string]float64{}
				}
				got[r.Step][k] = v
			}
		}
	}
	return got
}

func equalGuards(a, b map[int]map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for step, m := range a {
		if len(m) != len(b[step]) {
			return false
		}
		for k, v := range m {
			if b[step][k] != v {
				return false
			}
		}
	}
	return true
}
