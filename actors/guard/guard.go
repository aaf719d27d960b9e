// Package guard watches a run's step metrics for what a person would want
// to be told while it trains: a policy running towards uniform, listwise
// weights pinned at uniform, steps where every group's rewards tie, no
// reward at all, no correct sample, a warm start far below its target.
//
// A Watch sees every RL step's flattened metrics ("train/..." keys of
// rewards.StepMetrics) and returns an Alert the first time a rule holds at
// each level: Warn, or Stop for the rules whose condition means the run
// will not recover. The thresholds were chosen on 4 collapsing and 27
// healthy runs (docs/RESULTS.md §8): every rule fired in the collapsing
// runs before their policy became uniform, and none fired in a healthy one.
package guard

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/mgrpo/mgrpo/rewards"
)

// Level is how serious an Alert is.
type Level int

// The levels: Warn says so and trains on; Stop says the run should end.
const (
	Warn Level = 1
	Stop Level = 2
)

// KeyPrefix starts the metrics key of each rule ("guard/policy_entropy"):
// its value is the Level of an alert raised on that step.
const KeyPrefix = "guard/"

// Rule names, the suffix of each rule's metrics key.
const (
	RulePolicyEntropy  = "policy_entropy"
	RuleUniformWeights = "uniform_weights"
	RuleTiedGroups     = "tied_groups"
	RuleNoReward       = "no_reward"
	RuleNoCorrect      = "no_correct"
	RuleWarmStart      = "warm_start"
)

// An Alert is one rule holding at one level, with a one-line Text giving
// the numbers and the knob to turn.
type Alert struct {
	Rule  string
	Level Level
	Step  int
	Text  string
}

// Key is the alert's metrics key.
func (a Alert) Key() string { return KeyPrefix + a.Rule }

// Windows and thresholds of the rules (docs/RESULTS.md §8).
const (
	entropyStart    = 20   // RL steps whose mean policy entropy is the baseline
	entropyWindow   = 20   // trailing steps of the entropy mean
	entropyWarnFrac = 0.5  // warn above this fraction of ln V (or twice the baseline, if higher)
	entropyStopFrac = 0.8  // stop above this fraction of ln V
	window          = 50   // trailing steps of the other rules
	uniformMargin   = 0.08 // weights count as uniform within this many nats of ln K
	tiedWarn        = 10   // steps of the window with every group tied, to warn
	tiedStop        = 25   // ... to stop
	noReward        = 0.01 // mean reward below this over the window stops
	warmStartFrac   = 0.5  // a warm start under this fraction of its target warns
)

// Settings describe the run the Watch judges.
type Settings struct {
	Vocab     int               // vocabulary size V: uniform policy entropy is ln V
	Group     int               // completions per prompt K: uniform weight entropy is ln K
	Objective rewards.Objective // which rules apply and which knob to name
	// NoWarmStart is a run that starts RL from model.checkpoint as it is
	// (train.warm_start_from_checkpoint off): the warm start's knob is to
	// turn it on, as train.warm_start_steps alone changes nothing.
	NoWarmStart bool
}

// warmStart is the advice that names the warm start: a longer one, or for
// a run without one, one from its checkpoint.
func (s Settings) warmStart() string {
	if s.NoWarmStart {
		return "warm-start the checkpoint first (train.warm_start_from_checkpoint)"
	}
	return "warm-start longer (train.warm_start_steps)"
}

// Watch holds the recent metrics of a run and which alerts it has raised.
// The zero value is not usable; call New.
type Watch struct {
	s       Settings
	step    int
	entropy series // train/policy_entropy of every step

	entropyStart  float64 // sum of the first entropyStart steps' entropy
	entropyStartN int
	weights       series // train/weight_entropy of steps with a gradient (listwise)
	tied          series // 1 for a step with every group tied or no gradient
	reward        series // train/reward
	correct       series // train/accuracy
	raised        map[string]Level
}

// New returns a Watch for a run with settings s.
func New(s Settings) *Watch {
	return &Watch{s: s, raised: map[string]Level{}}
}

// Observe takes RL step step's metrics and returns the alerts raised by
// it: each rule alerts once per level. Only steps the learner took are
// observed: a skipped step has no metrics to judge.
func (w *Watch) Observe(step int, m map[string]float64) []Alert {
	w.step = step
	if v, ok := m[rewards.KeyPolicyEntropy]; ok && !math.IsNaN(v) {
		if w.entropyStartN < entropyStart {
			w.entropyStart += v
			w.entropyStartN++
		}
		w.entropy.add(v)
	}
	grad, hasGrad := m[rewards.MetricPrefix+"grad_norm"]
	tied := m[rewards.MetricPrefix+"frac_reward_zero_std"] >= 1 || (hasGrad && grad == 0)
	w.tied.add(b2f(tied))
	if v, ok := m[rewards.KeyWeightEntropy]; ok && !tied {
		w.weights.add(v)
	}
	if v, ok := m[rewards.KeyReward]; ok {
		w.reward.add(v)
	}
	if v, ok := m[rewards.KeyAccuracy]; ok {
		w.correct.add(v)
	}
	var out []Alert
	for _, rule := range []func() (string, Level, string){w.policyEntropy, w.uniformWeights, w.tiedGroups, w.noReward, w.noCorrect} {
		name, level, text := rule()
		if level > w.raised[name] {
			w.raised[name] = level
			out = append(out, Alert{Rule: name, Level: level, Step: step, Text: text})
		}
	}
	return out
}

