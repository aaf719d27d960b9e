package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// writeFile puts text in a temp file with the given extension.
func writeFile(t *testing.T, ext, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cfg"+ext)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	c, err := Load(Sources{})
	if err != nil {
		t.Fatalf("Load(empty) = %v", err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("Load(empty) differs from Default():\n got %+v\nwant %+v", c, Default())
	}
}

// TestPrecedence sets train.max_staleness (a nested snake_case key) and
// controller.tau.lr (three levels) in each layer and checks which wins.
func TestPrecedence(t *testing.T) {
	yamlFile := writeFile(t, ".yaml", "train:\n  max_staleness: 2\n  steps: 7\ncontroller:\n  tau:\n    lr: 0.2\n")
	tomlFile := writeFile(t, ".toml", "[train]\nmax_staleness = 2\nsteps = 7\n[controller.tau]\nlr = 0.2\n")
	cases := []struct {
		name          string
		file          string
		env           []string
		args          []string
		wantStaleness int
		wantSteps     int
		wantTauLR     float64
	}{
		{name: "defaults", wantStaleness: 0, wantSteps: 200, wantTauLR: 0.05},
		{name: "yaml file over defaults", file: yamlFile, wantStaleness: 2, wantSteps: 7, wantTauLR: 0.2},
		{name: "toml file over defaults", file: tomlFile, wantStaleness: 2, wantSteps: 7, wantTauLR: 0.2},
		{name: "env over defaults", env: []string{"MGRPO_TRAIN__MAX_STALENESS=3", "MGRPO_CONTROLLER__TAU__LR=0.3"}, wantStaleness: 3, wantSteps: 200, wantTauLR: 0.3},
		{name: "env over file", file: yamlFile, env: []string{"MGRPO_TRAIN__MAX_STALENESS=3", "MGRPO_CONTROLLER__TAU__LR=0.3"}, wantStaleness: 3, wantSteps: 7, wantTauLR: 0.3},
		{name: "flag over env and file", file: yamlFile, env: []string{"MGRPO_TRAIN__MAX_STALENESS=3"}, args: []string{"--train.max_staleness=4", "--controller.tau.lr", "0.4"}, wantStaleness: 4, wantSteps: 7, wantTauLR: 0.4},
		{name: "unset flags do not override", file: yamlFile, env: []string{"MGRPO_TRAIN__MAX_STALENESS=3"}, args: []string{"--train.seed=9"}, wantStaleness: 3, wantSteps: 7, wantTauLR: 0.2},
		{name: "unrelated env ignored", env: []string{"HOME=/x", "MGRPO_JAEGER_BIN=/bin/j"}, wantStaleness: 0, wantSteps: 200, wantTauLR: 0.05},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", tc.file}, args...)
			}
			c, err := loadArgs(args, tc.env)
			if err != nil {
				t.Fatalf("loadArgs: %v", err)
			}
			if c.Train.MaxStaleness != tc.wantStaleness || c.Train.Steps != tc.wantSteps || c.Controller.Tau.LR != tc.wantTauLR {
				t.Errorf("max_staleness, steps, tau.lr = %d, %d, %g; want %d, %d, %g",
					c.Train.MaxStaleness, c.Train.Steps, c.Controller.Tau.LR, tc.wantStaleness, tc.wantSteps, tc.wantTauLR)
			}
		})
	}
}

func TestLayerTypes(t *testing.T) {
	env := []string{
		"MGRPO_REWARDS__FUNCS=accuracy, format",
		"MGRPO_REWARDS__WEIGHTS=1,0.1",
		"MGRPO_TRACE__SLOW_STEP=1500ms",
		"MGRPO_TRAIN__DYNAMIC_SAMPLING=true",
		"MGRPO_CLUSTER__SEEDS=10.0.0.1:8090,10.0.0.2:8090",
		"MGRPO_METRICS__TOP_K_KL=5",
	}
	c, err := loadArgs([]string{"--model.tie_embeddings", "--role", "learner"}, env) // --resume: TestLoadResume
	if err != nil {
		t.Fatal(err)
	}
	if c.Metrics.TopKKL != 5 {
		t.Errorf("metrics.top_k_kl from the environment = %d, want 5", c.Metrics.TopKKL)
	}
	if f, err := loadArgs([]string{"--metrics.top_k_kl", "7"}, env); err != nil || f.Metrics.TopKKL != 7 {
		t.Errorf("--metrics.top_k_kl 7 over the environment: %d (%v)", f.Metrics.TopKKL, err)
	}
	if got := c.Rewards.Funcs; !reflect.DeepEqual(got, []string{"accuracy", "format"}) {
		t.Errorf("rewards.funcs = %q", got)
	}
	if got := c.Rewards.Weights; !reflect.DeepEqual(got, []float64{1, 0.1}) {
		t.Errorf("rewards.weights = %v", got)
	}
	if c.Trace.SlowStep != "1500ms" || !c.Train.DynamicSampling || len(c.Cluster.Seeds) != 2 {
		t.Errorf("slow_step %v, dynamic_sampling %v, seeds %q", c.Trace.SlowStep, c.Train.DynamicSampling, c.Cluster.Seeds)
	}
	if !c.Model.TieEmbeddings || c.Cluster.Role != RoleLearner {
		t.Errorf("tie_embeddings %v, role %q", c.Model.TieEmbeddings, c.Cluster.Role)
	}
}

