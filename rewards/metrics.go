package rewards

import "math"

// MetricPrefix starts every training metric key.
const MetricPrefix = "train/"

// Keys that other packages read (the progress line, the report), spelled
// here once; Flatten writes them.
const (
	KeyReward        = MetricPrefix + "reward"
	KeyAccuracy      = MetricPrefix + "accuracy"
	KeyTau           = MetricPrefix + "tau"
	KeyBeta          = MetricPrefix + "beta"
	KeyPolicyEntropy = MetricPrefix + "policy_entropy"
	KeyKL            = MetricPrefix + "kl"
	KeyWeightEntropy = MetricPrefix + "weight_entropy"
)

// LossStats are the learner's loss components of one step (spec §3.1 loss block).
type LossStats struct {
	// Total is the optimised loss.
	Total float64
	// Policy, KL and Clip are its components; WeightedKL = β·KL.
	Policy, KL, WeightedKL, Clip float64
	// HasClip is true when a clip term exists.
	HasClip bool
}

// ControllerMetrics are the controller settings and signals of one step
// (spec §3.1 controller/config block).
type ControllerMetrics struct {
	// State is the controller state after this step's update.
	State ControllerState
	// PrevTau and PrevBeta are τ and β at the previous logged step (for
	// delta_tau and delta_beta); NaN means unknown (deltas are 0).
	PrevTau, PrevBeta float64
	// Tau, Beta and Meta are the controller settings.
	Tau  TauController
	Beta BetaController
	Meta MetaController
	// TauLRScale is the learning-rate scale passed to the tau update.
	TauLRScale float64
	// KL is the step's measured KL (the beta controller's input).
	KL float64
	// WeightEntropy is the entropy the tau controller saw.
	WeightEntropy float64
	// Grads are the meta-controller gradients of this step, if it ran.
	Grads ControllerGradients
	// QTemperature and QEpsilon are the q settings.
	QTemperature, QEpsilon float64
	// LenNormRef is maxent_length_normalize_ref.
	LenNormRef bool
	// Denominator is the weight temperature D used this step.
	Denominator float64
}

// StepMetrics gathers one step's statistics; Flatten turns them into the
// train/... keys. Nil parts are left out.
type StepMetrics struct {
	// Step is the global step; Epoch its fractional epoch.
	Step  int64
	Epoch float64
	// LearningRate is the optimiser learning rate of the step.
	LearningRate float64
	// GradNorm is the gradient norm before clipping; NaN if unknown.
	GradNorm float64
	// NumTokens is the cumulative number of prompt+completion tokens.
	NumTokens float64
	// CompletionTokens is the number of completion tokens of this step.
	CompletionTokens float64
	// Objective is the training objective.
	Objective Objective
	// Loss are the loss components.
	Loss LossStats
	// Learner are the learner's diagnostics besides the loss.
	Learner *LearnerStats
	// Policy are twinkle's policy diagnostics (PolicyMetrics), measured by
	// the learner; nil when the step had no completion token.
	Policy *PolicyStats
	// Prepared are the reward-side statistics from Prepare.
	Prepared *PrepareStats
	// Lengths are the completion length statistics.
	Lengths *LengthStats
	// Diversity are the completion diversity statistics.
	Diversity *DiversityStats
	// Controller are the controller settings and signals.
	Controller *ControllerMetrics
}

// LearnerStats are what the learner measured in one optimiser step,
// besides the loss components.
type LearnerStats struct {
	// KL is the token-mean k3 of policy vs reference; PolicyEntropy the
	// token-mean policy entropy, both in nats.
	KL, PolicyEntropy float64
	// ClipLow, ClipHigh and ClipRegion = low + high are the clipped
	// fractions of the policy loss.
	ClipLow, ClipHigh, ClipRegion float64
	// ISWeightMean is the mean truncated importance weight and
	// ISTruncatedFrac the fraction capped (off-policy samples).
	ISWeightMean, ISTruncatedFrac float64
	// PolicyVersion is the version after the step; StalenessMin and
	// StalenessMax how many versions the samples were behind it.
	PolicyVersion, StalenessMin, StalenessMax int64
}

// metricSet collects finite values under MetricPrefix.
type metricSet map[string]float64

// set stores v under MetricPrefix + key.
func (m metricSet) set(key string, v float64) { m.put(MetricPrefix+key, v) }

