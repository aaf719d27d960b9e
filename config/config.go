package config

import (
	"slices"
	"strings"
	"time"
)

// Config is the whole configuration of a trainer node: one section per
// concern. Keys are snake_case and spelled the same in every layer
// (file `train: {max_staleness: 2}`, env MGRPO_TRAIN__MAX_STALENESS=2,
// flag --train.max_staleness=2). The `help` tag is the one-line usage shown
// by --help and written as a comment by YAML.
type Config struct {
	Model      Model      `koanf:"model" help:"policy model"`
	Task       Task       `koanf:"task" help:"training task and data"`
	Generation Generation `koanf:"generation" help:"sampling of completions"`
	Rewards    Rewards    `koanf:"rewards" help:"reward functions"`
	MaxEnt     MaxEnt     `koanf:"maxent" help:"objective and MaxEnt-GRPO knobs"`
	Controller Controller `koanf:"controller" help:"tau, beta and meta controllers"`
	Loss       Loss       `koanf:"loss" help:"policy loss"`
	Optim      Optim      `koanf:"optim" help:"optimiser"`
	Train      Train      `koanf:"train" help:"training loop"`
	Cluster    Cluster    `koanf:"cluster" help:"node role and cluster membership"`
	Trace      Trace      `koanf:"trace" help:"OpenTelemetry tracing"`
	Output     Output     `koanf:"output" help:"run directory and logging"`
	Metrics    Metrics    `koanf:"metrics" help:"optional training diagnostics"`
}

// Model selects the policy architecture (DESIGN §4) and where its weights
// come from. A preset gives every dimension; a non-zero explicit dimension
// overrides the preset's value, and with preset "" all of hidden, layers,
// heads and mlp must be given.
type Model struct {
	// Preset is tiny, small, base, smollm2-135m, qwen2.5-0.5b or "" for
	// explicit dimensions.
	Preset string `koanf:"preset" help:"tiny|small|base|smollm2-135m|qwen2.5-0.5b, or \"\" for explicit dims"`
	// Hidden is the residual width; 0 takes the preset's.
	Hidden int `koanf:"hidden" help:"hidden size (0 = preset)"`
	// Layers is the number of decoder blocks; 0 takes the preset's.
	Layers int `koanf:"layers" help:"decoder layers (0 = preset)"`
	// Heads is the number of query heads; 0 takes the preset's.
	Heads int `koanf:"heads" help:"attention heads (0 = preset)"`
	// KVHeads is the number of key/value heads (grouped-query attention);
	// 0 means equal to Heads.
	KVHeads int `koanf:"kv_heads" help:"key/value heads (0 = heads)"`
	// MLP is the SwiGLU inner width; 0 takes the preset's.
	MLP int `koanf:"mlp" help:"MLP inner size (0 = preset)"`
	// Context is the maximum sequence length in tokens; 0 takes the preset's.
	Context int `koanf:"context" help:"context length in tokens (0 = preset)"`
	// RopeTheta is the RoPE base frequency; 0 takes the preset's (10000
	// for tiny, small, base and explicit dimensions).
	RopeTheta float64 `koanf:"rope_theta" help:"RoPE base frequency (0 = preset)"`
	// TieEmbeddings shares the token embedding with lm_head; a preset
	// whose model is tied (smollm2-135m, qwen2.5-0.5b) is tied either way.
	TieEmbeddings bool `koanf:"tie_embeddings" help:"tie lm_head to the token embedding (tied presets are always tied)"`
	// Checkpoint is a checkpoint directory to start from (config.json and
	// model.safetensors, or the shards of model.safetensors.index.json);
	// "" starts from random weights (and a warm start).
	Checkpoint string `koanf:"checkpoint" help:"checkpoint directory to load (\"\" = random init)"`
	// Device is cpu or cuda (the GPU: mgrpo-node hands the run to
	// mgrpo-node-cuda, built with make build-cuda).
	Device string `koanf:"device" help:"cpu|cuda (cuda: the run goes to mgrpo-node-cuda beside mgrpo-node)"`
	// DType is the precision of the matrix products: float32 (on cuda
	// TF32 tensor cores), or bf16 (cuda only: bf16 products with fp32
	// sums, fp32 weights, gradients and optimiser, as PyTorch's autocast).
	DType string `koanf:"dtype" help:"products' precision: float32 (TF32 on cuda) | bf16 (cuda only; fp32 weights and optimiser)"`
	// Seed seeds the weight initialisation.
	Seed int64 `koanf:"seed" help:"weight initialisation seed"`
}