// TestLoadErrors checks that each bad input gives one line naming the key,
// wrapping the right sentinel.
func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name     string
		file     string // YAML text ("" = no file)
		env      []string
		args     []string
		want     error
		wantLine string
	}{
		{name: "unknown key in file", file: "train:\n  max_stalenes: 2\n", want: ErrUnknownKey,
			wantLine: "config: train.max_stalenes: unknown key (did you mean train.max_staleness?) (file "},
		{name: "unknown section in file", file: "trainer:\n  steps: 2\n", want: ErrUnknownKey, wantLine: "config: trainer: unknown key"},
		{name: "section as scalar", file: "train: 5\n", want: ErrType, wantLine: "config: train = 5: must be a section"},
		{name: "wrong type in file", file: "train: {steps: \"abc\"}\n", want: ErrType, wantLine: `config: train.steps = "abc": must be an integer (file `},
		{name: "wrong type bool", file: "train: {dynamic_sampling: 3}\n", want: ErrType, wantLine: "config: train.dynamic_sampling = 3: must be true or false"},
		{name: "wrong list item", file: "rewards: {weights: [1, x]}\n", want: ErrType, wantLine: "config: rewards.weights = [1 x]: item 1 must be a number"},
		{name: "bad duration", file: "cluster: {request_timeout: fast}\n", want: ErrType, wantLine: `config: cluster.request_timeout = "fast": must be a duration`},
		{name: "bad slow step", file: "trace: {slow_step: fast}\n", want: ErrRange, wantLine: `config: trace.slow_step = "fast": must be auto, 0 or a positive duration such as 1.5s`},
		{name: "out of range in file", file: "train: {max_staleness: -1}\n", want: ErrRange, wantLine: "config: train.max_staleness = -1: must be 0 or more"},
		{name: "unknown env key", env: []string{"MGRPO_TRAIN__MAX_STALENES=1"}, want: ErrUnknownKey, wantLine: "config: train.max_stalenes: unknown key (did you mean train.max_staleness?) (env MGRPO_TRAIN__MAX_STALENES)"},
		{name: "env single underscore", env: []string{"MGRPO_TRAIN_STEPS=1"}, want: ErrUnknownKey, wantLine: "config: train_steps: unknown key (write MGRPO_TRAIN__KEY, with two underscores) (env MGRPO_TRAIN_STEPS)"},
		{name: "env prefix alone", env: []string{"MGRPO_=1"}, want: ErrUnknownKey, wantLine: "config: MGRPO_: unknown key (write MGRPO_SECTION__KEY) (env MGRPO_)"},
		{name: "env names a section", env: []string{"MGRPO_CONTROLLER__TAU=1"}, want: ErrUnknownKey, wantLine: "config: controller.tau: is a section, not a key"},
		{name: "env wrong type", env: []string{"MGRPO_GENERATION__TEMPERATURE=hot"}, want: ErrType, wantLine: `config: generation.temperature = "hot": must be a number (env MGRPO_GENERATION__TEMPERATURE)`},
		{name: "unknown flag", args: []string{"--train.stepz=3"}, want: ErrUnknownKey, wantLine: "config: train.stepz: unknown key (did you mean train.steps?) (flag --train.stepz)"},
		{name: "flag wrong type", args: []string{"--train.steps=abc"}, want: ErrType, wantLine: `config: train.steps = "abc": must be an integer (flag --train.steps)`},
		{name: "flag without value", args: []string{"--train.steps"}, want: ErrType, wantLine: "config: train.steps: needs a value (flag --train.steps)"},
		{name: "flag out of range", args: []string{"--generation.top_p=1.5"}, want: ErrRange, wantLine: "config: generation.top_p = 1.5: must be in (0, 1]"},
		{name: "alias conflict", args: []string{"--role=learner", "--cluster.role=generator"}, want: ErrConflict, wantLine: `config: cluster.role = "generator": conflicts with --role "learner"`},
		{name: "positional argument", args: []string{"extra"}, want: ErrUnknownKey, wantLine: "config: args"},
		{name: "missing file", args: []string{"--config", "/nonexistent/x.yaml"}, want: ErrSource, wantLine: `config: config = "/nonexistent/x.yaml": cannot read: no such file or directory`},
		{name: "unknown recipe", args: []string{"--config", "recipe:nope"}, want: ErrSource, wantLine: `config: config = "recipe:nope": unknown recipe (known: addition-grpo`},
		{name: "unparsable yaml", file: "train: [\n", want: ErrSource, wantLine: "cannot parse: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, ".yaml", tc.file)}, args...)
			}
			_, err := loadArgs(args, tc.env)
			if err == nil {
				t.Fatalf("loadArgs succeeded, want %v", tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %q does not wrap %v", err, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error %q is %T, not *Error", err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, tc.wantLine) {
				t.Errorf("error = %q, want one line containing %q", msg, tc.wantLine)
			}
		})
	}
}