// put stores v under the full key.
func (m metricSet) put(key string, v float64) {
	if isFinite(v) {
		m[key] = v
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Flatten returns the flat train/... metrics of the step (the table in the
// package documentation and docs/METRICS.md). Non-finite values are left out,
// so no value is NaN or Inf.
func (s StepMetrics) Flatten() map[string]float64 {
	m := metricSet{}
	s.base(m)
	if s.Prepared != nil {
		rewardBlock(m, s.Prepared)
		weightBlock(m, s.Prepared)
	}
	if s.Learner != nil {
		learnerBlock(m, s.Learner)
	}
	if s.Policy != nil {
		policyBlock(m, s.Policy)
	}
	if s.Lengths != nil {
		lengthBlock(m, s.Lengths)
	}
	if s.Diversity != nil {
		d := s.Diversity
		m.set("completions/diversity/distinct_1", d.Distinct1)
		m.set("completions/diversity/distinct_2", d.Distinct2)
		m.set("completions/diversity/jaccard", d.Jaccard)
		m.set("completions/diversity/distinct_1_micro", d.Distinct1Micro)
		m.set("completions/diversity/distinct_2_micro", d.Distinct2Micro)
		m.set("completions/diversity/jaccard_micro", d.JaccardMicro)
	}
	if s.Controller != nil {
		s.controllerBlock(m)
	}
	return m
}

// base fills the loss/optimizer block (spec §3.1 base block, loss components).
func (s StepMetrics) base(m metricSet) {
	m.set("loss", s.Loss.Total)
	m.set("loss/total", s.Loss.Total)
	m.set("objective/minimize", s.Loss.Total)
	m.set("objective/maximize", -s.Loss.Total)
	m.set("loss/policy", s.Loss.Policy)
	m.set("loss/kl", s.Loss.KL)
	m.set("loss/weighted_kl", s.Loss.WeightedKL)
	if s.Loss.HasClip {
		m.set("loss/clip", s.Loss.Clip)
	}
	m.set("learning_rate", s.LearningRate)
	m.set("epoch", s.Epoch)
	m.set("global_step", float64(s.Step))
	m.set("num_tokens", s.NumTokens)
	m.set("grad_norm", s.GradNorm)
	m.set("grpo_objective", b2f(s.Objective.IsGRPO()))
	m.set("maxent_objective", b2f(s.Objective == ObjectiveMaxEntEntropy || s.Objective == ObjectiveMaxEntListwise))
	if s.CompletionTokens > 0 {
		m.set("kl_per_completion_token", max(0, s.Loss.KL/s.CompletionTokens))
		m.set("loss_per_completion_token", max(0, s.Loss.Total/s.CompletionTokens))
	}
	if s.Prepared != nil {
		m.set("avg_completion_tokens", s.Prepared.AvgCompletionTokens)
		m.set("ref_logp_mean", s.Prepared.RefLogpMean)
	}
}

// rewardBlock fills the rewards, q, SEED and entropy-bonus keys.
func rewardBlock(m metricSet, p *PrepareStats) {
	m.put(KeyReward, p.Reward.Mean)
	m.put(KeyAccuracy, p.Accuracy)
	m.set("reward_std", p.Reward.Std)
	m.set("frac_reward_zero_std", p.FracZeroStd)
	for i, q := range p.Reward.Quantiles {
		m.set("reward_"+quantileNames[i], q)
	}
	for j, name := range p.RewardNames {
		f := p.PerFunction[j]
		m.set("rewards/"+name+"/mean", f.Mean)
		m.set("rewards/"+name+"/std", f.Std)
		for i, q := range f.Quantiles {
			m.set("rewards/"+name+"/"+quantileNames[i], q)
		}
	}
	m.set("q_entropy_mean", p.QEntropy.Mean)
	m.set("q_entropy_std", p.QEntropy.Std)
	m.set("q_entropy_min", p.QEntropyMin)
	m.set("q_entropy_max", p.QEntropyMax)
	if sd := p.Seed; sd != nil {
		hm, hs := Moments(sd.Entropy)
		hlo, hhi := minMax(sd.Entropy)
		sm, _ := Moments(sd.Scale)
		slo, shi := minMax(sd.Scale)
		m.set("seed_grpo/semantic_entropy_mean", hm)
		m.set("seed_grpo/semantic_entropy_std", hs)
		m.set("seed_grpo/semantic_entropy_min", hlo)
		m.set("seed_grpo/semantic_entropy_max", hhi)
		m.set("seed_grpo/advantage_scale_mean", sm)
		m.set("seed_grpo/advantage_scale_min", slo)
		m.set("seed_grpo/advantage_scale_max", shi)
		m.set("seed_grpo/alpha_effective", sd.AlphaEffective)
		m.set("seed_grpo/max_possible_entropy", sd.MaxPossibleEntropy)
	}
	if b := p.Bonus; b != nil {
		bm := meanFinite(b.Bonus)
		m.set("entropy_bonus_reward_std", b.Scale)
		m.set("reward_without_entropy_bonus", p.BaseReward)
		m.set("reward_with_entropy_bonus", p.Reward.Mean)
		m.set("entropy_bonus_mean", bm)
		m.set("entropy_bonus_frac_of_base", bm/max(math.Abs(p.BaseReward), 1e-8))
		m.set("entropy_bonus_frac_of_total", bm/max(math.Abs(p.Reward.Mean), 1e-8))
	}
}

// weightBlock fills the listwise weight keys.
func weightBlock(m metricSet, p *PrepareStats) {
	if !p.HasWeights {
		return
	}
	w := p.Weight
	m.put(KeyWeightEntropy, w.Mean)
	m.set("weight_entropy_norm", w.NormMean)
	m.set("weight_entropy_min", w.Min)
	m.set("weight_entropy_max", w.Max)
	m.set("advantage_entropy_mean", w.AdvantageEntropyMean)
	m.set("advantage_entropy_std", w.AdvantageEntropyStd)
	m.set("maxent/listwise_weight_mean", p.WeightMean)
	m.set("maxent/listwise_weight_std", p.WeightStd)
	m.set("maxent/listwise_neutral_group_frac", p.NeutralGroupFrac)
	m.set("maxent/listwise_active_group_frac", 1-p.NeutralGroupFrac)
	m.set("maxent/weight_fallback", b2f(p.WeightFallback))
	m.set("weight_norm_denom", p.WeightDenominator)
}

// learnerBlock fills the learner's diagnostics (TRL clip keys, spec §3.2).
func learnerBlock(m metricSet, l *LearnerStats) {
	m.put(KeyKL, l.KL)
	m.put(KeyPolicyEntropy, l.PolicyEntropy)
	m.set("clip_ratio/low_mean", l.ClipLow)
	m.set("clip_ratio/high_mean", l.ClipHigh)
	m.set("clip_ratio/region_mean", l.ClipRegion)
	m.set("is_weight_mean", l.ISWeightMean)
	m.set("is_truncated_frac", l.ISTruncatedFrac)
	m.set("policy_version", float64(l.PolicyVersion))
	m.set("staleness_min", float64(l.StalenessMin))
	m.set("staleness_max", float64(l.StalenessMax))
}

// policyBlock fills twinkle's GRPOMetric keys (spec §3.3, seed page 003);
// nothing when no token was counted.
func policyBlock(m metricSet, p *PolicyStats) {
	if p.Tokens == 0 {
		return
	}
	m.set("policy_confidence", p.PolicyConfidence)
	m.set("mean_new_logp", p.MeanNewLogp)
	if p.HasOld {
		m.set("mean_old_logp", p.MeanOldLogp)
		m.set("logp_diff_mean", p.LogpDiffMean)
		m.set("approx_kl", p.ApproxKL)
		m.set("token_kl_max", p.TokenKLMax)
		m.set("token_ratio_max", p.TokenRatioMax)
	}
	if p.HasEntropy {
		m.set("entropy", p.Entropy)
	}
	if p.HasClip {
		m.set("clip_ratio", p.ClipRatio)
		m.set("clip_ratio_low", p.ClipRatioLow)
		m.set("clip_ratio_high", p.ClipRatioHigh)
	}
}

// lengthBlock fills the completion-length keys with their TRL aliases.
func lengthBlock(m metricSet, l *LengthStats) {
	for _, kv := range []struct {
		keys []string
		v    float64
	}{
		{[]string{"mean_length_sampled", "mean_length"}, l.MeanSampled},
		{[]string{"min_length_sampled", "min_length"}, l.MinSampled},
		{[]string{"max_length_sampled", "max_length"}, l.MaxSampled},
		{[]string{"clipped_frac", "clipped_ratio"}, l.ClippedFrac},
		{[]string{"mean_length_terminated", "mean_terminated_length"}, l.MeanTerminated},
		{[]string{"min_length_terminated", "min_terminated_length"}, l.MinTerminated},
		{[]string{"max_length_terminated", "max_terminated_length"}, l.MaxTerminated},
	} {
		for _, k := range kv.keys {
			m.set("completions/"+k, kv.v)
		}
	}
}

// controllerBlock fills tau, beta, the controller settings (also mirrored
// under weighting/), the error signals and the meta keys.
func (s StepMetrics) controllerBlock(m metricSet) {
	c := s.Controller
	st := c.State
	m.put(KeyTau, st.Tau)
	m.put(KeyBeta, st.Beta)
	m.set("kl_coeff", st.Beta)
	m.set("weighting/tau", st.Tau)
	m.set("weighting/beta", st.Beta)
	m.set("weight_entropy_ema", st.TauEntropyEMA)
	target := c.Tau.TargetAt(s.Step)
	for _, kv := range s.controllerSettings(target) {
		m.set(kv.key, kv.v)
		m.set("weighting/"+kv.key, kv.v)
	}
	if c.Beta.Target > 0 && isFinite(c.KL) {
		m.set("kl_error_to_target", c.KL-c.Beta.Target)
		m.set("kl_ratio_to_target", c.KL/max(c.Beta.Target, 1e-8))
	}
	if c.Tau.Enabled && isFinite(c.WeightEntropy) {
		e := c.WeightEntropy - target
		m.set("weight_entropy_error", e)
		m.set("weight_entropy_abs_error", math.Abs(e))
		m.set("tau_loss", 0.5*e*e)
		m.set("weighting/tau_loss", 0.5*e*e)
	}
	metaBlock(m, c.Meta, c.Grads)
}

// keyValue is one metric key and its value.
type keyValue struct {
	key string
	v   float64
}

// controllerSettings are the controller keys mirrored under weighting/:
// its settings and the step's changes of tau and beta (target is the
// entropy target at the step).
func (s StepMetrics) controllerSettings(target float64) []keyValue {
	c := s.Controller
	st := c.State
	dTau, dBeta := 0.0, 0.0
	if isFinite(c.PrevTau) {
		dTau = st.Tau - c.PrevTau
	}
	if isFinite(c.PrevBeta) {
		dBeta = st.Beta - c.PrevBeta
	}
	targetKey := 0.0
	if c.Tau.Enabled {
		targetKey = target
	}
	kvs := []keyValue{
		{"tau_log", st.TauLog},
		{"q_temperature", c.QTemperature},
		{"q_epsilon", c.QEpsilon},
		{"tau_lr", c.Tau.LR * max(c.TauLRScale, 0)},
		{"tau_min", c.Tau.Min},
		{"tau_max", c.Tau.Max},
		{"tau_warmup_steps", float64(c.Tau.WarmupSteps)},
		{"tau_target_entropy", targetKey},
		{"tau_target_enabled", b2f(c.Tau.Enabled)},
		{"tau_schedule_active", b2f(!c.Meta.Enabled && c.Tau.Active(s.Step))},
		{"kl_controller_target", c.Beta.Target},
		{"kl_controller_horizon", c.Beta.Horizon},
		{"kl_controller_step_size", c.Beta.StepSize},
		{"kl_controller_enabled", b2f(c.Beta.Enabled())},
		{"kl_controller/target", c.Beta.Target},
		{"kl_controller/horizon", c.Beta.Horizon},
		{"kl_controller/step_size", c.Beta.StepSize},
		{"kl_controller/enabled", b2f(c.Beta.Enabled())},
		{"len_norm_ref", b2f(c.LenNormRef)},
		{"delta_tau", dTau},
		{"delta_tau_abs", math.Abs(dTau)},
		{"delta_beta", dBeta},
		{"delta_beta_abs", math.Abs(dBeta)},
	}
	if c.Denominator > 0 {
		kvs = append(kvs, keyValue{"weight_norm_denom", c.Denominator})
	}
	return kvs
}

// metaBlock fills the meta/... keys.
func metaBlock(m metricSet, meta MetaController, g ControllerGradients) {
	m.set("meta/enabled", b2f(meta.Enabled))
	if !meta.Enabled {
		return
	}
	m.set("meta/lr", meta.LR)
	m.set("meta/update_interval", float64(max(meta.UpdateInterval, 1)))
	m.set("meta/truncation_steps", float64(max(meta.TruncationSteps, 1)))
	m.set("meta/use_hessian", b2f(meta.UseHessian))
	gt, gb := 0.0, 0.0
	if g.HasTau {
		gt = g.Tau
		m.set("meta/tau_grad", gt)
	}
	if g.HasBeta {
		gb = g.Beta
		m.set("meta/beta_grad", gb)
	}
	m.set("meta/grad_norm", math.Sqrt(gt*gt+gb*gb))
}