// Task selects the verifiable-reward task and its data.
type Task struct {
	// Name is addition, countdown or wordproblems.
	Name string `koanf:"name" help:"addition|countdown|wordproblems"`
	// Digits is the number of digits of each addition operand.
	Digits int `koanf:"digits" help:"addition: digits per operand"`
	// Numbers is how many numbers a countdown prompt gives.
	Numbers int `koanf:"numbers" help:"countdown: numbers per prompt"`
	// MaxNumber is the largest countdown number (numbers are in 1..MaxNumber).
	MaxNumber int `koanf:"max_number" help:"countdown: largest number"`
	// Steps is the number of arithmetic steps of a word problem.
	Steps int `koanf:"steps" help:"wordproblems: steps per problem"`
	// Dataset is a data file, JSONL or Parquet (told by the extension),
	// whose rows are verified by the task Name; "" generates problems
	// from Seed.
	Dataset string `koanf:"dataset" help:"data file, .jsonl or .parquet, verified by task.name (\"\" = generate)"`
	// PromptField is the data set's prompt column; "" takes the first of
	// prompt, question, problem.
	PromptField string `koanf:"prompt_field" help:"prompt column of task.dataset (\"\" = prompt, question or problem)"`
	// AnswerField is the data set's answer column; "" takes the first of
	// answer, solution.
	AnswerField string `koanf:"answer_field" help:"answer column of task.dataset (\"\" = answer or solution)"`
	// EvalDataset is a separate file of held-out rows for evaluation.
	EvalDataset string `koanf:"eval_dataset" help:"held-out data file for evaluation (\"\" = none)"`
	// EvalFraction is the share of the data set's rows held out for
	// evaluation (shuffled with Seed) when EvalDataset is "".
	EvalFraction float64 `koanf:"eval_fraction" help:"share of task.dataset rows held out for evaluation, in [0, 1)"`
	// PromptTemplate wraps each prompt as a chat turn: "" (the raw text,
	// with the tokenizer's BOS), llama3, chatml, or tokenizer (the
	// checkpoint's own chat_template).
	PromptTemplate string `koanf:"prompt_template" help:"\"\" (raw text)|llama3|chatml|tokenizer (the checkpoint's chat_template)"`
	// SystemPrompt is a system message put before each prompt by the
	// prompt template ("" for none).
	SystemPrompt string `koanf:"system_prompt" help:"system message of the prompt template (\"\" = none)"`
	// Seed seeds problem generation (training and held-out sets).
	Seed int64 `koanf:"seed" help:"problem generator seed"`
}

// Generation controls how completions are sampled.
type Generation struct {
	// NumGenerations is K, the completions per prompt (the group size).
	NumGenerations int `koanf:"num_generations" help:"completions per prompt (group size K)"`
	// Temperature divides the logits before sampling; at least
	// MinTemperature.
	Temperature float64 `koanf:"temperature" help:"sampling temperature (>= 0.001)"`
	// TopK keeps the K most likely tokens and any tied with the K-th; 0
	// keeps all.
	TopK int `koanf:"top_k" help:"top-k sampling (0 = off)"`
	// TopP keeps the smallest set of most likely tokens with mass >= TopP,
	// measured after TopK (renormalised, as Hugging Face); 1 keeps all.
	TopP float64 `koanf:"top_p" help:"nucleus sampling mass (1 = off)"`
	// MaxCompletionLen is the most tokens generated per completion; a
	// completion that reaches it finishes with reason LENGTH.
	// When no layer sets it, it is raised to fit the task's longest
	// correct answer (config/difficulty.go).
	MaxCompletionLen int `koanf:"max_completion_len" help:"max generated tokens per completion (unset: fits the task's longest answer)"`
	// RetryRounds is how many times a generator re-samples prompts whose
	// completions came back missing before the batch is skipped.
	RetryRounds int `koanf:"retry_rounds" help:"re-sampling rounds for missing completions"`
}

// Rewards lists the reward functions and how they combine into a utility.
type Rewards struct {
	// Funcs names the reward functions (accuracy, format, length, ...).
	Funcs []string `koanf:"funcs" help:"reward functions, comma-separated"`
	// Weights are the per-function weights of the utility u = Σ w_k r_k;
	// empty means 1.0 each.
	Weights []float64 `koanf:"weights" help:"reward weights, comma-separated (empty = 1 each)"`
	// ZeroTruncatedCompletionRewards gives 0 reward to completions that hit
	// max_completion_len.
	ZeroTruncatedCompletionRewards bool `koanf:"zero_truncated_completion_rewards" help:"zero the reward of length-truncated completions"`
	// Shuffle permutes the completions' rewards within each batch: a
	// control run, whose learning (if any) does not come from the reward.
	Shuffle bool `koanf:"shuffle" help:"control run: permute the rewards of a batch's completions (learning that survives this does not come from the reward)"`
	// ScaleRewards divides group advantages by the unbiased group std + 1e-4
	// (spec §1.4); false gives Dr.GRPO-style u - mean.
	ScaleRewards bool `koanf:"scale_rewards" help:"divide advantages by the group std"`
}