// policyEntropy: the token-mean policy entropy's trailing mean rising
// towards uniform (ln V), the first sign of a listwise collapse. A policy
// that started near uniform (no warm start) is not judged by it.
func (w *Watch) policyEntropy() (string, Level, string) {
	e := &w.entropy
	if w.entropyStartN < entropyStart || e.n() < entropyWindow || w.s.Vocab < 2 {
		return RulePolicyEntropy, 0, ""
	}
	uniform := math.Log(float64(w.s.Vocab))
	start, now := w.entropyStart/float64(w.entropyStartN), e.meanLast(entropyWindow)
	if start >= entropyWarnFrac*uniform { // never had structure to lose: the other rules speak for it
		return RulePolicyEntropy, 0, ""
	}
	warn := max(2*start, entropyWarnFrac*uniform)
	text := fmt.Sprintf("policy entropy %.2f nats per token (mean of the last %d steps) against %.2f at the start and %.2f for a uniform policy: the policy is flattening; %s",
		now, entropyWindow, start, uniform, w.entropyKnob())
	switch {
	case now > entropyStopFrac*uniform:
		return RulePolicyEntropy, Stop, text
	case now > warn:
		return RulePolicyEntropy, Warn, text
	}
	return RulePolicyEntropy, 0, ""
}

func (w *Watch) entropyKnob() string {
	if w.s.Objective == rewards.ObjectiveMaxEntListwise || w.s.Objective == rewards.ObjectiveMaxEntEntropy {
		return "hold the weights' entropy with controller.tau.enabled=true (recipe maxent_listwise) or anchor to the reference with maxent.beta > 0"
	}
	return "anchor to the reference with maxent.beta > 0 or lower optim.lr"
}

// uniformWeights: listwise weights within uniformMargin of uniform (ln K)
// on average: the rewards no longer shape the update.
func (w *Watch) uniformWeights() (string, Level, string) {
	if w.s.Objective != rewards.ObjectiveMaxEntListwise || w.s.Group < 2 || w.weights.n() < window {
		return RuleUniformWeights, 0, ""
	}
	uniform := math.Log(float64(w.s.Group))
	if h := w.weights.meanLast(window); h >= uniform-uniformMargin {
		return RuleUniformWeights, Warn, fmt.Sprintf("listwise weight entropy %.3f nats (mean of the last %d steps with a gradient) is within %.2f of uniform (ln %d = %.3f): the rewards barely move the weights; lower maxent.tau or set controller.tau.enabled=true with a target_entropy",
			h, window, uniformMargin, w.s.Group, uniform)
	}
	return RuleUniformWeights, 0, ""
}

// tiedGroups: many recent steps where every group's rewards tie (or the
// gradient is zero), so nothing was learned from them.
func (w *Watch) tiedGroups() (string, Level, string) {
	if w.tied.n() < window {
		return RuleTiedGroups, 0, ""
	}
	n := int(math.Round(w.tied.sumLast(window)))
	text := fmt.Sprintf("%d of the last %d steps had every group's rewards tied (no gradient): raise generation.num_generations or generation.temperature, or start from a policy with mixed outcomes: %s", n, window, w.s.warmStart())
	switch {
	case n >= tiedStop:
		return RuleTiedGroups, Stop, text
	case n >= tiedWarn:
		return RuleTiedGroups, Warn, text
	}
	return RuleTiedGroups, 0, ""
}

// noReward: the mean reward flat at zero: nothing to learn from.
func (w *Watch) noReward() (string, Level, string) {
	if w.reward.n() < window {
		return RuleNoReward, 0, ""
	}
	if r := w.reward.meanLast(window); r < noReward {
		return RuleNoReward, Stop, fmt.Sprintf("mean reward %.4f over the last %d steps: no completion earns a reward; check the reward functions (rewards.*) and the task, or %s", r, window, w.s.warmStart())
	}
	return RuleNoReward, 0, ""
}

// noCorrect: not one correct sample in the window.
func (w *Watch) noCorrect() (string, Level, string) {
	if w.correct.n() < window {
		return RuleNoCorrect, 0, ""
	}
	if w.correct.sumLast(window) == 0 {
		return RuleNoCorrect, Warn, fmt.Sprintf("no correct completion in the last %d steps: RL learns only from groups with mixed outcomes; %s or raise generation.num_generations", window, w.s.warmStart())
	}
	return RuleNoCorrect, 0, ""
}

