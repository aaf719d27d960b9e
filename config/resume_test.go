package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestCheckResume changes one key of the saved config per case and checks
// that exactly the keys that change what the checkpoint means are refused,
// with the key, the new and the saved value in the line.
func TestCheckResume(t *testing.T) {
	cases := []struct {
		name   string
		modify func(c *Config)
		want   string // the whole error line, "" for allowed
	}{
		{"unchanged", func(c *Config) {}, ""},
		{"train.steps extended", func(c *Config) { c.Train.Steps = 400 }, ""},
		{"train.checkpoint_every", func(c *Config) { c.Train.CheckpointEvery = 5 }, ""},
		{"train.eval_every", func(c *Config) { c.Train.EvalEvery = 0 }, ""},
		{"train.eval_prompts", func(c *Config) { c.Train.EvalPrompts = 8 }, ""},
		{"train.micro_batch", func(c *Config) { c.Train.MicroBatch = 8 }, ""},
		{"train.resume", func(c *Config) { c.Train.Resume = "runs/x" }, ""},
		{"output.log_every", func(c *Config) { c.Output.LogEvery = 10 }, ""},
		{"output.sample_every", func(c *Config) { c.Output.SampleEvery = 0 }, ""},
		{"output.sample_rows", func(c *Config) { c.Output.SampleRows = 2 }, ""},
		{"metrics.top_k_kl", func(c *Config) { c.Metrics.TopKKL = 5 }, ""},
		{"cluster.*", func(c *Config) { c.Cluster.Port = 9000; c.Cluster.RequestTimeout = time.Minute }, ""},
		{"trace.*", func(c *Config) { c.Trace.OTLPEndpoint = "127.0.0.1:4317"; c.Trace.SampleRatio = 0.5 }, ""},
		{"model.device", func(c *Config) { c.Model.Device = "cuda" }, ""},
		{"model.dtype", func(c *Config) { c.Model.Device, c.Model.DType = "cuda", "bf16" }, ""},
		{"model.checkpoint (the run loads its own)", func(c *Config) { c.Model.Checkpoint = "" }, ""},
		{"nil and empty weights are equal", func(c *Config) { c.Rewards.Weights = []float64{} }, ""},

		{"maxent.objective", func(c *Config) { c.MaxEnt.Objective = ObjectiveMaxEntListwise },
			`config: maxent.objective = "maxent_listwise": cannot change on resume (the run was saved with "grpo"; start a new run to change it)`},
		{"task.name", func(c *Config) { c.Task.Name = "countdown" },
			`config: task.name = "countdown": cannot change on resume (the run was saved with "addition"; start a new run to change it)`},
		{"model.preset", func(c *Config) { c.Model.Preset = "base" },
			`config: model.preset = "base": cannot change on resume (the run was saved with "small"; start a new run to change it)`},
		{"model.seed", func(c *Config) { c.Model.Seed = 2 },
			`config: model.seed = 2: cannot change on resume (the run was saved with 1; start a new run to change it)`},
		{"rewards.funcs", func(c *Config) { c.Rewards.Funcs = []string{"accuracy", "format"} },
			`config: rewards.funcs = [accuracy format]: cannot change on resume (the run was saved with [accuracy]; start a new run to change it)`},
		{"generation.temperature", func(c *Config) { c.Generation.Temperature = 0.7 },
			`config: generation.temperature = 0.7: cannot change on resume (the run was saved with 1; start a new run to change it)`},
		{"controller.tau.lr", func(c *Config) { c.Controller.Tau.LR = 0.1 },
			`config: controller.tau.lr = 0.1: cannot change on resume (the run was saved with 0.05; start a new run to change it)`},
		{"loss.type", func(c *Config) { c.Loss.Type = LossGRPO },
			`config: loss.type = "grpo": cannot change on resume (the run was saved with "bnpo"; start a new run to change it)`},
		{"optim.lr", func(c *Config) { c.Optim.LR = 3e-4 },
			`config: optim.lr = 0.0003: cannot change on resume (the run was saved with 0.0001; start a new run to change it)`},
		{"train.seed", func(c *Config) { c.Train.Seed = 7 },
			`config: train.seed = 7: cannot change on resume (the run was saved with 1; start a new run to change it)`},
		{"train.prompts_per_step", func(c *Config) { c.Train.PromptsPerStep = 4 },
			`config: train.prompts_per_step = 4: cannot change on resume (the run was saved with 16; start a new run to change it)`},
		{"train.max_staleness", func(c *Config) { c.Train.MaxStaleness = 2 },
			`config: train.max_staleness = 2: cannot change on resume (the run was saved with 0; start a new run to change it)`},
		{"output.dir", func(c *Config) { c.Output.Dir = "elsewhere" },
			`config: output.dir = "elsewhere": cannot change on resume (the run was saved with "runs"; start a new run to change it)`},
		{"first difference in key order", func(c *Config) { c.MaxEnt.Objective = ObjectiveMaxEntListwise; c.Task.Name = "countdown" },
			`config: task.name = "countdown": cannot change on resume (the run was saved with "addition"; start a new run to change it)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			saved := Default()
			saved.Model.Checkpoint = "start/ckpt"
			eff := Default()
			eff.Model.Checkpoint = "start/ckpt"
			tc.modify(eff)
			err := CheckResume(saved, eff)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckResume = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("CheckResume = %v,\nwant %s", err, tc.want)
			}
			if !errors.Is(err, ErrConflict) {
				t.Errorf("CheckResume error does not wrap ErrConflict")
			}
		})
	}
}

// savedRun writes a run directory whose config.yaml is the defaults with
// modify applied, as the trainer does at the start of a run.
func savedRun(t *testing.T, modify func(c *Config)) string {
	t.Helper()
	c := Default()
	modify(c)
	text, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RunConfigFile), text, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLoadResume checks that a resume starts from the run's config.yaml
// (not the defaults), lets env and flags change only what resume allows,
// and refuses --config and a directory without config.yaml.
func TestLoadResume(t *testing.T) {
	run := savedRun(t, func(c *Config) {
		c.Train.Steps = 60
		c.Train.CheckpointEvery = 20
		c.Model.Preset = "tiny"
		c.Model.Checkpoint = "start/ckpt" // the run started from a checkpoint
	})
	empty := t.TempDir()
	other := writeFile(t, ".yaml", "train:\n  steps: 7\n")
	cases := []struct {
		name      string
		args      []string
		env       []string
		wantSteps int
		wantErr   string // a substring of the one-line error; "" for success
	}{
		{name: "saved config is the base", args: []string{"--resume", run}, wantSteps: 60},
		{name: "resume by key", args: []string{"--train.resume", run}, wantSteps: 60},
		{name: "resume by env", env: []string{"MGRPO_TRAIN__RESUME=" + run}, wantSteps: 60},
		{name: "steps extended by flag", args: []string{"--resume", run, "--train.steps", "200"}, wantSteps: 200},
		{name: "steps extended by env", args: []string{"--resume", run}, env: []string{"MGRPO_TRAIN__STEPS=90"}, wantSteps: 90},
		{name: "same value is no change", args: []string{"--resume", run, "--task.name", "addition"}, wantSteps: 60},
		{name: "task and objective changed", args: []string{"--resume", run, "--task.name", "countdown", "--maxent.objective", "maxent_listwise"},
			wantErr: `config: task.name = "countdown": cannot change on resume (the run was saved with "addition"; start a new run to change it)`},
		{name: "objective changed by env", args: []string{"--resume", run}, env: []string{"MGRPO_MAXENT__OBJECTIVE=maxent_listwise", "MGRPO_CONTROLLER__TAU__ENABLED=true"},
			wantErr: `config: maxent.objective = "maxent_listwise": cannot change on resume`},
		{name: "with --config", args: []string{"--config", other, "--resume", run},
			wantErr: `config: config = "` + other + `": cannot be combined with train.resume (a resumed run takes its configuration from its checkpoint)`},
		{name: "no config.yaml", args: []string{"--resume", empty},
			wantErr: `config: train.resume = "` + empty + `": has no config.yaml (not a run directory)`},
		{name: "no directory", args: []string{"--resume", filepath.Join(empty, "nope")},
			wantErr: `config: train.resume = "` + filepath.Join(empty, "nope") + `": no such directory`},
		{name: "model.checkpoint still refused", args: []string{"--resume", run, "--model.checkpoint", "x"},
			wantErr: `config: train.resume = "` + run + `": cannot be combined with model.checkpoint`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadArgs(tc.args, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("loadArgs = %v,\nwant one line starting %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadArgs: %v", err)
			}
			if c.Train.Steps != tc.wantSteps || c.Train.CheckpointEvery != 20 || c.Model.Preset != "tiny" {
				t.Errorf("steps, checkpoint_every, preset = %d, %d, %q; want %d, 20, \"tiny\" (from config.yaml)",
					c.Train.Steps, c.Train.CheckpointEvery, c.Model.Preset, tc.wantSteps)
			}
			if c.Train.Resume != run || c.Model.Checkpoint != "" {
				t.Errorf("resume, model.checkpoint = %q, %q; want %q, \"\"", c.Train.Resume, c.Model.Checkpoint, run)
			}
		})
	}
}

// TestLoadResumeBadSavedConfig names the saved file when it cannot be read.
func TestLoadResumeBadSavedConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, RunConfigFile)
	if err := os.WriteFile(file, []byte("train:\n  stepz: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := loadArgs([]string{"--resume", dir}, nil)
	want := "config: train.stepz: unknown key (did you mean train.steps?) (file " + file + ")"
	if err == nil || err.Error() != want {
		t.Fatalf("loadArgs = %v, want %s", err, want)
	}
}

// TestREADMEFlagsExample loads the flags example of README.md: two reward
// functions with the default (empty) weights.
func TestREADMEFlagsExample(t *testing.T) {
	c, err := loadArgs([]string{"--train.max_staleness=2", "--controller.tau.lr", "0.1", "--rewards.funcs=accuracy,format"}, nil)
	if err != nil {
		t.Fatalf("loadArgs: %v", err)
	}
	if len(c.Rewards.Weights) != 0 || strings.Join(c.Rewards.Funcs, ",") != "accuracy,format" {
		t.Errorf("rewards funcs, weights = %v, %v; want [accuracy format], []", c.Rewards.Funcs, c.Rewards.Weights)
	}
}

// TestCheckResumeDecayingSchedule: a cosine or linear learning-rate decay
// is laid out over train.steps, so extending such a run would jump the
// rate back up; resume refuses it and still allows a constant run's.
func TestCheckResumeDecayingSchedule(t *testing.T) {
	for _, schedule := range []string{ScheduleCosine, ScheduleLinear} {
		saved, eff := Default(), Default()
		saved.Optim.Schedule, eff.Optim.Schedule = schedule, schedule
		eff.Train.Steps = saved.Train.Steps * 2
		want := `config: train.steps = 400: cannot change on resume with optim.schedule ` + schedule + `: its decay spans the saved 200 steps`
		if err := CheckResume(saved, eff); err == nil || err.Error() != want {
			t.Errorf("%s: CheckResume = %v, want %s", schedule, err, want)
		}
	}
}

// TestLoadResumeTruncatedConfig: a saved configuration cut short (here
// before task:, the fault probe's case, which resumed a listwise run as
// GRPO at another learning rate) is refused naming the first missing
// section, never completed from the defaults.
func TestLoadResumeTruncatedConfig(t *testing.T) {
	run := savedRun(t, func(c *Config) {
		c.MaxEnt.Objective, c.MaxEnt.Tau, c.Optim.LR = ObjectiveMaxEntListwise, 0.5, 3e-5
	})
	file := filepath.Join(run, RunConfigFile)
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Index(string(text), "\ntask:")
	if err := os.WriteFile(file, text[:cut+1], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = loadArgs([]string{"--resume", run}, nil)
	want := "config: task: missing from the saved configuration (the file was cut short or damaged; nothing was resumed) (file " + file + ")"
	if err == nil || err.Error() != want {
		t.Fatalf("loadArgs = %v,\nwant %s", err, want)
	}
}

// TestLoadResumeRunConfig: with Sources.RunConfig the saved configuration
// comes from it (the trainer's verified checkpoint copy), not from the
// run's config.yaml, and its error is one line naming train.resume.
func TestLoadResumeRunConfig(t *testing.T) {
	run := savedRun(t, func(c *Config) { c.Train.Steps = 60 })
	ckpt := Default()
	ckpt.Train.Steps = 90 // extended by a resume that then crashed
	text, err := ckpt.YAML()
	if err != nil {
		t.Fatal(err)
	}
	load := func(rc func(string) ([]byte, string, error)) (*Config, error) {
		fs := pflag.NewFlagSet("mgrpo-node", pflag.ContinueOnError)
		AddFlags(fs)
		if err := ParseFlags(fs, []string{"--resume", run}); err != nil {
			return nil, err
		}
		return Load(Sources{Flags: fs, RunConfig: rc})
	}
	c, err := load(func(dir string) ([]byte, string, error) {
		if dir != run {
			t.Errorf("RunConfig(%q), want the run directory %q", dir, run)
		}
		return text, "file ckpt/config.yaml", nil
	})
	if err != nil || c.Train.Steps != 90 {
		t.Fatalf("Load = %v, train.steps %v; want the checkpoint's 90", err, c)
	}
	_, err = load(func(string) ([]byte, string, error) {
		return nil, "", errors.New("checkpoint x: model.safetensors does not match\nits SHA-256")
	})
	want := `config: train.resume = "` + run + `": checkpoint x: model.safetensors does not match its SHA-256`
	if err == nil || err.Error() != want || !errors.Is(err, ErrSource) {
		t.Fatalf("Load = %v, want %s", err, want)
	}
}
