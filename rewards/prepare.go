package rewards

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Objective names the training objective (spec §0, DESIGN §3).
type Objective string

const (
	// ObjectiveGRPO is plain GRPO (PPO-clipped group advantages).
	ObjectiveGRPO Objective = "grpo"
	// ObjectiveGRPOEntropyBonus is GRPO with the reward-side policy-entropy
	// bonus of spec §1.6, applied for real.
	ObjectiveGRPOEntropyBonus Objective = "grpo_entropy_bonus"
	// ObjectiveMaxEntEntropy is the entropy-regularised MaxEnt loss (the
	// original's default).
	ObjectiveMaxEntEntropy Objective = "maxent_entropy"
	// ObjectiveMaxEntListwise is listwise MaxEnt-GRPO with q targets and
	// listwise weights.
	ObjectiveMaxEntListwise Objective = "maxent_listwise"
)

// ParseObjective maps a configured objective, with the original's aliases
// (spec §0), to an Objective.
func ParseObjective(s string) (Objective, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "grpo", "baseline", "grpo_native":
		return ObjectiveGRPO, nil
	case "grpo_entropy_bonus", "entropy_bonus":
		return ObjectiveGRPOEntropyBonus, nil
	case "", "maxent_entropy", "maxent", "maxent_tokenwise", "tokenwise", "entropy":
		return ObjectiveMaxEntEntropy, nil
	case "maxent_listwise", "listwise":
		return ObjectiveMaxEntListwise, nil
	}
	return "", fmt.Errorf("objective %q: want grpo, grpo_entropy_bonus, maxent_entropy or maxent_listwise: %w", s, ErrParam)
}

// IsGRPO reports whether o is a GRPO objective (grpo or grpo_entropy_bonus).
func (o Objective) IsGRPO() bool { return o == ObjectiveGRPO || o == ObjectiveGRPOEntropyBonus }

// PrepareConfig are the objective settings Prepare reads (config sections
// maxent and controller; the trainer maps them).
type PrepareConfig struct {
	// Objective selects what is computed: weights only for maxent_listwise,
	// the entropy bonus only for grpo_entropy_bonus.
	Objective Objective
	// RewardWeights weight the reward functions; empty means 1 each.
	RewardWeights []float64
	// RewardNames name the reward functions in metric keys; empty means
	// reward_0, reward_1, ...
	RewardNames []string
	// ZeroTruncated sets the utility of truncated completions to 0.
	ZeroTruncated bool
	// ScaleRewards divides advantages by the group std (default true).
	ScaleRewards bool
	// QTemperature is T_q > 0 (default 1).
	QTemperature float64
	// QEpsilon is the q floor ε >= 0 (default 1e-6).
	QEpsilon float64
	// Seed are the SEED-GRPO settings (GRPO objectives only).
	Seed SeedGRPO
	// EntropyBonusCoef is c of spec §1.6 (grpo_entropy_bonus requires > 0).
	EntropyBonusCoef float64
	// Weights selects the weight denominator and token renormalisation.
	Weights WeightOptions
	// LengthNormalizeRef divides reference log-prob sums by max(T,1)
	// (default true).
	LengthNormalizeRef bool
	// SkipZeroVarianceGroups gives flat-q groups uniform weights and marks
	// them inactive for the listwise loss.
	SkipZeroVarianceGroups bool
	// AllowEmptyWeightFallback uses uniform weights when the weights cannot
	// be computed, instead of failing (default false).
	AllowEmptyWeightFallback bool
}

// DefaultPrepareConfig returns the original's defaults (objective
// maxent_entropy, scale_rewards true, T_q 1, ε 1e-6, len-norm ref true).
func DefaultPrepareConfig() PrepareConfig {
	return PrepareConfig{Objective: ObjectiveMaxEntEntropy, ScaleRewards: true, QTemperature: 1,
		QEpsilon: 1e-6, Seed: DefaultSeedGRPO(), LengthNormalizeRef: true}
}

// PrepareInput is one step's scored completions, group-major [P*K].
type PrepareInput struct {
	// K is the number of completions per prompt.
	K int
	// Rewards are the raw per-function rewards [F][P*K]; NaN means missing.
	Rewards [][]float64
	// Truncated marks completions cut at the length cap (nil: none).
	Truncated []bool
	// TokenCounts are the completion lengths in tokens (required).
	TokenCounts []int
	// RefLogpSums are reference log-prob sums per completion (listwise; nil
	// otherwise).
	RefLogpSums []float64
	// Completions are the completion texts (SEED-GRPO only).
	Completions []string
	// BehaviorLogpSums are rollout log-prob sums (SEED-GRPO only).
	BehaviorLogpSums []float64
	// EntropySums are summed per-token policy entropies (entropy bonus only).
	EntropySums []float64
}