// Objective names.
const (
	ObjectiveGRPO             = "grpo"
	ObjectiveGRPOEntropyBonus = "grpo_entropy_bonus"
	ObjectiveMaxEntEntropy    = "maxent_entropy"
	ObjectiveMaxEntListwise   = "maxent_listwise"
)

// Weight denominators (DESIGN §3).
const (
	WeightDenominatorTau         = "tau"
	WeightDenominatorTauPlusBeta = "tau_plus_beta"
)

// MaxEnt selects the objective and holds the MaxEnt-GRPO knobs
// (maxent-grpo-spec.md §0, §1, §4.1).
type MaxEnt struct {
	// Objective is grpo, grpo_entropy_bonus, maxent_entropy or maxent_listwise.
	Objective string `koanf:"objective" help:"grpo|grpo_entropy_bonus|maxent_entropy|maxent_listwise"`
	// Tau is the listwise temperature τ (> 0 for maxent_listwise); the
	// starting value when the tau controller is on.
	Tau float64 `koanf:"tau" help:"listwise temperature tau (0..1000)"`
	// Beta is the KL coefficient β towards the reference policy, for every
	// objective; the starting value when the beta controller is on.
	Beta float64 `koanf:"beta" help:"KL coefficient beta (0..1000)"`
	// Alpha is the token-entropy coefficient of maxent_entropy.
	Alpha float64 `koanf:"alpha" help:"maxent_entropy: entropy coefficient (0..1000)"`
	// QTemperature is applied once, when q is formed from utilities.
	QTemperature float64 `koanf:"q_temperature" help:"temperature of the q-distribution (> 0, at most 1000)"`
	// QEpsilon is the floor mixed into q before normalising.
	QEpsilon float64 `koanf:"q_epsilon" help:"q floor (>= 0)"`
	// LengthNormalizeRef divides reference log-probs by the token count.
	LengthNormalizeRef bool `koanf:"length_normalize_ref" help:"length-normalise reference log-probs"`
	// LengthNormalizePolicy divides policy sequence log-probs by the token count.
	LengthNormalizePolicy bool `koanf:"length_normalize_policy" help:"length-normalise policy log-probs"`
	// WeightDenominator is tau (the original trainer) or tau_plus_beta (the paper).
	WeightDenominator string `koanf:"weight_denominator" help:"tau|tau_plus_beta"`
	// SkipZeroVarianceGroups drops groups whose utilities are all equal
	// from the listwise loss.
	SkipZeroVarianceGroups bool `koanf:"skip_zero_variance_groups" help:"listwise: skip groups with equal utilities"`
	// ClipObjective adds the PPO-clipped advantage term to the listwise loss.
	ClipObjective bool `koanf:"clip_objective" help:"listwise: add the clipped advantage objective"`
	// ClipObjectiveCoef scales that term.
	ClipObjectiveCoef float64 `koanf:"clip_objective_coef" help:"listwise: coefficient of the clip objective (0..1000)"`
	// ClipAdvBaseline is the baseline subtracted from weights to form clip
	// advantages; 0 means 1/K.
	ClipAdvBaseline float64 `koanf:"clip_adv_baseline" help:"listwise: clip advantage baseline (0 = 1/K)"`
	// EntropyBonusCoef is c of grpo_entropy_bonus: u_i += c·σ_R·z(h_i) (spec §1.6).
	EntropyBonusCoef float64 `koanf:"entropy_bonus_coef" help:"grpo_entropy_bonus: bonus coefficient (> 0 there, at most 1000; 0 otherwise)"`
	// SeedGRPO scales advantages by semantic entropy (spec §1.5).
	SeedGRPO SeedGRPO `koanf:"seed_grpo" help:"SEED-GRPO advantage scaling"`
}

// SeedGRPO holds the SEED-GRPO knobs (spec §1.5). Only GRPO objectives may
// enable it.
type SeedGRPO struct {
	// Enabled turns the scaling on.
	Enabled bool `koanf:"enabled" help:"enable SEED-GRPO (GRPO objectives only)"`
	// Alpha is the strength α of scale = 1/(1 + α_eff·H).
	Alpha float64 `koanf:"alpha" help:"strength alpha (0..1000)"`
	// NormalizeByMaxEntropy uses α_eff = α / ln K.
	NormalizeByMaxEntropy bool `koanf:"normalize_by_max_entropy" help:"divide alpha by ln K"`
	// LengthNormalizeLogprobs divides each completion's log-prob by its length.
	LengthNormalizeLogprobs bool `koanf:"length_normalize_logprobs" help:"length-normalise completion log-probs"`
}

