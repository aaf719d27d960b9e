// Package rewards turns scored completions into MaxEnt-GRPO utilities, group
// advantages, q targets and listwise weights, runs the tau/beta/meta
// controllers, and computes the GRPO-family metrics maths. It is the
// formula-level part of the original maxent_grpo (spec sections 1–3, 5 of
// reference/maxent-grpo-spec.md, with the decisions of DESIGN.md §3).
//
// It knows nothing of actors, devices or config: every function takes Go
// slices and returns new ones, and it imports only the standard library
// and internal/atomicfile.
// Reward functions, verifiers and tasks live in the sub-package rewards/tasks.
//
// # Layout
//
// A batch of P prompts × K completions is a group-major flat []float64 of
// length P*K: completion j of prompt i is at i*K+j. Functions take
// (values, k).
//
// # Invariants
//
//   - Inputs are never modified. Functions named ...To write into dst (reused
//     when large enough, nil allowed) and return it.
//   - No function panics on input. Bad shapes, K < 1, non-finite values and
//     invalid settings return errors wrapping ErrShape, ErrEmptyGroup,
//     ErrEmptyBatch, ErrNonFinite, ErrParam or ErrState.
//   - NaN/Inf rewards count as 0 in the utility (nan-sum, spec §1.2); no
//     returned value is NaN. Means, stds, advantages and q whose plain sums
//     overflow are recomputed on power-of-two-scaled values (equal utilities
//     still give advantage 0); a result beyond float64 is an ErrNonFinite
//     error naming the stage. Documented fallbacks: moments of nothing are 0,
//     K = 1 gives q = w = 1 and advantages 0, non-finite SEED scales are 1,
//     uniform weights only for flat-q groups (SkipZeroVarianceGroups) or with
//     AllowEmptyWeightFallback.
//   - q is tempered once, when it is formed; the weights never re-temper it.
//     The weight temperature is D = τ by default (WeightDenominatorTau), or
//     τ + β (WeightDenominatorTauPlusBeta).
//
// # One step
//
//	out, err := rewards.Prepare(in, cfg, state.Tau, state.Beta) // utilities, advantages, q, weights
//	state, _ = ctl.Update(state, rewards.ControllerInputs{Step: step,
//		WeightEntropy: out.Stats.Weight.Mean, PolicyEntropy: h, KL: kl, LRScale: 1})
//	err = rewards.SaveControllerState(filepath.Join(dir, rewards.ControllerStateFile), state)
//	pol, err := rewards.PolicyMetrics(tokens, rewards.DefaultPolicyMetricsConfig()) // learner side
//	metrics := rewards.StepMetrics{Step: step, Prepared: &out.Stats, Learner: &learned, Policy: &pol}.Flatten()
//
// # Metrics
//
// StepMetrics.Flatten returns the step's "train/..." keys, listed with their
// meaning, formula and source (the original's legacy metrics, its TRL
// trainer, twinkle's GRPOMetric family, or mgrpo) in docs/METRICS.md. Keys whose part is absent or whose value is not
// finite are left out.
package rewards