// WarmStart judges a warm start's final greedy accuracy against its
// target: nil when it is at least half the target, otherwise a warning
// (RL needs groups with mixed outcomes, which a policy that is almost
// never right rarely samples) naming the knobs that apply: a larger
// model.preset for a warm start from random weights, a stronger
// model.checkpoint for one from a checkpoint (fromCheckpoint), whose
// dimensions the preset does not change.
func WarmStart(accuracy, target float64, steps int, fromCheckpoint bool) *Alert {
	if accuracy >= warmStartFrac*target || math.IsNaN(accuracy) {
		return nil
	}
	model := "use a larger model.preset"
	if fromCheckpoint {
		model = "start from a stronger model.checkpoint"
	}
	return &Alert{Rule: RuleWarmStart, Level: Warn, Text: fmt.Sprintf("the warm start ended at %.1f%% greedy accuracy after %d steps, under half its %.0f%% target: RL will see few groups with mixed outcomes; raise train.warm_start_steps or %s",
		100*accuracy, steps, 100*target, model)}
}

// StateFile is the file name of a Watch's memory in a checkpoint, so that
// a resumed run's guards judge each step as the uninterrupted run's would.
const StateFile = "guard_state.json"

// watchState is the JSON form of a Watch's memory (not its Settings,
// which come from the run's configuration).
type watchState struct {
	Step          int              `json:"step"`
	EntropyStart  float64          `json:"entropy_start"`
	EntropyStartN int              `json:"entropy_start_n"`
	Entropy       series           `json:"policy_entropy"`
	Weights       series           `json:"weight_entropy"`
	Tied          series           `json:"tied"`
	Reward        series           `json:"reward"`
	Correct       series           `json:"accuracy"`
	Raised        map[string]Level `json:"raised"`
}

// MarshalJSON encodes what the Watch remembers of the steps it observed.
func (w *Watch) MarshalJSON() ([]byte, error) {
	return json.Marshal(watchState{Step: w.step, EntropyStart: w.entropyStart, EntropyStartN: w.entropyStartN,
		Entropy: w.entropy, Weights: w.weights, Tied: w.tied, Reward: w.reward, Correct: w.correct, Raised: w.raised})
}

// UnmarshalJSON restores what MarshalJSON encoded into a Watch made by
// New, keeping its Settings. A state no sequence of steps can leave (a
// series longer than the window or holding a value that is not finite,
// an unknown rule or level) is refused and the Watch left as it was.
func (w *Watch) UnmarshalJSON(b []byte) error {
	var st watchState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("guard state: %w", err)
	}
	if err := st.check(); err != nil {
		return fmt.Errorf("guard state: %w", err)
	}
	if st.Raised == nil {
		st.Raised = map[string]Level{}
	}
	w.step, w.entropyStart, w.entropyStartN = st.Step, st.EntropyStart, st.EntropyStartN
	w.entropy, w.weights, w.tied, w.reward, w.correct, w.raised = st.Entropy, st.Weights, st.Tied, st.Reward, st.Correct, st.Raised
	return nil
}

func (st watchState) check() error {
	if st.Step < 0 || st.EntropyStartN < 0 || st.EntropyStartN > entropyStart || math.IsNaN(st.EntropyStart) || math.IsInf(st.EntropyStart, 0) {
		return fmt.Errorf("step %d, entropy start %v over %d steps: impossible", st.Step, st.EntropyStart, st.EntropyStartN)
	}
	for name, s := range map[string]series{"policy_entropy": st.Entropy, "weight_entropy": st.Weights, "tied": st.Tied, "reward": st.Reward, "accuracy": st.Correct} {
		if len(s) > window {
			return fmt.Errorf("%s holds %d values, more than the window of %d", name, len(s), window)
		}
		for _, v := range s {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s holds %v", name, v)
			}
		}
	}
	for rule, level := range st.Raised {
		switch rule {
		case RulePolicyEntropy, RuleUniformWeights, RuleTiedGroups, RuleNoReward, RuleNoCorrect:
		default:
			return fmt.Errorf("unknown rule %q", rule)
		}
		if level != Warn && level != Stop {
			return fmt.Errorf("rule %s raised at level %d", rule, level)
		}
	}
	return nil
}

// series holds the last `window` values of one metric.
type series []float64

func (s *series) add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if *s = append(*s, v); len(*s) > window {
		*s = (*s)[1:]
	}
}

func (s series) n() int { return len(s) }

func (s series) sumLast(n int) float64 {
	sum := 0.0
	for _, x := range s[max(len(s)-n, 0):] {
		sum += x
	}
	return sum
}

func (s series) meanLast(n int) float64 { return s.sumLast(n) / float64(min(n, len(s))) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