// Controller holds the tau, beta and meta controllers (spec §2). They
// update once per optimiser step from the step's global statistics.
type Controller struct {
	Tau  TauController  `koanf:"tau" help:"target-weight-entropy controller for tau"`
	Beta BetaController `koanf:"beta" help:"KL controller for beta"`
	Meta MetaController `koanf:"meta" help:"meta-controller for tau and beta"`
}

// TauController steers τ so that the EMA of the weight entropy tracks a
// target (spec §2.1): log τ += lr·(H* − ema).
type TauController struct {
	// Enabled turns the controller on.
	Enabled bool `koanf:"enabled" help:"enable the tau controller"`
	// TargetEntropy is H*, in nats (at most ln K); the start of the
	// schedule when Horizon > 0.
	TargetEntropy float64 `koanf:"target_entropy" help:"target weight entropy in nats"`
	// TargetEntropyFinal is the schedule's end value, reached linearly at
	// step Horizon; used only when Horizon > 0.
	TargetEntropyFinal float64 `koanf:"target_entropy_final" help:"final target entropy (with horizon > 0)"`
	// Horizon is the schedule length in steps; 0 keeps TargetEntropy.
	Horizon int `koanf:"horizon" help:"steps of the linear target schedule (0 = constant)"`
	// LR is the log-space learning rate.
	LR float64 `koanf:"lr" help:"log-space learning rate (at most 1; > 0 when enabled)"`
	// Min is the lower bound of τ.
	Min float64 `koanf:"min" help:"lower bound of tau"`
	// Max is the upper bound of τ; 0 means unbounded.
	Max float64 `koanf:"max" help:"upper bound of tau (0 = none)"`
	// WarmupSteps holds τ fixed for the first steps.
	WarmupSteps int `koanf:"warmup_steps" help:"steps before the controller acts"`
	// EMADecay is the decay of the weight-entropy moving average.
	EMADecay float64 `koanf:"ema_decay" help:"decay of the entropy EMA, in [0, 1)"`
}

// BetaController scales β multiplicatively towards a KL target
// (spec §2.2): β ← β·(1 + clip(KL/target − 1, ±step)/horizon).
type BetaController struct {
	// Enabled turns the controller on.
	Enabled bool `koanf:"enabled" help:"enable the beta controller"`
	// KLTarget is the per-token KL the controller aims for, in nats.
	KLTarget float64 `koanf:"kl_target" help:"target KL in nats (> 0 when enabled)"`
	// Horizon is the controller's time constant in steps.
	Horizon int `koanf:"horizon" help:"time constant in steps (> 0 when enabled)"`
	// StepSize clips the relative error per step.
	StepSize float64 `koanf:"step_size" help:"clip of the relative KL error (> 0 when enabled)"`
}

// metaMethods lists the meta-controller method names (spec §2.3).
func metaMethods() []string {
	return []string{"analytic", "analytic_grad", "potential", "first_order", "truncated", "truncated_backprop", "backprop"}
}

// MetaController updates τ and β by gradient steps on an objective
// (spec §2.3). When enabled it replaces the plain tau and beta controllers.
type MetaController struct {
	// Enabled turns the meta-controller on.
	Enabled bool `koanf:"enabled" help:"enable the meta-controller"`
	// Method is the controller objective: analytic (g_τ = H − H*,
	// g_β = KL − KL*) or one of its aliases analytic_grad and potential, or
	// the truncated-backprop family first_order, truncated,
	// truncated_backprop and backprop, which falls back to the analytic
	// gradients when no backprop callback gives any (as the original's
	// listwise loss, whose weights do not carry τ's gradient). An unknown
	// name is refused here; the original accepted it, fell back to the
	// analytic objective and updated (so does rewards.Controllers).
	Method string `koanf:"method" help:"analytic|analytic_grad|potential|first_order|truncated|truncated_backprop|backprop"`
	// LR is the shared learning rate.
	LR float64 `koanf:"lr" help:"shared learning rate (0..1)"`
	// TauLR overrides LR for τ when > 0.
	TauLR float64 `koanf:"tau_lr" help:"learning rate for tau (0 = lr; at most 1)"`
	// BetaLR overrides LR for β when > 0.
	BetaLR float64 `koanf:"beta_lr" help:"learning rate for beta (0 = lr; at most 1)"`
	// BetaGradClip clips g_β; 0 means no clip.
	BetaGradClip float64 `koanf:"beta_grad_clip" help:"clip of the beta gradient (0 = none)"`
	// Interval runs the update every Interval optimiser steps.
	Interval int `koanf:"interval" help:"optimiser steps between updates"`
}

// Loss types and policy-loss variants.
const (
	LossGRPO   = "grpo"
	LossBNPO   = "bnpo"
	LossDrGRPO = "dr_grpo"

	PolicyLossVanilla = "vanilla"
	PolicyLossGSPO    = "gspo"
	PolicyLossCISPO   = "cispo"
)