// Prepared is the result of Prepare: what the learner needs and what the
// metrics report.
type Prepared struct {
	// K is the group size and Prompts the number of groups P.
	K, Prompts int
	// Utilities are the final utilities u (after zeroing and bonus) [P*K].
	Utilities []float64
	// Advantages are the group advantages (SEED-scaled if enabled) [P*K].
	Advantages []float64
	// Q is the listwise target distribution [P*K].
	Q []float64
	// RefLogp is the reference term used by the weights (nil if none) [P*K].
	RefLogp []float64
	// Weights are the listwise weights (maxent_listwise only, else nil) [P*K].
	Weights []float64
	// ZeroStd marks groups with equal utilities [P].
	ZeroStd []bool
	// Active marks groups that count in the listwise loss [P].
	Active []bool
	// Stats are the reward-side statistics for metrics.
	Stats PrepareStats
}

// PrepareStats are the reward, q, weight, SEED and bonus statistics of a step.
type PrepareStats struct {
	// Reward summarises the utilities (reward, reward_std, reward_pXX).
	Reward Summary
	// RewardNames and PerFunction summarise each reward function's raw values.
	RewardNames []string
	PerFunction []Summary
	// FracZeroStd is the fraction of zero-variance groups.
	FracZeroStd float64
	// QEntropy summarises the per-group entropy of q (Quantiles unused).
	QEntropy Summary
	// QEntropyMin and QEntropyMax are its extremes.
	QEntropyMin, QEntropyMax float64
	// HasWeights is true for maxent_listwise.
	HasWeights bool
	// Weight are the weight-entropy statistics.
	Weight WeightEntropyStats
	// WeightMean and WeightStd are over all weights.
	WeightMean, WeightStd float64
	// NeutralGroupFrac is the fraction of groups the listwise loss skips:
	// those with flat q when SkipZeroVarianceGroups is on, else 0.
	NeutralGroupFrac float64
	// WeightFallback is true when uniform fallback weights were used.
	WeightFallback bool
	// WeightDenominator is D used for the weights.
	WeightDenominator float64
	// Seed is set when SEED-GRPO ran.
	Seed *SeedStats
	// Bonus is set when the entropy bonus ran; BaseReward is the mean
	// utility before it.
	Bonus      *EntropyBonus
	BaseReward float64
	// RefLogpMean is the mean reference log-prob term; AvgCompletionTokens
	// the mean completion length.
	RefLogpMean, AvgCompletionTokens float64
	// Accuracy is the fraction of completions whose "accuracy" or "correct"
	// reward is 1; NaN when neither function is configured.
	Accuracy float64
}

