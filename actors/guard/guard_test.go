package guard

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/rewards"
)

// healthy are the metrics of a step of a run that learns: structured
// policy, weights away from uniform, mixed rewards.
func healthy() map[string]float64 {
	return map[string]float64{
		rewards.KeyPolicyEntropy: 1.0, rewards.KeyWeightEntropy: 1.6, rewards.KeyReward: 0.5, rewards.KeyAccuracy: 0.4,
		rewards.MetricPrefix + "grad_norm": 0.8, rewards.MetricPrefix + "frac_reward_zero_std": 0.3,
	}
}

// ln 98 = 4.585, the vocabulary of the default tokenizer; ln 8 = 2.079.
var listwise = Settings{Vocab: 98, Group: 8, Objective: rewards.ObjectiveMaxEntListwise}

// raised is an alert a rules case expects.
type raised struct {
	step  int
	rule  string
	level Level
}

// ruleCase is a run of steps, healthy but for change, and the alerts its
// guards must raise.
type ruleCase struct {
	name   string
	s      Settings
	steps  int
	change func(step int, m map[string]float64)
	want   []raised
	knob   string // in the first alert's text
}

// ruleCases are TestRules's runs.
var ruleCases = []ruleCase{
	{name: "healthy run is silent", s: listwise, steps: 600, change: func(int, map[string]float64) {}},
	{
		// The trailing 20-step mean after a jump from 1 to 3 nats at step
		// 31 is 1 + 0.1j at step 30+j: it passes 0.5 ln 98 = 2.2925 at
		// j = 13 and never reaches the stop level 0.8 ln 98 = 3.67.
		name: "policy entropy rises: warn", s: listwise, steps: 200,
		change: func(step int, m map[string]float64) {
			if step > 30 {
				m[rewards.KeyPolicyEntropy] = 3
			}
		},
		want: []raised{{43, RulePolicyEntropy, Warn}}, knob: "controller.tau.enabled=true",
	},
	{
		// 4.2 nats: mean 1 + 0.16j passes 2.2925 at j = 9 (warn) and
		// 0.8 ln 98 = 3.668 at j = 17 (stop).
		name: "policy entropy towards uniform: stop", s: listwise, steps: 200,
		change: func(step int, m map[string]float64) {
			if step > 30 {
				m[rewards.KeyPolicyEntropy] = 4.2
			}
		},
		want: []raised{{39, RulePolicyEntropy, Warn}, {47, RulePolicyEntropy, Stop}},
	},
	{
		name: "grpo names its own knob", s: Settings{Vocab: 98, Group: 8, Objective: rewards.ObjectiveGRPO}, steps: 60,
		change: func(step int, m map[string]float64) {
			if step > 30 {
				m[rewards.KeyPolicyEntropy] = 3
			}
		},
		want: []raised{{43, RulePolicyEntropy, Warn}}, knob: "optim.lr",
	},
	{
		name: "a policy that starts uniform is not a collapse", s: listwise, steps: 200,
		change: func(_ int, m map[string]float64) { m[rewards.KeyPolicyEntropy] = 4.5 },
	},
	{
		// ln 8 − 0.08 = 1.999: judged once 50 steps with a gradient exist.
		name: "weights pinned at uniform", s: listwise, steps: 120,
		change: func(_ int, m map[string]float64) { m[rewards.KeyWeightEntropy] = 2.05 },
		want:   []raised{{50, RuleUniformWeights, Warn}}, knob: "maxent.tau",
	},
	{
		name: "uniform weights only matter for listwise", s: Settings{Vocab: 98, Group: 8, Objective: rewards.ObjectiveGRPO}, steps: 120,
		change: func(_ int, m map[string]float64) { m[rewards.KeyWeightEntropy] = 2.05 },
	},
	{
		// Counted, the tied steps' uniform weights would lift the mean
		// over 1.999.
		name: "weights of tied steps do not count", s: listwise, steps: 120,
		change: func(step int, m map[string]float64) {
			m[rewards.KeyWeightEntropy] = 1.99
			if step%2 == 0 {
				m[rewards.KeyWeightEntropy], m[rewards.MetricPrefix+"grad_norm"] = math.Log(8), 0
			}
		},
		want: []raised{{50, RuleTiedGroups, Stop}},
	},
	{
		name: "twelve tied steps warn", s: listwise, steps: 200,
		change: func(step int, m map[string]float64) {
			if step <= 12 {
				m[rewards.MetricPrefix+"frac_reward_zero_std"] = 1
			}
		},
		want: []raised{{50, RuleTiedGroups, Warn}}, knob: "generation.num_generations",
	},
	{
		name: "tied groups build up to a stop", s: listwise, steps: 200,
		change: func(step int, m map[string]float64) {
			if step > 50 && step%2 == 0 {
				m[rewards.MetricPrefix+"grad_norm"] = 0
			}
		},
		want: []raised{{70, RuleTiedGroups, Warn}, {100, RuleTiedGroups, Stop}},
	},
	{
		name: "reward flat at zero", s: listwise, steps: 100,
		change: func(_ int, m map[string]float64) { m[rewards.KeyReward], m[rewards.KeyAccuracy] = 0.001, 0 },
		want:   []raised{{50, RuleNoReward, Stop}, {50, RuleNoCorrect, Warn}}, knob: "rewards",
	},
	{
		name: "one correct sample in 50 steps is enough", s: listwise, steps: 100,
		change: func(step int, m map[string]float64) {
			m[rewards.KeyAccuracy] = 0
			if step%50 == 25 {
				m[rewards.KeyAccuracy] = 1.0 / 64
			}
		},
	},
}

