// Package rewards turns scored completions into MaxEnt-GRPO utilities, group
// advantages, q targets and listwise weights, runs the tau/beta/meta
// controllers, and computes the GRPO-family metrics maths. It is the
// formula-level part of the original maxent_grpo (spec sections 1–3, 5 of
// reference/maxent-grpo-spec.md, with the decisions of DESIGN.md §3).
//
// It knows nothing of actors, devices or config: every function takes Go
// slices and returns new ones, and it imports only the standard library.
// Reward functions, verifiers and tasks live in the sub-package rewards/tasks.
//
// # Layout
//
// A batch of P prompts × K completions is a group-major flat []float64 of
// length P*K: completion j of prompt i is at i*K+j. Functions take
// (values, k). Per-token inputs (TokenBatch) are flat [N*T] slices with a
// mask [N*T] (1 = a completion token that counts).
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
//	pol, err := rewards.PolicyMetrics(tokens, rewards.DefaultPolicyMetricsConfig())
//	state, _ = ctl.Update(state, rewards.ControllerInputs{Step: step,
//		WeightEntropy: out.Stats.Weight.Mean, PolicyEntropy: pol.Entropy, KL: pol.KL, LRScale: 1})
//	err = rewards.SaveControllerState(filepath.Join(dir, rewards.ControllerStateFile), state)
//	metrics := rewards.StepMetrics{Step: step, Prepared: &out.Stats, Policy: &pol}.Flatten()
//
// # Metrics
//
// StepMetrics.Flatten returns the keys below, each prefixed with "train/"
// (also in docs/METRICS.md). Sources: L = the original's legacy metrics.py
// (spec §3.1), T = its TRL trainer (§3.2), W = twinkle GRPOMetric (§3.3),
// M = mgrpo only. Keys whose part is absent or whose value is not finite are
// left out.
//
//	# Loss and optimiser (from `StepMetrics`)
//	`loss`                                    optimised loss of the step [L, T]
//	`loss/total`                              same as `loss` [L]
//	`objective/minimize`                      `loss` [L]
//	`objective/maximize`                      `-loss` [L]
//	`loss/policy`                             policy part of the loss [L, T]
//	`loss/kl`                                 KL term (unweighted) [L]
//	`loss/weighted_kl`                        β · KL [L]
//	`loss/clip`                               clip term (only when a clip objective exists) [L, T]
//	`learning_rate`                           optimiser learning rate [L]
//	`epoch`                                   fractional epoch [L]
//	`global_step`                             optimiser step [L]
//	`num_tokens`                              cumulative prompt + completion tokens [L, T]
//	`grad_norm`                               gradient norm before clipping [L]
//	`grpo_objective`                          1 for `grpo`/`grpo_entropy_bonus`, else 0 [L]
//	`maxent_objective`                        1 for `maxent_entropy`/`maxent_listwise`, else 0 [L]
//	`kl_per_completion_token`                 max(0, loss/kl / completion tokens of the step) [L]
//	`loss_per_completion_token`               max(0, loss / completion tokens of the step) [L]
//	`avg_completion_tokens`                   mean completion length (`PrepareStats`) [L]
//	`ref_logp_mean`                           mean reference log-prob sum (`PrepareStats`) [L]
//	`policy_entropy`                          token-mean policy entropy (`PolicyStats`) [L]
//
//	# Rewards, q and SEED-GRPO (from `PrepareStats`)
//	`reward`                                  mean utility u (after truncation zeroing and entropy bonus) [L, T]
//	`reward_std`                              **population** std of u (DESIGN §3) [L, T]
//	`reward_pXX`                              quantiles p00, p05, p25, p50, p75, p95, p100 of u (linear, pos = q·(n−1)) [L]
//	`rewards/{name}/mean`                     mean of reward function `{name}`'s raw values (NaN skipped) [L, T]
//	`rewards/{name}/std`                      population std of the same [L, T]
//	`rewards/{name}/pXX`                      its quantiles p00 … p100 [L]
//	`frac_reward_zero_std`                    fraction of groups whose utilities are all equal (|u − mean| < 1e-8) [L, T]
//	`q_entropy_mean`                          mean over groups of H(q_g) = −Σ q log max(q, 1e-12) [L]
//	`q_entropy_std`                           population std of the same [L]
//	`q_entropy_min`                           minimum of the same [L]
//	`q_entropy_max`                           maximum of the same [L]
//	`seed_grpo/semantic_entropy_mean`         mean semantic entropy over groups [L, T]
//	`seed_grpo/semantic_entropy_std`          its population std [L]
//	`seed_grpo/semantic_entropy_min`          its minimum [L, T]
//	`seed_grpo/semantic_entropy_max`          its maximum [L, T]
//	`seed_grpo/advantage_scale_mean`          mean of 1/(1 + α_eff·H) [L, T]
//	`seed_grpo/advantage_scale_min`           its minimum [L, T]
//	`seed_grpo/advantage_scale_max`           its maximum [L, T]
//	`seed_grpo/alpha_effective`               α / ln G (normalised) or α [L, T]
//	`seed_grpo/max_possible_entropy`          ln G [L, T]
//	`entropy_bonus_reward_std`                σ_R, the batch reward std the bonus is scaled by [L]
//	`reward_without_entropy_bonus`            mean utility before the bonus [L]
//	`reward_with_entropy_bonus`               mean utility after the bonus [L]
//	`entropy_bonus_mean`                      mean bonus [L]
//	`entropy_bonus_frac_of_base`              bonus mean / max(|reward without|, 1e-8) [L]
//	`entropy_bonus_frac_of_total`             bonus mean / max(|reward with|, 1e-8) [L]
//
//	# Listwise weights (from `PrepareStats`, `maxent_listwise` only)
//	`weight_entropy`                          mean over groups of H(w_g) [L, T]
//	`weight_entropy_norm`                     mean over groups of H(w_g)/ln K (0 when K = 1) [L]
//	`weight_entropy_min`                      minimum group weight entropy [L, T]
//	`weight_entropy_max`                      maximum group weight entropy [L, T]
//	`advantage_entropy_mean`                  mean of w_i − 1/K [L]
//	`advantage_entropy_std`                   population std of w_i − 1/K [L]
//	`maxent/listwise_weight_mean`             mean of all weights [T]
//	`maxent/listwise_weight_std`              population std of all weights [T]
//	`maxent/listwise_neutral_group_frac`      fraction of groups skipped for a flat q (max − min ≤ 1e-8); 0 unless `skip_zero_variance_groups` [T]
//	`maxent/listwise_active_group_frac`       1 − neutral fraction [T]
//	`maxent/weight_fallback`                  1 when uniform fallback weights were used [M]
//	`weight_norm_denom`                       weight temperature D (τ, or τ + β) [L, T]
//
//	# Policy-loss diagnostics (from `PolicyStats`)
//	`policy_confidence`                       exp(mean_new_logp) [W]
//	`mean_new_logp`                           Σ new / n over masked tokens [W]
//	`mean_old_logp`                           Σ old / n (behaviour log-probs) [W]
//	`logp_diff_mean`                          Σ (new − old) / n [W]
//	`approx_kl`                               Σ (e^d − d − 1) / n, d = new − old (K3 of KL(old‖new), no clamp) [W]
//	`token_kl_max`                            largest masked per-token K3 [W]
//	`token_ratio_max`                         largest masked e^d [W]
//	`entropy`                                 token-mean policy entropy [W]
//	`kl`                                      token-mean K3 to the reference, d = clamp(ref − new, ±5) [L, T]
//	`kl_per_token_bucket/{bucket}`            `kl` over completions of length 0-32, 33-64, 65-128, 129-256, 257+ [L]
//	`kl_per_token_bucket_tokens/{bucket}`     tokens in each bucket [L]
//	`clip_ratio`                              low + high [L, T, W]
//	`clip_ratio_low`                          fraction with r < 1 − ε and A < 0 (GSPO: sequences; CISPO: no sign gate) [W]
//	`clip_ratio_high`                         fraction with r > 1 + ε_high and A > 0 [W]
//	`clip_ratio/low_mean`                     same as `clip_ratio_low` (one learner: mean = min) [T]
//	`clip_ratio/low_min`                      same as `clip_ratio_low` [T]
//	`clip_ratio/high_mean`                    same as `clip_ratio_high` [T]
//	`clip_ratio/high_max`                     same as `clip_ratio_high` [T]
//	`clip_ratio/region_mean`                  same as `clip_ratio` [T]
//
//	# Completions (from `LengthStats`, `DiversityStats`)
//	`completions/mean_length_sampled`         mean completion length in tokens [L, T]
//	`completions/min_length_sampled`          minimum length [L, T]
//	`completions/max_length_sampled`          maximum length [L, T]
//	`completions/clipped_frac`                fraction truncated at the cap, in [0, 1] [L, T]
//	`completions/mean_length_terminated`      mean length of completions that ended on their own [L, T]
//	`completions/min_length_terminated`       their minimum [L, T]
//	`completions/max_length_terminated`       their maximum [L, T]
//	`completions/mean_length`                 TRL alias of `mean_length_sampled` [T]
//	`completions/min_length`                  TRL alias of `min_length_sampled` [T]
//	`completions/max_length`                  TRL alias of `max_length_sampled` [T]
//	`completions/clipped_ratio`               TRL alias of `clipped_frac` [T]
//	`completions/mean_terminated_length`      TRL alias of `mean_length_terminated` [T]
//	`completions/min_terminated_length`       TRL alias of `min_length_terminated` [T]
//	`completions/max_terminated_length`       TRL alias of `max_length_terminated` [T]
//	`completions/diversity/distinct_1`        mean over groups of unique / total unigrams of the concatenated group tokens (no tokens: 0) [L, T]
//	`completions/diversity/distinct_2`        same for bigrams, which cross completion boundaries [L, T]
//	`completions/diversity/jaccard`           mean over groups of mean pairwise 1 − |A∩B|/|A∪B| of token sets (empty union, K = 1: 0) [L, T]
//	`completions/diversity/distinct_1_micro`  group-size weighted mean of per-group distinct_1 (= distinct_1: every group has K) [L, T]
//	`completions/diversity/distinct_2_micro`  group-size weighted mean of per-group distinct_2 [L, T]
//	`completions/diversity/jaccard_micro`     group-size weighted mean of per-group jaccard [L, T]
//
//	# Controllers (from `ControllerMetrics`)
//	`tau`                                     τ after this step's update [L, T]
//	`beta`                                    β after this step's update [L, T]
//	`kl_coeff`                                β [L]
//	`weighting/tau`                           τ [L]
//	`weighting/beta`                          β [L]
//	`weight_entropy_ema`                      the tau controller's entropy EMA [L]
//	`tau_log`                                 ln max(τ, 1e-8) [L]
//	`q_temperature`                           T_q [L]
//	`q_epsilon`                               ε of q [L]
//	`tau_lr`                                  effective tau learning rate (lr · lr_scale) [L]
//	`tau_min`                                 τ lower bound [L]
//	`tau_max`                                 τ upper bound (≤ 0: unbounded) [L]
//	`tau_warmup_steps`                        tau warmup steps [L]
//	`tau_target_entropy`                      current target H*(step) (0 when no target) [L]
//	`tau_target_enabled`                      1 when the tau controller has a target [L]
//	`tau_schedule_active`                     meta off, target set and step > max(0, warmup) [L]
//	`kl_controller_target`                    β controller KL target [L]
//	`kl_controller_horizon`                   its horizon [L]
//	`kl_controller_step_size`                 its step size [L]
//	`kl_controller_enabled`                   1 when target, horizon and step size are all > 0 [L, T]
//	`kl_controller/target`                    alias [L]
//	`kl_controller/horizon`                   alias [L]
//	`kl_controller/step_size`                 alias [L]
//	`kl_controller/enabled`                   alias [L, T]
//	`len_norm_ref`                            1 when reference log-probs are length-normalised [L]
//	`delta_tau`                               τ − τ at the previous logged step [L]
//	`delta_tau_abs`                           |delta_tau| [L]
//	`delta_beta`                              β − β at the previous logged step [L]
//	`delta_beta_abs`                          |delta_beta| [L]
//	`weighting/*`                             every key of this table from `weight_norm_denom` on (except the errors below) mirrored under `weighting/` [L]
//	`kl_error_to_target`                      KL − KL target (when target > 0) [L]
//	`kl_ratio_to_target`                      KL / max(target, 1e-8) [L]
//	`weight_entropy_error`                    H − H*(step) (when a target is set) [L]
//	`weight_entropy_abs_error`                |H − H*| [L]
//	`tau_loss`                                ½ (H − H*)² [L]
//	`weighting/tau_loss`                      same [L]
//	`meta/enabled`                            1 when the meta-controller is on [L]
//	`meta/lr`                                 shared meta learning rate [L]
//	`meta/update_interval`                    meta interval [L]
//	`meta/truncation_steps`                   truncated-backprop steps [L]
//	`meta/use_hessian`                        recorded flag [L]
//	`meta/tau_grad`                           ∂J/∂τ of this step [L, T]
//	`meta/beta_grad`                          ∂J/∂β of this step [L, T]
//	`meta/grad_norm`                          sqrt(g_τ² + g_β²) [L]
package rewards