func TestRecipesLoad(t *testing.T) {
	names := Recipes()
	if len(names) != 9 {
		t.Fatalf("Recipes() = %q, want 3 tasks × 3 objectives", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			task, objective, _ := strings.Cut(name, "-")
			c, err := Load(Sources{File: RecipePrefix + name})
			if err != nil {
				t.Fatal(err)
			}
			if c.Task.Name != task || c.MaxEnt.Objective != objective {
				t.Errorf("task %q objective %q, want %q %q (from the name)", c.Task.Name, c.MaxEnt.Objective, task, objective)
			}
			text, _ := Recipe(name)
			for _, line := range strings.Split(string(text), "\n") {
				if strings.Contains(line, ": ") && !strings.HasSuffix(line, ":") && !strings.Contains(line, "# why") && !strings.HasPrefix(line, "#") && !strings.Contains(line, "name:") && !strings.Contains(line, "max_number") {
					t.Errorf("override without a # why comment: %q", line)
				}
			}
		})
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	c, err := loadArgs([]string{"--config", "recipe:wordproblems-maxent_listwise", "--trace.slow_step=3s", "--cluster.seeds=a:1,b:2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	text, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Load(Sources{File: writeFile(t, ".yaml", string(text))})
	if err != nil {
		t.Fatalf("loading the dump: %v\n%s", err, text)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("dump does not load back equal:\n got %+v\nwant %+v", back, c)
	}
}

func TestFlagsOfTheCallerPass(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.Bool("verbose", false, "")
	AddFlags(fs)
	if err := ParseFlags(fs, []string{"--verbose", "--train.steps=3"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(Sources{Flags: fs})
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.Steps != 3 {
		t.Errorf("train.steps = %d, want 3", c.Train.Steps)
	}
}

// loadArgs parses args as flags (see AddFlags), reads the file named by
// --config and layers everything with env, as the binary does.
// Positional arguments are refused.
func loadArgs(args, env []string) (*Config, error) {
	fs := pflag.NewFlagSet("mgrpo-node", pflag.ContinueOnError)
	AddFlags(fs)
	if err := ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, &Error{Key: "args", Value: fmt.Sprintf("%q", fs.Args()), Reason: "unexpected positional arguments", Err: ErrUnknownKey}
	}
	file, _ := fs.GetString("config")
	return Load(Sources{File: file, Env: env, Flags: fs})
}

// TestParseRoundTrip: the YAML a learner sends a worker node parses back
// into the same configuration.
func TestParseRoundTrip(t *testing.T) {
	c, err := loadArgs([]string{"--config", "recipe:countdown-maxent_listwise", "--train.prompts_per_part=3", "--cluster.generators=2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	text, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(text, "config from the learner")
	if err != nil {
		t.Fatal(err)
	}
	again, err := back.YAML()
	if err != nil || !bytes.Equal(again, text) || back.Train.PromptsPerPart != 3 || back.Cluster.Generators != 2 {
		t.Errorf("parsed config renders as\n%s\nwant\n%s", again, text)
	}
	if _, err := Parse([]byte("train:\n  steps: -1\n"), "bad"); err == nil || !strings.Contains(err.Error(), "train.steps") {
		t.Errorf("a bad value parsed: %v", err)
	}
}

// TestParseSkipsRetiredKeys: a run's config.yaml written by an earlier
// build, holding a key that no longer exists (cluster.provider), parses,
// with its other values; a key that never existed is still refused.
func TestParseSkipsRetiredKeys(t *testing.T) {
	c, err := Parse([]byte("cluster:\n  provider: automanaged\n  port: 4123\n"), "old run's config.yaml")
	if err != nil || c.Cluster.Port != 4123 {
		t.Fatalf("Parse: %v (port %v), want the retired key skipped", err, c)
	}
	if _, err := Parse([]byte("cluster:\n  providr: x\n"), "config.yaml"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("an unknown key beside the retired one: %v, want ErrUnknownKey", err)
	}
}