func TestRules(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.name, func(t *testing.T) {
			w := New(tc.s)
			var got []Alert
			for step := 1; step <= tc.steps; step++ {
				m := healthy()
				tc.change(step, m)
				got = append(got, w.Observe(step, m)...)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("alerts %v, want %v", got, tc.want)
			}
			for i, a := range got {
				if w := tc.want[i]; a.Step != w.step || a.Rule != w.rule || a.Level != w.level {
					t.Errorf("alert %d: %+v, want step %d level %d %s", i, a, w.step, w.level, w.rule)
				}
				if strings.Contains(a.Text, "\n") || a.Text == "" {
					t.Errorf("alert %q is not one line", a.Text)
				}
			}
			if tc.knob != "" && !strings.Contains(got[0].Text, tc.knob) {
				t.Errorf("alert %q does not name the knob %s", got[0].Text, tc.knob)
			}
		})
	}
}

func TestWarmStart(t *testing.T) {
	cases := []struct {
		acc  float64
		warn bool
	}{{0.051, true}, {0.199, true}, {0.2, false}, {0.758, false}, {math.NaN(), false}}
	for _, tc := range cases {
		a := WarmStart(tc.acc, 0.4, 1000, false)
		if (a != nil) != tc.warn {
			t.Errorf("WarmStart(%.3f, 0.4): %v, want alert %v", tc.acc, a, tc.warn)
		}
		if a != nil && (!strings.Contains(a.Text, "train.warm_start_steps") || a.Key() != "guard/warm_start") {
			t.Errorf("WarmStart(%.3f): %q (key %s) does not name the knob or its key", tc.acc, a.Text, a.Key())
		}
	}
}