// Loss chooses how token losses are averaged and which policy-loss
// variant runs.
type Loss struct {
	// Type is grpo (per-sequence mean), bnpo (batch token mean) or dr_grpo
	// (fixed max-length denominator).
	Type string `koanf:"type" help:"grpo|bnpo|dr_grpo"`
	// PolicyLoss is vanilla (PPO clip per token), gspo (sequence-level
	// ratio) or cispo (clipped IS weight, unconditional clip).
	PolicyLoss string `koanf:"policy_loss" help:"vanilla|gspo|cispo"`
	// Epsilon is the lower (and by default upper) clip range ε.
	Epsilon float64 `koanf:"epsilon" help:"clip range epsilon (> 0)"`
	// EpsilonHigh is DAPO's clip-higher bound; 0 means Epsilon.
	EpsilonHigh float64 `koanf:"epsilon_high" help:"upper clip range (0 = epsilon)"`
	// ISRatioMax truncates the off-policy importance ratio
	// π_old/π_behaviour at this value; 0 means no correction.
	ISRatioMax float64 `koanf:"is_ratio_max" help:"truncation of the behaviour importance ratio (0 = off)"`
}

// LR schedules.
const (
	ScheduleConstant = "constant"
	ScheduleCosine   = "cosine"
	ScheduleLinear   = "linear"
)

// Optim configures AdamW for the RL phase and the supervised warm start.
type Optim struct {
	// LR is the RL learning rate, in (0, maxLR]: AdamW moves every weight
	// by about LR per step, so a larger rate cannot be meant.
	LR float64 `koanf:"lr" help:"RL learning rate, in (0, 1]"`
	// WarmStartLR is the supervised warm-start learning rate (10–20× LR),
	// in (0, maxLR].
	WarmStartLR float64 `koanf:"warm_start_lr" help:"warm-start learning rate, in (0, 1]"`
	// Beta1 is Adam's first-moment decay.
	Beta1 float64 `koanf:"beta1" help:"Adam beta1, in [0, 1)"`
	// Beta2 is Adam's second-moment decay.
	Beta2 float64 `koanf:"beta2" help:"Adam beta2, in [0, 1)"`
	// Eps is Adam's denominator floor.
	Eps float64 `koanf:"eps" help:"Adam epsilon (> 0)"`
	// WeightDecay is decoupled (AdamW) weight decay.
	WeightDecay float64 `koanf:"weight_decay" help:"AdamW weight decay (>= 0; lr × weight_decay below 1)"`
	// GradClip clips the global gradient norm; 0 means no clip.
	GradClip float64 `koanf:"grad_clip" help:"max global gradient norm (0 = off)"`
	// Schedule is constant, cosine or linear (decay to 0 at train.steps).
	Schedule string `koanf:"schedule" help:"constant|cosine|linear"`
	// WarmupSteps ramps the learning rate linearly from 0.
	WarmupSteps int `koanf:"warmup_steps" help:"linear LR warmup steps"`
	// MaxUpdateRatio rolls back an optimiser step that changed the weights
	// by more than this multiple of their norm, and skips the step as
	// NON_FINITE_UPDATE (a step leaving any weight non-finite always is);
	// 0 turns the size check off.
	MaxUpdateRatio float64 `koanf:"max_update_ratio" help:"roll back and skip a step whose update norm exceeds this multiple of the weights' norm (0 = off; non-finite updates are always rolled back)"`
}

