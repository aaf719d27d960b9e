package rewards

import (
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
)

// fullStep builds a StepMetrics with every part present.
func fullStep(t *testing.T) StepMetrics {
	t.Helper()
	in := batch(4, 4, 3)
	cfg := listwiseConfig()
	cfg.RewardNames = []string{"accuracy", "format"}
	out, err := Prepare(in, cfg, 0.5, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	seedCfg := DefaultPrepareConfig()
	seedCfg.Objective, seedCfg.Seed.Enabled, seedCfg.EntropyBonusCoef = ObjectiveGRPOEntropyBonus, true, 0.2
	seedOut, err := Prepare(in, seedCfg, 0.5, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	out.Stats.Seed, out.Stats.Bonus = seedOut.Stats.Seed, seedOut.Stats.Bonus
	lengths, _ := CompletionLengths(in.TokenCounts, in.Truncated)
	div, _ := Diversity([][]int{{1, 2}, {1, 3}}, 2)
	meta := DefaultMetaController()
	meta.Enabled, meta.LR = true, 0.05
	return StepMetrics{
		Step: 12, Epoch: 0.5, LearningRate: 1e-4, GradNorm: 0.7, NumTokens: 1000, CompletionTokens: 200,
		Objective: ObjectiveMaxEntListwise,
		Loss:      LossStats{Total: 0.3, Policy: 0.25, KL: 0.05, WeightedKL: 0.005, Clip: 0.01, HasClip: true},
		Prepared:  &out.Stats, Lengths: &lengths, Diversity: &div,
		Learner: &LearnerStats{KL: 0.05, PolicyEntropy: 1.3, ClipLow: 0.4, ClipHigh: 0.2, ClipRegion: 0.6,
			ISWeightMean: 0.9, ISTruncatedFrac: 0.1, PolicyVersion: 12, StalenessMin: 1, StalenessMax: 2},
		Policy: &PolicyStats{Tokens: 200, MeanNewLogp: -1.2, PolicyConfidence: math.Exp(-1.2), HasOld: true, MeanOldLogp: -1.1,
			LogpDiffMean: -0.1, ApproxKL: 0.02, TokenKLMax: 0.3, TokenRatioMax: 1.5, HasEntropy: true, Entropy: 1.3,
			HasClip: true, ClipRatio: 0.3, ClipRatioLow: 0.1, ClipRatioHigh: 0.2},
		Controller: &ControllerMetrics{
			State: NewControllerState(0.5, 0.1, meta), PrevTau: 0.4, PrevBeta: math.NaN(),
			Tau:  TauController{Enabled: true, Target: 1.2, LR: 0.1},
			Beta: BetaController{Target: 0.05, Horizon: 100, StepSize: 0.2}, Meta: meta,
			TauLRScale: 1, KL: 0.08, WeightEntropy: 1.0, QTemperature: 1, QEpsilon: 1e-6, LenNormRef: true,
			Denominator: 0.5, Grads: ControllerGradients{Tau: 0.3, Beta: 0.4, HasTau: true, HasBeta: true},
		},
	}
}

func TestFlattenValues(t *testing.T) {
	s := fullStep(t)
	m := s.Flatten()
	want := map[string]float64{
		"train/loss": 0.3, "train/objective/maximize": -0.3, "train/global_step": 12,
		"train/grpo_objective": 0, "train/maxent_objective": 1,
		"train/kl_per_completion_token":   0.05 / 200,
		"train/loss_per_completion_token": 0.3 / 200,
		"train/tau":                       0.5, "train/beta": 0.1, "train/kl_coeff": 0.1, "train/weighting/tau": 0.5,
		// spec §3.1 controller signals: kl error/ratio, tau_loss = 0.5 err².
		"train/kl_error_to_target":   0.08 - 0.05,
		"train/kl_ratio_to_target":   0.08 / 0.05,
		"train/weight_entropy_error": 1.0 - 1.2,
		"train/tau_loss":             0.5 * 0.2 * 0.2,
		"train/tau_target_entropy":   1.2,
		// tau_schedule_active = meta off and target set and step > warmup; meta is on here.
		"train/tau_schedule_active": 0,
		"train/delta_tau":           0.1, "train/delta_beta": 0,
		"train/meta/grad_norm":              0.5,
		"train/clip_ratio/region_mean":      0.6,
		"train/clip_ratio/low_mean":         0.4,
		"train/kl":                          0.05,
		"train/policy_entropy":              1.3,
		"train/staleness_max":               2,
		"train/accuracy":                    s.Prepared.Accuracy,
		"train/weight_norm_denom":           0.5,
		"train/weighting/weight_norm_denom": 0.5,
		"train/reward":                      s.Prepared.Reward.Mean,
		"train/reward_std":                  s.Prepared.Reward.Std,
		"train/rewards/accuracy/mean":       s.Prepared.PerFunction[0].Mean,
		"train/weight_entropy":              s.Prepared.Weight.Mean,
		"train/completions/clipped_frac":    s.Lengths.ClippedFrac,
		"train/completions/clipped_ratio":   s.Lengths.ClippedFrac,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok || !near(got, v, 1e-12) {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	for k, v := range m {
		if !strings.HasPrefix(k, MetricPrefix) || !isFinite(v) {
			t.Errorf("bad metric %s = %v", k, v)
		}
	}
	// tau_schedule_active with the meta-controller off (spec §6 controller signals).
	s.Controller.Meta.Enabled = false
	if m := s.Flatten(); m["train/tau_schedule_active"] != 1 || m["train/tau_loss"] <= 0 {
		t.Errorf("tau_schedule_active %v tau_loss %v", m["train/tau_schedule_active"], m["train/tau_loss"])
	}
	if _, ok := s.Flatten()["train/meta/tau_grad"]; ok {
		t.Errorf("meta keys emitted with the meta-controller off")
	}
}

func TestFlattenGRPOHasNoWeightKeys(t *testing.T) {
	in := batch(2, 4, 4)
	cfg := DefaultPrepareConfig()
	cfg.Objective = ObjectiveGRPO
	out, _ := Prepare(in, cfg, 0, 0)
	m := StepMetrics{Objective: ObjectiveGRPO, Prepared: &out.Stats}.Flatten()
	if m["train/grpo_objective"] != 1 || m["train/maxent_objective"] != 0 {
		t.Errorf("objective flags: %v %v", m["train/grpo_objective"], m["train/maxent_objective"])
	}
	for _, k := range []string{"train/weight_entropy", "train/maxent/listwise_weight_mean"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s emitted for GRPO", k)
		}
	}
	if _, ok := m["train/q_entropy_mean"]; !ok {
		t.Errorf("q_entropy_mean missing")
	}
}

// TestMetricsDocumented keeps docs/METRICS.md in step with Flatten: every
// emitted key appears in its train/ tables, and every key of those tables
// is emitted by a step with every part present (nothing is documented
// that a run cannot write).
func TestMetricsDocumented(t *testing.T) {
	keys := fullStep(t).Flatten()
	perFn := regexp.MustCompile(`^train/rewards/[^/]+/`)
	quant := regexp.MustCompile(`p(00|05|25|50|75|95|100)$`)
	b, err := os.ReadFile("../docs/METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	documented := docKeys(t, doc)
	emitted := map[string]bool{}
	for k := range keys {
		name := perFn.ReplaceAllString(k, "train/rewards/{name}/")
		name = quant.ReplaceAllString(name, "pXX")
		name = strings.TrimPrefix(name, MetricPrefix)
		if strings.HasPrefix(name, "weighting/") && name != "weighting/tau" && name != "weighting/beta" && name != "weighting/tau_loss" {
			name = "weighting/*"
		}
		emitted[name] = true
		if !documented[name] {
			t.Errorf("key %s (as %q) not in a table of docs/METRICS.md", k, name)
		}
	}
	for name := range documented {
		if !emitted[name] {
			t.Errorf("docs/METRICS.md documents %q, which no step writes", name)
		}
	}
}

// docKeys returns the first-column keys of the train/ tables of
// METRICS.md (those before "## Run keys").
func docKeys(t *testing.T, doc string) map[string]bool {
	t.Helper()
	train, _, ok := strings.Cut(doc, "## Run keys")
	if !ok {
		t.Fatal("docs/METRICS.md has no \"## Run keys\" section")
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	keys := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(train, -1) {
		keys[m[1]] = true
	}
	if len(keys) < 100 {
		t.Fatalf("only %d keys found in the train/ tables of docs/METRICS.md", len(keys))
	}
	return keys
}