// TestRulesNameWarmStartThatApplies: a run from model.checkpoint without a
// warm start is told to turn one on, not to lengthen one it does not run
// (train.warm_start_steps alone does nothing there).
func TestRulesNameWarmStartThatApplies(t *testing.T) {
	for _, cold := range []bool{false, true} {
		w := New(Settings{Vocab: 98, Group: 8, Objective: rewards.ObjectiveGRPO, NoWarmStart: cold})
		var got []Alert
		for step := 1; step <= 50; step++ {
			m := healthy()
			m[rewards.KeyReward], m[rewards.KeyAccuracy] = 0.001, 0
			got = append(got, w.Observe(step, m)...)
		}
		want, not := "train.warm_start_steps", "train.warm_start_from_checkpoint"
		if cold {
			want, not = not, want
		}
		if len(got) != 2 {
			t.Fatalf("no warm start %t: alerts %v, want no_reward and no_correct", cold, got)
		}
		for _, a := range got {
			if !strings.Contains(a.Text, want) || strings.Contains(a.Text, not) {
				t.Errorf("no warm start %t: %s: %q; want %s named, not %s", cold, a.Rule, a.Text, want, not)
			}
		}
	}
}

// TestWarmStartKnobsApply: the warning names only knobs that change the
// run: a larger model.preset for random weights, never for a warm start
// from model.checkpoint (whose dimensions the preset does not touch).
func TestWarmStartKnobsApply(t *testing.T) {
	for _, tc := range []struct {
		fromCheckpoint bool
		want, not      string
	}{{false, "model.preset", "model.checkpoint"}, {true, "model.checkpoint", "model.preset"}} {
		a := WarmStart(0.05, 0.4, 150, tc.fromCheckpoint)
		if a == nil || !strings.Contains(a.Text, tc.want) || strings.Contains(a.Text, tc.not) {
			t.Errorf("from a checkpoint %t: %v; want it to name %s and not %s", tc.fromCheckpoint, a, tc.want, tc.not)
		}
	}
}

// TestStateRoundTrip: a Watch restored from another's JSON at any step
// raises exactly the alerts the other raises on the steps that follow, and
// ends with the same state, so a resumed run's guards are those of the
// uninterrupted run.
func TestStateRoundTrip(t *testing.T) {
	steps := func(step int) map[string]float64 {
		m := healthy()
		m[rewards.KeyPolicyEntropy] = 1 + 0.02*float64(step%7)
		if step > 60 {
			m[rewards.KeyPolicyEntropy] = 4.2
			m[rewards.MetricPrefix+"frac_reward_zero_std"] = 1
			m[rewards.KeyReward], m[rewards.KeyAccuracy] = 0, 0
		}
		return m
	}
	for _, at := range []int{0, 5, 30, 61, 75, 120} {
		a, b := New(listwise), New(listwise)
		for step := 1; step <= at; step++ {
			a.Observe(step, steps(step))
		}
		saved, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(saved, b); err != nil {
			t.Fatalf("restore at step %d: %v", at, err)
		}
		for step := at + 1; step <= 200; step++ {
			if got, want := b.Observe(step, steps(step)), a.Observe(step, steps(step)); !reflect.DeepEqual(got, want) {
				t.Fatalf("restored at step %d: step %d alerts %+v, the uninterrupted watch's %+v", at, step, got, want)
			}
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("restored at step %d: final state differs", at)
		}
	}
}

// TestStateRefusesImpossible: a damaged guard state is refused naming
// what is wrong, and the Watch is left as it was.
func TestStateRefusesImpossible(t *testing.T) {
	long := make([]string, window+1)
	for i := range long {
		long[i] = "1"
	}
	for _, tc := range []struct{ json, want string }{
		{`{"reward": [` + strings.Join(long, ",") + `]}`, "more than the window"},
		{`{"raised": {"no_such_rule": 1}}`, `unknown rule "no_such_rule"`},
		{`{"raised": {"no_reward": 7}}`, "level 7"},
		{`{"step": -3}`, "impossible"},
		{`{"entropy_start_n": 99}`, "impossible"},
		{`{"tied": [1, "x"]}`, "cannot unmarshal"},
	} {
		w := New(listwise)
		w.Observe(1, healthy())
		before, _ := json.Marshal(w)
		err := json.Unmarshal([]byte(tc.json), w)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.json, err, tc.want)
		}
		if after, _ := json.Marshal(w); string(after) != string(before) {
			t.Errorf("%s: a refused state changed the watch", tc.json)
		}
	}
}