// Train is the training loop: how many steps, how large, how asynchronous.
type Train struct {
	// Steps is the number of RL optimiser steps.
	Steps int `koanf:"steps" help:"RL optimiser steps"`
	// PromptsPerStep is the number of prompt groups per optimiser step.
	PromptsPerStep int `koanf:"prompts_per_step" help:"prompt groups per step"`
	// PromptsPerPart is the unit of generation and reference-scoring work:
	// a step's prompts are cut into parts of this many groups, spread over
	// the actors of each stage and reissued whole if an actor fails. The
	// numbers a run produces depend on it, never on how many actors share
	// the parts.
	PromptsPerPart int `koanf:"prompts_per_part" help:"prompt groups per unit of generation and reference-scoring work (results do not depend on how many actors share the parts)"`
	// MicroBatch is how many sequences the learner runs forward and
	// backward at once (gradient accumulation): a step of
	// prompts_per_step × num_generations sequences is cut into parts of
	// this size, whose gradients add up to the whole batch's before one
	// update, at the cost of one more forward pass. The step is the same
	// (to float rounding); the learner's activations shrink with the part.
	// 0 takes the whole batch in one pass. It applies to the warm start's
	// batches too.
	MicroBatch int `koanf:"micro_batch" help:"sequences per learner forward/backward pass, gradients accumulated over the step's batch (0 = the whole batch; lowers the learner's memory, costs one more forward pass)"`
	// WarmStartSteps caps the supervised steps before RL; the warm start
	// stops earlier once greedy accuracy holds 40% (DESIGN §4). 0 skips it.
	// When no layer sets it, it is raised for a harder task to what that
	// task was measured to need (config/difficulty.go, docs/RESULTS.md).
	WarmStartSteps int `koanf:"warm_start_steps" help:"most supervised warm-start steps; it stops earlier once greedy accuracy holds 40% (0 = none; unset: follows the task's difficulty)"`
	// WarmStartFromCheckpoint runs the warm start from model.checkpoint too
	// (otherwise a checkpoint is the RL start as it is).
	WarmStartFromCheckpoint bool `koanf:"warm_start_from_checkpoint" help:"run the warm start from model.checkpoint too"`
	// WarmStartBatch is the number of sequences per warm-start step.
	WarmStartBatch int `koanf:"warm_start_batch" help:"sequences per warm-start step"`
	// MaxStaleness is how many policy versions generators may run ahead of
	// the learner. 0 means synchronous, on-policy training.
	MaxStaleness int `koanf:"max_staleness" help:"policy versions generators may run ahead (0 = on-policy)"`
	// SyncEvery publishes weights to generators every SyncEvery steps.
	SyncEvery int `koanf:"sync_every" help:"optimiser steps between weight syncs"`
	// DynamicSampling drops zero-variance groups and refills the batch (DAPO).
	DynamicSampling bool `koanf:"dynamic_sampling" help:"drop zero-variance groups and refill"`
	// DynamicSamplingMaxRounds bounds the refill rounds per step.
	DynamicSamplingMaxRounds int `koanf:"dynamic_sampling_max_rounds" help:"max refill rounds per step"`
	// MaxSkippedSteps stops the run, with a checkpoint and exit code 4,
	// after this many consecutive skipped steps: a run that skips every
	// step (a learning rate that makes every update non-finite, a timeout
	// no stage can meet) cannot make progress. 0 never stops.
	MaxSkippedSteps int `koanf:"max_skipped_steps" help:"stop the run (checkpoint, exit 4) after this many consecutive skipped steps (0 = never)"`
	// CheckpointEvery saves a checkpoint every N steps; 0 only at the end.
	CheckpointEvery int `koanf:"checkpoint_every" help:"steps between checkpoints (0 = at the end)"`
	// EvalEvery measures greedy accuracy every N steps; 0 never.
	EvalEvery int `koanf:"eval_every" help:"steps between greedy evaluations, the last step evaluated too (0 = off)"`
	// EvalPrompts is the size of the held-out evaluation set.
	EvalPrompts int `koanf:"eval_prompts" help:"held-out prompts per evaluation"`
	// Guard is what the run does when its metrics say it cannot learn
	// (policy flattening towards uniform, every group tied, no reward):
	// GuardStop warns and stops with a checkpoint on the rules that mean
	// the run will not recover, GuardWarn only warns, GuardOff says nothing.
	Guard string `koanf:"guard" help:"collapse and no-signal guards: stop (warn, and stop with a checkpoint when the run cannot recover), warn, or off"`
	// Seed seeds sampling and batch order.
	Seed int64 `koanf:"seed" help:"training seed"`
	// Resume is a run directory to continue from its last complete
	// checkpoint ("" starts fresh).
	Resume string `koanf:"resume" help:"run directory to resume"`
}

// Roles a node can run.
const (
	RoleAll       = "all"
	RoleLearner   = "learner"
	RoleGenerator = "generator"
	RoleReward    = "reward"
	RoleReference = "reference"
)

// Roles lists every role in a fixed order.
func Roles() []string {
	return []string{RoleAll, RoleLearner, RoleGenerator, RoleReward, RoleReference}
}