// Prepare runs the reward-statistics → q → advantages → weights path of one
// step (spec §1.2–1.8) and returns its results and statistics. tau and beta
// are the current controller values. The inputs are not modified. A value
// beyond float64 (utilities, advantages, weights) returns an error wrapping
// ErrNonFinite that names the stage, so no returned utility, advantage, q or
// weight is NaN or ±Inf.
func Prepare(in PrepareInput, cfg PrepareConfig, tau, beta float64) (*Prepared, error) {
	if len(in.Rewards) == 0 || len(in.Rewards[0]) == 0 {
		return nil, fmt.Errorf("prepare: %w", ErrEmptyBatch)
	}
	p, err := groupCount(len(in.Rewards[0]), in.K)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if err := in.check(cfg); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	out := &Prepared{K: in.K, Prompts: p}
	st := &out.Stats
	u, err := BaseUtilities(in.Rewards, cfg.RewardWeights, in.Truncated, cfg.ZeroTruncated)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	st.BaseReward = meanFinite(u)
	if cfg.Objective == ObjectiveGRPOEntropyBonus {
		if err := out.addEntropyBonus(in, cfg, u); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	out.Utilities = u
	if out.Advantages, err = GroupAdvantages(u, in.K, cfg.ScaleRewards); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if cfg.Seed.Enabled {
		if err := out.seedScale(in, cfg); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	if out.Q, err = QDistribution(u, in.K, cfg.QTemperature, cfg.QEpsilon); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if out.ZeroStd, err = ZeroVarianceGroups(u, in.K); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if cfg.Objective == ObjectiveMaxEntListwise {
		if err := out.listwise(in, cfg, tau, beta); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	if err := out.summarize(in, cfg); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	return out, nil
}

// addEntropyBonus adds the policy-entropy bonus to the utilities u in
// place (grpo_entropy_bonus) and keeps its statistics.
func (out *Prepared) addEntropyBonus(in PrepareInput, cfg PrepareConfig, u []float64) error {
	b, err := PolicyEntropyBonus(u, in.EntropySums, in.TokenCounts, in.K, cfg.EntropyBonusCoef)
	if err != nil {
		return err
	}
	for i := range u {
		u[i] += b.Bonus[i]
	}
	if err := checkFinite("utilities with bonus", u); err != nil {
		return fmt.Errorf("entropy bonus: %w", err)
	}
	out.Stats.Bonus = &b
	return nil
}

// seedScale scales each group's advantages by SEED-GRPO's uncertainty
// factor and keeps its statistics.
func (out *Prepared) seedScale(in PrepareInput, cfg PrepareConfig) error {
	s, err := SeedScales(in.Completions, in.BehaviorLogpSums, in.TokenCounts, in.K, cfg.Seed)
	if err != nil {
		return err
	}
	if out.Advantages, err = ScaleGroups(out.Advantages, in.K, s.Scale); err != nil {
		return err
	}
	if err := checkFinite("scaled advantages", out.Advantages); err != nil {
		return fmt.Errorf("seed-grpo: %w", err)
	}
	out.Stats.Seed = &s
	return nil
}

// BaseUtilities are the utilities before any entropy bonus (spec §1.2):
//
//	u_i = Σ_r w_r · rewards[r][i]   (NaN rewards count 0; w empty: 1 each)
//
// set to 0 where truncated[i] when zeroTruncated. Prepare starts from
// them; dynamic sampling reads their group variance to drop flat groups.
func BaseUtilities(rewards [][]float64, weights []float64, truncated []bool, zeroTruncated bool) ([]float64, error) {
	u, err := Utilities(rewards, weights)
	if err != nil {
		return nil, err
	}
	if zeroTruncated && truncated != nil {
		return ZeroTruncated(u, truncated)
	}
	return u, nil
}

// check validates the optional inputs the configuration needs.
func (in PrepareInput) check(cfg PrepareConfig) error {
	n := len(in.Rewards[0])
	if err := checkLen("token counts", len(in.TokenCounts), n); err != nil {
		return err
	}
	if in.Truncated != nil {
		if err := checkLen("truncated", len(in.Truncated), n); err != nil {
			return err
		}
	}
	if cfg.Seed.Enabled && !cfg.Objective.IsGRPO() {
		return fmt.Errorf("seed-grpo needs a GRPO objective, not %s: %w", cfg.Objective, ErrParam)
	}
	if cfg.Objective == ObjectiveGRPOEntropyBonus && !(cfg.EntropyBonusCoef > 0) {
		return fmt.Errorf("grpo_entropy_bonus needs an entropy bonus coefficient > 0: %w", ErrParam)
	}
	if cfg.Objective == ObjectiveMaxEntListwise && in.RefLogpSums != nil {
		return checkLen("ref logp sums", len(in.RefLogpSums), n)
	}
	return nil
}

// listwise computes the reference term, the weights and the active groups.
func (out *Prepared) listwise(in PrepareInput, cfg PrepareConfig, tau, beta float64) error {
	if !(tau > 0) || math.IsInf(tau, 0) {
		return fmt.Errorf("listwise MaxEnt needs tau > 0, got %v: %w", tau, ErrParam)
	}
	st := &out.Stats
	st.HasWeights = true
	st.WeightDenominator = cfg.Weights.Denominator.Value(tau, beta)
	err := out.weights(in, cfg, tau, beta)
	if err != nil && !cfg.AllowEmptyWeightFallback {
		return err
	}
	if err != nil {
		out.RefLogp = nil
		out.Weights = make([]float64, len(out.Q))
		for g := range out.Prompts {
			UniformTo(out.Weights[g*in.K:(g+1)*in.K], in.K)
		}
		st.WeightFallback = true
	}
	neutral, err := NeutralGroups(out.Q, in.K)
	if err != nil {
		return err
	}
	out.Active = make([]bool, out.Prompts)
	skipped := 0
	for g, flat := range neutral {
		out.Active[g] = !(flat && cfg.SkipZeroVarianceGroups)
		if !out.Active[g] {
			UniformTo(out.Weights[g*in.K:(g+1)*in.K], in.K)
			skipped++
		}
	}
	// A flat group counts as neutral only when it is skipped: with skipping
	// off every group is active (the original's listwise_neutral_group_frac).
	st.NeutralGroupFrac = float64(skipped) / float64(out.Prompts)
	return nil
}

// weights computes the reference term and the listwise weights.
func (out *Prepared) weights(in PrepareInput, cfg PrepareConfig, tau, beta float64) error {
	var err error
	if in.RefLogpSums != nil {
		if out.RefLogp, err = ReferenceSequenceLogp(in.RefLogpSums, in.TokenCounts, cfg.LengthNormalizeRef); err != nil {
			return err
		}
	}
	if out.Weights, err = ListwiseWeights(out.Q, out.RefLogp, in.TokenCounts, in.K, tau, beta, cfg.Weights); err != nil {
		return err
	}
	if err := checkFinite("weights", out.Weights); err != nil {
		return fmt.Errorf("listwise weights (tau %v, beta %v): %w", tau, beta, err)
	}
	return nil
}

// summarize fills the statistics for metrics.
func (out *Prepared) summarize(in PrepareInput, cfg PrepareConfig) error {
	st := &out.Stats
	st.Reward = Summarize(out.Utilities)
	for j, r := range in.Rewards {
		name := fmt.Sprintf("reward_%d", j)
		if j < len(cfg.RewardNames) && cfg.RewardNames[j] != "" {
			name = cfg.RewardNames[j]
		}
		st.RewardNames = append(st.RewardNames, name)
		st.PerFunction = append(st.PerFunction, Summarize(r))
	}
	st.FracZeroStd = FractionTrue(out.ZeroStd)
	hq, err := GroupEntropies(out.Q, out.K)
	if err != nil {
		return err
	}
	st.QEntropy.Mean, st.QEntropy.Std = Moments(hq)
	st.QEntropyMin, st.QEntropyMax = minMax(hq)
	if out.Weights != nil {
		if st.Weight, err = WeightEntropy(out.Weights, out.K); err != nil {
			return err
		}
		st.WeightMean, st.WeightStd = Moments(out.Weights)
	}
	st.RefLogpMean = meanFinite(in.RefLogpSums)
	counts := make([]float64, len(in.TokenCounts))
	for i, c := range in.TokenCounts {
		counts[i] = float64(c)
	}
	st.AvgCompletionTokens = meanFinite(counts)
	st.Accuracy = accuracy(st.RewardNames, in.Rewards)
	return nil
}

// accuracy is the fraction of completions whose "accuracy" (or, failing
// that, "correct") reward is exactly 1; NaN when neither is among names.
func accuracy(names []string, rewards [][]float64) float64 {
	col := slices.Index(names, "accuracy")
	if col < 0 {
		col = slices.Index(names, "correct")
	}
	if col < 0 || len(rewards[col]) == 0 {
		return math.NaN()
	}
	hits := 0
	for _, v := range rewards[col] {
		if v == 1 {
			hits++
		}
	}
	return float64(hits) / float64(len(rewards[col]))
}

// minMax returns the extremes of x, or (0, 0) for an empty slice.
func minMax(x []float64) (lo, hi float64) {
	if len(x) == 0 {
		return 0, 0
	}
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// ReferenceSequenceLogp returns the reference term per completion (spec §1.7):
//
//	ref_i = sum_i / max(T_i, 1)   if lengthNormalize,   else sum_i
//
// Non-finite sums return ErrNonFinite.
func ReferenceSequenceLogp(sums []float64, tokenCounts []int, lengthNormalize bool) ([]float64, error) {
	if err := checkLen("token counts", len(tokenCounts), len(sums)); err != nil {
		return nil, fmt.Errorf("reference log-probs: %w", err)
	}
	if err := checkFinite("ref logp sums", sums); err != nil {
		return nil, fmt.Errorf("reference log-probs: %w", err)
	}
	out := make([]float64, len(sums))
	for i, s := range sums {
		out[i] = s
		if lengthNormalize {
			out[i] /= float64(max(tokenCounts[i], 1))
		}
	}
	return out, nil
}
