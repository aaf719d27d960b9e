package loss

import (
	"errors"
	"fmt"
	"math"
)

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = errors.New("loss: invalid setting")

// Aggregation types (Config.Type), spec §1.9a.
const (
	// TypeGRPO averages each sequence's tokens, then the sequences:
	//   mean_i( Σ_t L·m / max(Σ_t m, 1) )
	TypeGRPO = "grpo"
	// TypeBNPO averages all completion tokens of the batch:
	//   Σ L·m / max(Σ m, 1)
	TypeBNPO = "bnpo"
	// TypeDrGRPO divides the token sum by a constant: Σ L·m / D.
	TypeDrGRPO = "dr_grpo"
)

// Dr.GRPO denominators (Config.DrGRPODenominator).
const (
	// DenomFixedMax is D = N · MaxCompletionLen (the default).
	DenomFixedMax = "fixed_max"
	// DenomActiveTokens is D = max(Σ m, 1).
	DenomActiveTokens = "active_tokens"
)

// Policy-loss variants (Config.Policy).
const (
	// PolicyVanilla is GRPO's token-level clipped surrogate.
	PolicyVanilla = "vanilla"
	// PolicyGSPO uses one geometric-mean ratio per sequence.
	PolicyGSPO = "gspo"
	// PolicyCISPO uses the clipped, detached IS weight times lp.
	PolicyCISPO = "cispo"
)

// LogRatioClamp bounds log(π/π_old) and the KL log-ratio before exp, as
// the original trainer does (_LOG_DELTA_CLAMP = 5.0).
const LogRatioClamp = 5.0

// Config holds the loss settings. Default gives the original's defaults.
type Config struct {
	// Type is the aggregation over tokens: grpo, bnpo or dr_grpo (spec §1.9a).
	// It applies to the vanilla and CISPO losses and to the entropy basis.
	Type string
	// Policy is the policy-loss variant: vanilla, gspo or cispo.
	Policy string
	// Epsilon is the lower clip width: ratios are clipped at 1 − Epsilon.
	// In (0, 1]; 1 disables the lower clip (usual for CISPO).
	Epsilon float64
	// EpsilonHigh is the upper clip width (DAPO clip-higher): ratios are
	// clipped at 1 + EpsilonHigh. 0 means Epsilon.
	EpsilonHigh float64
	// Delta, when > 0, caps the vanilla ratio at Delta before clipping
	// (TRL two-sided clipping; must exceed 1 + EpsilonHigh). 0 = off.
	Delta float64
	// Beta is the coefficient of the k3 KL penalty against the reference;
	// Batch.RefLogp is required when it is not 0.
	Beta float64
	// DrGRPODenominator is fixed_max or active_tokens (Type dr_grpo only).
	DrGRPODenominator string
	// MaxCompletionLen is the dr_grpo fixed_max length; 0 means Batch.T.
	MaxCompletionLen int
	// ISTruncation is C of the truncated importance-sampling correction for
	// stale samples: when Batch.BehaviourLogp is set, each token's policy
	// term is multiplied by min(exp(old − behaviour), C), detached. 0 = off.
	ISTruncation float64

	// ListwiseSkipZeroVariance drops groups whose weights are uniform
	// (max − min ≤ 1e-8) from the listwise mean (spec §1.9b item 2).
	ListwiseSkipZeroVariance bool
	// ListwiseLengthNormalize divides the sequence log-probs S_i (and
	// S_old_i) by max(T_i, 1) (maxent_length_normalize_policy).
	ListwiseLengthNormalize bool
	// ListwiseClipCoef, when > 0, adds ListwiseClipCoef · L_clip, the
	// sequence-level PPO clip term of spec §1.9b item 6. 0 = off.
	ListwiseClipCoef float64
	// ListwiseClipRange is the clip width of L_clip; 0 means Epsilon and
	// EpsilonHigh.
	ListwiseClipRange float64
	// ListwiseClipBaseline is b in c_i = w_i − b; a negative value means 1/K.
	ListwiseClipBaseline float64
	// ListwiseScale multiplies the listwise loss (maxent_listwise_loss_scale);
	// must be > 0.
	ListwiseScale float64
}

// Default returns the defaults of the original (TRL epsilon 0.2, bnpo,
// beta 0, dr_grpo fixed_max, listwise scale 1, clip baseline 1/K).
func Default() Config {
	return Config{
		Type: TypeBNPO, Policy: PolicyVanilla, Epsilon: 0.2,
		DrGRPODenominator: DenomFixedMax, ListwiseClipBaseline: -1, ListwiseScale: 1,
	}
}

// Validate checks every field and names the first bad one.
func (c Config) Validate() error {
	bad := func(key string, val any, why string) error {
		return fmt.Errorf("%w: %s = %v: %s", ErrConfig, key, val, why)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Type != TypeGRPO && c.Type != TypeBNPO && c.Type != TypeDrGRPO:
		return bad("loss.type", c.Type, "want grpo, bnpo or dr_grpo")
	case c.Policy != PolicyVanilla && c.Policy != PolicyGSPO && c.Policy != PolicyCISPO:
		return bad("loss.policy", c.Policy, "want vanilla, gspo or cispo")
	case !(c.Epsilon > 0 && c.Epsilon <= 1):
		return bad("loss.epsilon", c.Epsilon, "must be in (0, 1]")
	case !(c.EpsilonHigh >= 0) || !finite(c.EpsilonHigh):
		return bad("loss.epsilon_high", c.EpsilonHigh, "must be finite and >= 0")
	case !(c.Delta >= 0) || !finite(c.Delta):
		return bad("loss.delta", c.Delta, "must be finite and >= 0")
	case c.Delta > 0 && c.Delta <= 1+c.epsHigh():
		return bad("loss.delta", c.Delta, fmt.Sprintf("must exceed 1 + epsilon_high = %v", 1+c.epsHigh()))
	case !finite(c.Beta):
		return bad("loss.beta", c.Beta, "must be finite")
	case c.DrGRPODenominator != DenomFixedMax && c.DrGRPODenominator != DenomActiveTokens:
		return bad("loss.dr_grpo_denominator", c.DrGRPODenominator, "want fixed_max or active_tokens")
	case c.MaxCompletionLen < 0:
		return bad("loss.max_completion_len", c.MaxCompletionLen, "must be >= 0")
	case !(c.ISTruncation >= 0) || !finite(c.ISTruncation):
		return bad("loss.is_truncation", c.ISTruncation, "must be finite and >= 0")
	case !(c.ListwiseClipCoef >= 0) || !finite(c.ListwiseClipCoef):
		return bad("loss.listwise_clip_coef", c.ListwiseClipCoef, "must be finite and >= 0")
	case !(c.ListwiseClipRange >= 0 && c.ListwiseClipRange <= 1):
		return bad("loss.listwise_clip_range", c.ListwiseClipRange, "must be in [0, 1]")
	case !finite(c.ListwiseClipBaseline):
		return bad("loss.listwise_clip_baseline", c.ListwiseClipBaseline, "must be finite")
	case !(c.ListwiseScale > 0) || !finite(c.ListwiseScale):
		return bad("loss.listwise_scale", c.ListwiseScale, "must be finite and > 0")
	}
	return nil
}

// epsHigh is EpsilonHigh with its default (Epsilon) applied.
func (c Config) epsHigh() float64 {
	if c.EpsilonHigh == 0 {
		return c.Epsilon
	}
	return c.EpsilonHigh
}