// Cluster places this node: which roles it runs and how it finds the
// others.
type Cluster struct {
	// Role is all (every actor in this process) or a comma-separated list
	// of learner, generator, reward and reference.
	Role string `koanf:"role" help:"all, or a comma list of learner|generator|reward|reference"`
	// Name is the cluster name; nodes see only members of their cluster.
	Name string `koanf:"name" help:"cluster name"`
	// Host is the address every port of the node binds and advertises.
	Host string `koanf:"host" help:"bind host (anything but loopback needs cluster.tls.* or cluster.insecure)"`
	// Port is the membership port of a learner node, the one worker nodes
	// name in --cluster.seeds; 0 means 6330.
	Port int `koanf:"port" help:"membership port of a learner node (0 = 6330)"`
	// RemotePort is the port of the node's actor system (gRPC); 0 picks a
	// free one, which membership advertises.
	RemotePort int `koanf:"remote_port" help:"actor-system (gRPC) port (0 = any free port)"`
	// Advertise is the host, or host:port, other nodes dial to reach this
	// node's actor system (the port as seen from them: behind NAT, say);
	// "" advertises Host, or for a wildcard Host (0.0.0.0, ::) this
	// machine's first non-loopback address.
	Advertise string `koanf:"advertise" help:"host[:port] other nodes dial to reach this node's actors (\"\" = cluster.host; for 0.0.0.0 or ::, this machine's first non-loopback address)"`
	// Seeds are the membership addresses (host:port) of the learner node:
	// where a worker node finds the run.
	Seeds []string `koanf:"seeds" help:"host:port of the learner node's membership port, comma-separated"`
	// Generators is the number of generator actors a node of role all or
	// generator starts.
	Generators int `koanf:"generators" help:"generator actors on a generator node"`
	// MinGenerators is how many generator actors a learner node waits for
	// before it generates for the first time (all of them, from every node,
	// counted together); later steps go on with whichever remain.
	MinGenerators int `koanf:"min_generators" help:"generator actors the learner waits for before its first generation (later steps use whichever remain)"`
	// RewardEvaluators is the number of reward evaluators a reward node
	// starts.
	RewardEvaluators int `koanf:"reward_evaluators" help:"reward evaluators on a reward node"`
	// MaxMessageBytes is the gRPC message limit every node sets.
	MaxMessageBytes int `koanf:"max_message_bytes" help:"gRPC max message size in bytes (every node)"`
	// WeightChunkBytes is the largest PolicyWeights chunk.
	WeightChunkBytes int `koanf:"weight_chunk_bytes" help:"bytes per weight-sync chunk (< max_message_bytes)"`
	// WeightStream sends weights to other nodes over a port of the
	// learner node's own (WeightPort), in one stream each, instead of as
	// PolicyWeights messages through the actor system.
	WeightStream bool `koanf:"weight_stream" help:"send weights to other nodes as one stream from the learner node's weight port (false: as actor messages)"`
	// WeightPort is the learner node's weight port; 0 picks a free one,
	// which the learner names to each node with every new version.
	WeightPort int `koanf:"weight_port" help:"weight port of a learner node, with cluster.weight_stream (0 = any free port)"`
	// RequestTimeout bounds a request to a stage actor: at least
	// minRequestTimeout, or 0 (the default) for each stage's own, sized
	// from the work a request holds (at least 30 s).
	RequestTimeout time.Duration `koanf:"request_timeout" help:"timeout of one request to a stage actor (>= 10ms; 0: each stage's sized from its work, at least 30s)"`
	// Hedge sends a part still running after three times the fastest
	// node's average answer (at least 50 ms) to an idle actor as well,
	// through other nodes (another generator node, or for a part relayed
	// to a reward+reference node, another such node); the first answer
	// counts, and results do not change (a part's result never depends on
	// its node).
	Hedge bool `koanf:"hedge" help:"send a part still running after 3x the fastest node's time to an idle actor too, through other nodes; the first answer counts"`
	// TLS is the mutual TLS of every connection between nodes.
	TLS TLS `koanf:"tls" help:"mutual TLS between nodes"`
	// Insecure allows plaintext between nodes on a non-loopback host.
	Insecure bool `koanf:"insecure" help:"allow plaintext between nodes on a non-loopback cluster.host (prints a warning)"`
}

// TLS names the PEM files of a node's mutual TLS (mgrpo-node certs writes
// them): all three, or none.
type TLS struct {
	// CA is the cluster's CA certificate: peers must be signed by it.
	CA string `koanf:"ca" help:"CA certificate (PEM) that every node's certificate is signed by"`
	// Cert and Key are this node's certificate and private key.
	Cert string `koanf:"cert" help:"this node's certificate (PEM)"`
	Key  string `koanf:"key" help:"this node's private key (PEM)"`
}

// Roles of a node: RoleAll alone, or a list of the others.
func (c Cluster) Roles() []string {
	var out []string
	for _, r := range strings.Split(c.Role, ",") {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// HasRole reports whether the node runs role (all runs every role).
func (c Cluster) HasRole(role string) bool {
	roles := c.Roles()
	return slices.Contains(roles, role) || slices.Contains(roles, RoleAll)
}

// Trace configures OpenTelemetry export.
type Trace struct {
	// OTLPEndpoint is host:port of an OTLP collector; "" exports no spans
	// there.
	OTLPEndpoint string `koanf:"otlp_endpoint" help:"OTLP collector host:port (\"\" = none)"`
	// Protocol is grpc (port 4317) or http (port 4318).
	Protocol string `koanf:"protocol" help:"grpc|http, the OTLP protocol"`
	// File, when set, receives every span as one JSON line (a run without
	// a collector); with neither File nor OTLPEndpoint tracing is off.
	File string `koanf:"file" help:"JSONL file of spans (\"\" = none)"`
	// SampleRatio is the fraction of steps traced, in [0, 1], decided
	// once per step: a sampled step has all its spans, others none.
	SampleRatio float64 `koanf:"sample_ratio" help:"fraction of steps traced, decided once per step"`
	// SlowStep marks a step slow: a duration (slower than that), auto
	// (slower than twice the median of the last 50 steps, and at least 50
	// ms above it) or 0 (never).
	SlowStep string `koanf:"slow_step" help:"slow-step threshold: a duration, auto (2x the running median of 50 steps, and 50 ms above it) or 0 (off)"`
	// ServiceName is the OTel service.name.
	ServiceName string `koanf:"service_name" help:"OTel service name"`
	// QueryURL is the Jaeger query API used by `mgrpo-node traces`.
	QueryURL string `koanf:"query_url" help:"Jaeger query API base URL (mgrpo-node traces)"`
}

// The values of train.guard.
const (
	GuardStop = "stop"
	GuardWarn = "warn"
	GuardOff  = "off"
)

// SlowStepAuto is the trace.slow_step value that marks a step slower than
// twice the running median.
const SlowStepAuto = "auto"

// SlowThreshold parses trace.slow_step: auto, a fixed duration (0: off).
func (t Trace) SlowThreshold() (fixed time.Duration, auto bool, err error) {
	if t.SlowStep == SlowStepAuto {
		return 0, true, nil
	}
	if t.SlowStep == "" || t.SlowStep == "0" {
		return 0, false, nil
	}
	d, err := time.ParseDuration(t.SlowStep)
	return d, false, err
}

// Output says where a run writes and how often.
type Output struct {
	// Dir is the parent of run directories.
	Dir string `koanf:"dir" help:"parent directory of runs"`
	// Name is the run name (runs/<name>); "" derives one from the task,
	// objective and start time.
	Name string `koanf:"name" help:"run name (\"\" = derived)"`
	// LogEvery writes metrics every N steps.
	LogEvery int `koanf:"log_every" help:"steps between metrics lines"`
	// SampleEvery writes a sample table every N steps; 0 never.
	SampleEvery int `koanf:"sample_every" help:"steps between sample tables (0 = off)"`
	// SampleRows is the number of completions per sample table.
	SampleRows int `koanf:"sample_rows" help:"rows per sample table"`
	// KeepCheckpoints keeps the newest N checkpoints plus the one with the
	// best greedy accuracy (eval), deleting older ones after each save;
	// 0 keeps all.
	KeepCheckpoints int `koanf:"keep_checkpoints" help:"keep the newest N checkpoints plus the best by greedy accuracy (0 = all)"`
	// TensorBoard also writes every metrics line as a TensorBoard event
	// (runs/<name>/tensorboard/).
	TensorBoard bool `koanf:"tensorboard" help:"also write the metrics as TensorBoard event files (runs/<name>/tensorboard/)"`
	// PrometheusPort serves this node's OpenTelemetry metrics for
	// Prometheus at http://<cluster.host>:<port>/metrics; 0 is off. Each
	// node of one machine needs its own.
	PrometheusPort int `koanf:"prometheus_port" help:"serve this node's metrics at http://<cluster.host>:<port>/metrics (0 = off; one port per node)"`
	// Pprof also serves Go's runtime profiles (net/http/pprof: CPU, heap,
	// goroutines, execution trace) on the Prometheus port, under
	// /debug/pprof/. Off by default: a CPU profile or trace costs the
	// node time while it runs, and the port is plain HTTP.
	Pprof bool `koanf:"pprof" help:"also serve Go's profiles at http://<cluster.host>:<output.prometheus_port>/debug/pprof/ (go tool pprof)"`
	// OTLPMetricsEndpoint is host:port of an OTLP collector that receives
	// this node's metrics over trace.protocol; "" sends none.
	OTLPMetricsEndpoint string `koanf:"otlp_metrics_endpoint" help:"OTLP collector host:port for this node's metrics, over trace.protocol (\"\" = none)"`
	// Serve is HOST:PORT (or :PORT, on 127.0.0.1) where the run's page is
	// served live while it trains; "" serves nothing.
	Serve string `koanf:"serve" help:"serve the live run page on HOST:PORT or :PORT (127.0.0.1) while training (\"\" = off)"`
}

// Metrics selects optional diagnostics of the train/ metrics (docs/METRICS.md).
type Metrics struct {
	// TopKKL writes, into each sampled step's samples/ file, the K
	// completion tokens of the step with the largest per-token KL between
	// the behaviour and the learner's log-probs (twinkle's top_k_kl); 0 is
	// off.
	TopKKL int `koanf:"top_k_kl" help:"tokens with the largest per-token KL written into each sample table (0 = off, at most 1000)"`
}
