package config

import (
	"fmt"
	"math"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MinTemperature is the smallest sampling or scoring temperature: the
// policy computes in float32, and logits divided by a smaller temperature
// can overflow it (1/1e-300 is +Inf), which makes every log-prob NaN and
// every training step a NON_FINITE_LOSS skip. Sampling at 0.001 is already
// greedy in all but exact ties.
const MinTemperature = 1e-3

// Limits of values that cannot be meant. A value past them is refused
// with one line instead of training a model it destroys (the fault probe's
// optim.lr 1e308 made every weight NaN at step 1).
const (
	// maxLR bounds every learning rate (optim.lr, optim.warm_start_lr and
	// the controllers'): AdamW moves each weight by about the learning rate
	// per step, and a log-space controller rate above 1 swings tau by more
	// than e per step.
	maxLR = 1.0
	// maxCoefficient bounds the loss and weight coefficients (maxent.tau,
	// beta, alpha, q_temperature, clip_objective_coef, entropy_bonus_coef,
	// seed_grpo.alpha): past it one term swamps every other and the loss
	// overflows.
	maxCoefficient = 1000.0
	// minRequestTimeout is the shortest cluster.request_timeout: no stage
	// answers sooner, so a shorter one skips every step.
	minRequestTimeout = 10 * time.Millisecond
)

// Validate checks every value's range and every combination; it returns
// the first problem as an *Error (ErrRange or ErrConflict), in section
// order, so the same config always gives the same line.
func (c *Config) Validate() error {
	v := &validator{}
	v.finite(c)
	for _, check := range []func(*validator, *Config){
		validateModel, validateTask, validateGeneration, validateRewards,
		validateMaxEnt, validateController, validateLoss, validateOptim,
		validateTrain, validateDifficulty, validateCluster, validateTrace, validateOutput, validateMetrics,
	} {
		if v.err != nil {
			break
		}
		check(v, c)
	}
	if v.err != nil {
		return v.err
	}
	return nil
}

// validator keeps the first failed rule.
type validator struct{ err *Error }

// need records a range error for key unless ok.
func (v *validator) need(ok bool, key string, value any, reason string) {
	if !ok && v.err == nil {
		v.err = &Error{Key: key, Value: formatValue(value), Reason: reason, Err: ErrRange}
	}
}

// conflict records an impossible combination for key unless ok.
func (v *validator) conflict(ok bool, key string, value any, reason string) {
	if !ok && v.err == nil {
		v.err = &Error{Key: key, Value: formatValue(value), Reason: reason, Err: ErrConflict}
	}
}

func (v *validator) oneOf(key, value string, allowed ...string) {
	v.need(slices.Contains(allowed, value), key, value, "must be one of "+strings.Join(quoteAll(allowed), ", "))
}

func (v *validator) atLeast(key string, value, lo int) {
	reason := fmt.Sprintf("must be %d or more", lo)
	v.need(value >= lo, key, value, reason)
}

func (v *validator) nonNegative(key string, value float64) {
	v.need(value >= 0, key, value, "must be 0 or more")
}

func (v *validator) positive(key string, value float64) {
	v.need(value > 0, key, value, "must be more than 0")
}

// atMost refuses value > hi, saying why such a value cannot be meant.
func (v *validator) atMost(key string, value, hi float64, why string) {
	v.need(value <= hi, key, value, fmt.Sprintf("must be at most %s (%s)", formatValue(hi), why))
}

// coefficient refuses a coefficient above maxCoefficient.
func (v *validator) coefficient(key string, value float64) {
	v.atMost(key, value, maxCoefficient, "a larger coefficient swamps every other term and overflows the loss")
}

// learningRate refuses a learning rate above maxLR.
func (v *validator) learningRate(key string, value float64) {
	v.atMost(key, value, maxLR, "a larger rate moves every weight further than its size in one step")
}

// finite refuses NaN and ±Inf in every float key.
func (v *validator) finite(c *Config) {
	t := keys()
	for _, l := range t.leaves {
		val := reflect.ValueOf(c).Elem().FieldByIndex(l.index)
		switch x := val.Interface().(type) {
		case float64:
			v.need(!math.IsNaN(x) && !math.IsInf(x, 0), l.key, x, "must be a finite number")
		case []float64:
			for _, f := range x {
				v.need(!math.IsNaN(f) && !math.IsInf(f, 0), l.key, x, "must hold finite numbers")
			}
		}
	}
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = strconv.Quote(x)
	}
	return out
}

// validateModel checks the model section on its own. The preset's name and
// the dimensions it resolves to are checked where presets are resolved
// (the wiring in actors): this package knows no preset table.
func validateModel(v *validator, c *Config) {
	m := c.Model
	for _, f := range []struct {
		key string
		n   int
	}{{"model.hidden", m.Hidden}, {"model.layers", m.Layers}, {"model.heads", m.Heads}, {"model.kv_heads", m.KVHeads}, {"model.mlp", m.MLP}, {"model.context", m.Context}} {
		v.atLeast(f.key, f.n, 0)
		if m.Preset == "" && f.key != "model.kv_heads" && f.key != "model.context" {
			v.conflict(f.n > 0, f.key, f.n, `must be set when model.preset is ""`)
		}
	}
	v.conflict(m.Preset != "" || m.Context > 0, "model.context", m.Context, `must be set when model.preset is ""`)
	v.nonNegative("model.rope_theta", m.RopeTheta)
	v.oneOf("model.device", m.Device, "cpu", "cuda")
	v.oneOf("model.dtype", m.DType, "float32", "bf16")
	v.conflict(m.DType != "bf16" || m.Device == "cuda", "model.dtype", m.DType, "needs model.device cuda (the CPU computes in float32)")
}

func validateTask(v *validator, c *Config) {
	t := c.Task
	v.oneOf("task.name", t.Name, "addition", "countdown", "wordproblems")
	v.need(t.Digits >= 1 && t.Digits <= 9, "task.digits", t.Digits, "must be in 1..9")
	v.need(t.Numbers >= 2 && t.Numbers <= 6, "task.numbers", t.Numbers, "must be in 2..6")
	v.need(t.MaxNumber >= 1 && t.MaxNumber <= 1000, "task.max_number", t.MaxNumber, "must be in 1..1000")
	v.need(t.Steps >= 1 && t.Steps <= 5, "task.steps", t.Steps, "must be in 1..5")
	v.need(t.EvalFraction >= 0 && t.EvalFraction < 1, "task.eval_fraction", t.EvalFraction, "must be in [0, 1)")
	for _, k := range []struct {
		key string
		set bool
		val any
	}{{"task.prompt_field", t.PromptField != "", t.PromptField}, {"task.answer_field", t.AnswerField != "", t.AnswerField},
		{"task.eval_dataset", t.EvalDataset != "", t.EvalDataset}, {"task.eval_fraction", t.EvalFraction != 0, t.EvalFraction}} {
		v.conflict(!k.set || t.Dataset != "", k.key, k.val, "needs task.dataset")
	}
	v.conflict(t.EvalDataset == "" || t.EvalFraction == 0, "task.eval_fraction", t.EvalFraction, "cannot be set together with task.eval_dataset")
	v.oneOf("task.prompt_template", t.PromptTemplate, "", "llama3", "chatml", "tokenizer")
	v.conflict(t.PromptTemplate != "" || t.SystemPrompt == "", "task.system_prompt", t.SystemPrompt, "needs task.prompt_template")
	v.conflict(t.PromptTemplate == "" || c.Model.Checkpoint != "" || c.Train.Resume != "", "task.prompt_template", t.PromptTemplate,
		"needs model.checkpoint with a Hugging Face tokenizer.json (the built-in character tokenizer has no chat format)")
}

func validateGeneration(v *validator, c *Config) {
	g := c.Generation
	v.atLeast("generation.num_generations", g.NumGenerations, 2)
	v.need(g.Temperature >= MinTemperature, "generation.temperature", g.Temperature,
		fmt.Sprintf("must be at least %s (smaller temperatures overflow float32 logits and make every loss NaN)", formatValue(MinTemperature)))
	v.atLeast("generation.top_k", g.TopK, 0)
	v.need(g.TopP > 0 && g.TopP <= 1, "generation.top_p", g.TopP, "must be in (0, 1]")
	v.atLeast("generation.max_completion_len", g.MaxCompletionLen, 1)
	v.atLeast("generation.retry_rounds", g.RetryRounds, 0)
	// Below the model's context: checked where the context is known (the
	// preset's, or a checkpoint's).
}

func validateRewards(v *validator, c *Config) {
	r := c.Rewards
	v.need(len(r.Funcs) > 0, "rewards.funcs", r.Funcs, "must name at least one reward function")
	for i, f := range r.Funcs {
		v.need(!slices.Contains(r.Funcs[:i], f), "rewards.funcs", r.Funcs, fmt.Sprintf("lists %q twice", f))
	}
	v.conflict(len(r.Weights) == 0 || len(r.Weights) == len(r.Funcs), "rewards.weights", r.Weights, fmt.Sprintf("needs one weight per function (%d) or none", len(r.Funcs)))
}

func validateMaxEnt(v *validator, c *Config) {
	m := c.MaxEnt
	v.oneOf("maxent.objective", m.Objective, ObjectiveGRPO, ObjectiveGRPOEntropyBonus, ObjectiveMaxEntEntropy, ObjectiveMaxEntListwise)
	v.nonNegative("maxent.tau", m.Tau)
	v.nonNegative("maxent.beta", m.Beta)
	v.nonNegative("maxent.alpha", m.Alpha)
	v.positive("maxent.q_temperature", m.QTemperature)
	v.need(m.QEpsilon >= 0 && m.QEpsilon < 1, "maxent.q_epsilon", m.QEpsilon, "must be in [0, 1)")
	v.oneOf("maxent.weight_denominator", m.WeightDenominator, WeightDenominatorTau, WeightDenominatorTauPlusBeta)
	v.nonNegative("maxent.clip_objective_coef", m.ClipObjectiveCoef)
	v.need(m.ClipAdvBaseline >= 0 && m.ClipAdvBaseline <= 1, "maxent.clip_adv_baseline", m.ClipAdvBaseline, "must be in [0, 1]")
	v.nonNegative("maxent.entropy_bonus_coef", m.EntropyBonusCoef)
	v.nonNegative("maxent.seed_grpo.alpha", m.SeedGRPO.Alpha)
	for _, f := range []struct {
		key   string
		value float64
	}{{"maxent.tau", m.Tau}, {"maxent.beta", m.Beta}, {"maxent.alpha", m.Alpha}, {"maxent.q_temperature", m.QTemperature},
		{"maxent.clip_objective_coef", m.ClipObjectiveCoef}, {"maxent.entropy_bonus_coef", m.EntropyBonusCoef},
		{"maxent.seed_grpo.alpha", m.SeedGRPO.Alpha}} {
		v.coefficient(f.key, f.value)
	}

	listwise := m.Objective == ObjectiveMaxEntListwise
	v.conflict(!listwise || m.Tau > 0, "maxent.tau", m.Tau, "must be more than 0 for objective maxent_listwise")
	bonus := m.Objective == ObjectiveGRPOEntropyBonus
	v.conflict(!bonus || m.EntropyBonusCoef > 0, "maxent.entropy_bonus_coef", m.EntropyBonusCoef, "must be more than 0 for objective grpo_entropy_bonus")
	v.conflict(bonus || m.EntropyBonusCoef == 0, "maxent.entropy_bonus_coef", m.EntropyBonusCoef, fmt.Sprintf("only applies to objective grpo_entropy_bonus, not %s", m.Objective))
	grpo := m.Objective == ObjectiveGRPO || bonus
	v.conflict(grpo || !m.SeedGRPO.Enabled, "maxent.seed_grpo.enabled", true, fmt.Sprintf("needs a GRPO objective, not %s", m.Objective))
	v.conflict(listwise || !m.ClipObjective, "maxent.clip_objective", true, fmt.Sprintf("only applies to objective maxent_listwise, not %s", m.Objective))
}

func validateController(v *validator, c *Config) {
	t, b, m := c.Controller.Tau, c.Controller.Beta, c.Controller.Meta
	v.nonNegative("controller.tau.target_entropy", t.TargetEntropy)
	v.nonNegative("controller.tau.target_entropy_final", t.TargetEntropyFinal)
	v.atLeast("controller.tau.horizon", t.Horizon, 0)
	v.nonNegative("controller.tau.lr", t.LR)
	v.nonNegative("controller.tau.min", t.Min)
	v.nonNegative("controller.tau.max", t.Max)
	v.conflict(t.Max == 0 || t.Max >= t.Min, "controller.tau.max", t.Max, fmt.Sprintf("must be 0 (none) or at least controller.tau.min (%s)", formatValue(t.Min)))
	v.atLeast("controller.tau.warmup_steps", t.WarmupSteps, 0)
	v.need(t.EMADecay >= 0 && t.EMADecay < 1, "controller.tau.ema_decay", t.EMADecay, "must be in [0, 1)")

	v.nonNegative("controller.beta.kl_target", b.KLTarget)
	v.atLeast("controller.beta.horizon", b.Horizon, 0)
	v.nonNegative("controller.beta.step_size", b.StepSize)

	v.oneOf("controller.meta.method", m.Method, metaMethods()...)
	v.nonNegative("controller.meta.lr", m.LR)
	v.nonNegative("controller.meta.tau_lr", m.TauLR)
	v.nonNegative("controller.meta.beta_lr", m.BetaLR)
	v.nonNegative("controller.meta.beta_grad_clip", m.BetaGradClip)
	v.atLeast("controller.meta.interval", m.Interval, 1)
	v.learningRate("controller.tau.lr", t.LR)
	v.learningRate("controller.meta.lr", m.LR)
	v.learningRate("controller.meta.tau_lr", m.TauLR)
	v.learningRate("controller.meta.beta_lr", m.BetaLR)

	listwise := c.MaxEnt.Objective == ObjectiveMaxEntListwise
	if t.Enabled {
		v.conflict(listwise, "controller.tau.enabled", true, fmt.Sprintf("needs objective maxent_listwise (tau is unused by %s)", c.MaxEnt.Objective))
		v.conflict(t.LR > 0, "controller.tau.lr", t.LR, "must be more than 0 when controller.tau.enabled")
		maxH := math.Log(float64(c.Generation.NumGenerations))
		v.conflict(t.TargetEntropy <= maxH, "controller.tau.target_entropy", t.TargetEntropy, fmt.Sprintf("must be at most ln(generation.num_generations) = %.4g, the largest weight entropy", maxH))
		v.conflict(t.Horizon == 0 || t.TargetEntropyFinal <= maxH, "controller.tau.target_entropy_final", t.TargetEntropyFinal, fmt.Sprintf("must be at most ln(generation.num_generations) = %.4g", maxH))
		v.conflict(t.Min == 0 || c.MaxEnt.Tau >= t.Min, "maxent.tau", c.MaxEnt.Tau, fmt.Sprintf("must be at least controller.tau.min (%s)", formatValue(t.Min)))
	}
	if b.Enabled {
		v.conflict(b.KLTarget > 0, "controller.beta.kl_target", b.KLTarget, "must be more than 0 when controller.beta.enabled")
		v.conflict(b.Horizon > 0, "controller.beta.horizon", b.Horizon, "must be more than 0 when controller.beta.enabled")
		v.conflict(b.StepSize > 0, "controller.beta.step_size", b.StepSize, "must be more than 0 when controller.beta.enabled")
		v.conflict(c.MaxEnt.Beta > 0, "maxent.beta", c.MaxEnt.Beta, "must be more than 0 when controller.beta.enabled (the update is multiplicative)")
	}
	if m.Enabled {
		v.conflict(m.LR > 0 || m.TauLR > 0 || m.BetaLR > 0, "controller.meta.lr", m.LR, "some meta learning rate must be more than 0 when controller.meta.enabled")
		v.conflict(!t.Enabled && !b.Enabled, "controller.meta.enabled", true, "replaces the tau and beta controllers; disable controller.tau and controller.beta")
	}
}

func validateLoss(v *validator, c *Config) {
	l := c.Loss
	v.oneOf("loss.type", l.Type, LossGRPO, LossBNPO, LossDrGRPO)
	v.oneOf("loss.policy_loss", l.PolicyLoss, PolicyLossVanilla, PolicyLossGSPO, PolicyLossCISPO)
	v.need(l.Epsilon > 0 && l.Epsilon < 1, "loss.epsilon", l.Epsilon, "must be in (0, 1)")
	v.nonNegative("loss.epsilon_high", l.EpsilonHigh)
	v.conflict(l.EpsilonHigh == 0 || l.EpsilonHigh >= l.Epsilon, "loss.epsilon_high", l.EpsilonHigh, fmt.Sprintf("must be 0 (= epsilon) or at least loss.epsilon (%s)", formatValue(l.Epsilon)))
	v.need(l.ISRatioMax == 0 || l.ISRatioMax >= 1, "loss.is_ratio_max", l.ISRatioMax, "must be 0 (off) or at least 1")
}

func validateOptim(v *validator, c *Config) {
	o := c.Optim
	v.positive("optim.lr", o.LR)
	v.positive("optim.warm_start_lr", o.WarmStartLR)
	v.need(o.Beta1 >= 0 && o.Beta1 < 1, "optim.beta1", o.Beta1, "must be in [0, 1)")
	v.need(o.Beta2 >= 0 && o.Beta2 < 1, "optim.beta2", o.Beta2, "must be in [0, 1)")
	v.positive("optim.eps", o.Eps)
	v.nonNegative("optim.weight_decay", o.WeightDecay)
	v.nonNegative("optim.grad_clip", o.GradClip)
	v.oneOf("optim.schedule", o.Schedule, ScheduleConstant, ScheduleCosine, ScheduleLinear)
	v.atLeast("optim.warmup_steps", o.WarmupSteps, 0)
	v.nonNegative("optim.max_update_ratio", o.MaxUpdateRatio)
	v.learningRate("optim.lr", o.LR)
	v.learningRate("optim.warm_start_lr", o.WarmStartLR)
	for _, lr := range []struct {
		key   string
		value float64
	}{{"optim.lr", o.LR}, {"optim.warm_start_lr", o.WarmStartLR}} {
		v.conflict(lr.value*o.WeightDecay < 1, "optim.weight_decay", o.WeightDecay,
			fmt.Sprintf("times %s (%s) must be below 1 (AdamW multiplies every weight by 1 - lr × weight_decay each step)", lr.key, formatValue(lr.value)))
	}
}

func validateTrain(v *validator, c *Config) {
	t := c.Train
	v.atLeast("train.steps", t.Steps, 0)
	v.atLeast("train.prompts_per_step", t.PromptsPerStep, 1)
	v.atLeast("train.prompts_per_part", t.PromptsPerPart, 1)
	v.atLeast("train.micro_batch", t.MicroBatch, 0)
	v.atLeast("train.warm_start_steps", t.WarmStartSteps, 0)
	v.atLeast("train.warm_start_batch", t.WarmStartBatch, 1)
	v.atLeast("train.max_staleness", t.MaxStaleness, 0)
	v.atLeast("train.sync_every", t.SyncEvery, 1)
	v.atLeast("train.dynamic_sampling_max_rounds", t.DynamicSamplingMaxRounds, 1)
	v.atLeast("train.max_skipped_steps", t.MaxSkippedSteps, 0)
	v.atLeast("train.checkpoint_every", t.CheckpointEvery, 0)
	v.atLeast("train.eval_every", t.EvalEvery, 0)
	v.atLeast("train.eval_prompts", t.EvalPrompts, 1)
	v.oneOf("train.guard", t.Guard, GuardStop, GuardWarn, GuardOff)
	if o := c.Optim; o.Schedule != ScheduleConstant && t.Steps > 0 { // a decay needs a step after the warm-up
		v.conflict(o.WarmupSteps < t.Steps, "optim.warmup_steps", o.WarmupSteps,
			fmt.Sprintf("must be less than train.steps (%d) for the %s schedule to decay", t.Steps, o.Schedule))
	} else {
		v.conflict(o.WarmupSteps <= t.Steps, "optim.warmup_steps", o.WarmupSteps, fmt.Sprintf("must be at most train.steps (%d)", t.Steps))
	}
	v.conflict(t.SyncEvery-1 <= t.MaxStaleness, "train.sync_every", t.SyncEvery, fmt.Sprintf("needs train.max_staleness >= %d (samples would be up to %d versions old)", t.SyncEvery-1, t.SyncEvery-1))
	v.conflict(t.Resume == "" || c.Model.Checkpoint == "", "train.resume", t.Resume, "cannot be combined with model.checkpoint (a resumed run loads its own)")
}

func validateCluster(v *validator, c *Config) {
	cl := c.Cluster
	roles := cl.Roles()
	v.need(len(roles) > 0, "cluster.role", cl.Role, "must name a role")
	for _, r := range roles {
		v.oneOf("cluster.role", r, Roles()...)
	}
	v.conflict(!slices.Contains(roles, RoleAll) || len(roles) == 1, "cluster.role", cl.Role, "all runs every role: give it alone")
	v.need(cl.Name != "", "cluster.name", cl.Name, "must not be empty")
	v.need(cl.Host != "", "cluster.host", cl.Host, "must not be empty")
	v.need(cl.Port >= 0 && cl.Port <= 65535, "cluster.port", cl.Port, "must be in 0..65535")
	v.need(cl.RemotePort >= 0 && cl.RemotePort <= 65535, "cluster.remote_port", cl.RemotePort, "must be in 0..65535")
	v.need(cl.WeightPort >= 0 && cl.WeightPort <= 65535, "cluster.weight_port", cl.WeightPort, "must be in 0..65535")
	v.conflict(cl.WeightPort == 0 || (cl.WeightPort != cl.Port && cl.WeightPort != cl.RemotePort), "cluster.weight_port", cl.WeightPort,
		"must differ from cluster.port and cluster.remote_port")
	v.need(validAdvertise(cl.Advertise), "cluster.advertise", cl.Advertise, "must be a host or host:port (port in 1..65535)")
	for _, s := range cl.Seeds {
		v.need(validHostPort(s), "cluster.seeds", cl.Seeds, fmt.Sprintf("%q is not host:port", s))
	}
	worker := !cl.HasRole(RoleLearner)
	v.conflict(!worker || len(cl.Seeds) > 0, "cluster.seeds", cl.Seeds, fmt.Sprintf("must name the learner node (host:port) for role %s", cl.Role))
	tls := cl.TLS
	some, all := tls.CA != "" || tls.Cert != "" || tls.Key != "", tls.CA != "" && tls.Cert != "" && tls.Key != ""
	v.conflict(!some || all, "cluster.tls", fmt.Sprintf("ca=%q cert=%q key=%q", tls.CA, tls.Cert, tls.Key), "needs all three of ca, cert and key")
	v.conflict(!(some && cl.Insecure), "cluster.insecure", true, "contradicts cluster.tls.*: choose one")
	allInOne := slices.Contains(roles, RoleAll) // listens on no port
	v.conflict(loopback(cl.Host) || some || cl.Insecure || allInOne,
		"cluster.host", cl.Host, "is not a loopback address: nodes must use mutual TLS (cluster.tls.ca, .cert, .key; mgrpo-node certs writes them) or say --cluster.insecure")
	v.atLeast("cluster.generators", cl.Generators, 1)
	v.atLeast("cluster.min_generators", cl.MinGenerators, 1)
	v.conflict(!allInOne || cl.MinGenerators <= cl.Generators, "cluster.min_generators", cl.MinGenerators,
		fmt.Sprintf("role all has only its own %d generators (cluster.generators): no node can join it", cl.Generators))
	v.atLeast("cluster.reward_evaluators", cl.RewardEvaluators, 1)
	v.atLeast("cluster.max_message_bytes", cl.MaxMessageBytes, 4<<20)
	v.atLeast("cluster.weight_chunk_bytes", cl.WeightChunkBytes, 1024)
	v.conflict(cl.WeightChunkBytes < cl.MaxMessageBytes, "cluster.weight_chunk_bytes", cl.WeightChunkBytes, fmt.Sprintf("must be below cluster.max_message_bytes (%d)", cl.MaxMessageBytes))
	v.need(cl.RequestTimeout == 0 || cl.RequestTimeout >= minRequestTimeout, "cluster.request_timeout", cl.RequestTimeout,
		fmt.Sprintf("must be 0 (sized from the work) or at least %s (no stage answers sooner: every step would be skipped)", minRequestTimeout))
}

// loopback reports whether host is a loopback address or name.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func validateTrace(v *validator, c *Config) {
	t := c.Trace
	v.need(t.OTLPEndpoint == "" || validHostPort(t.OTLPEndpoint), "trace.otlp_endpoint", t.OTLPEndpoint, "must be host:port or empty")
	v.oneOf("trace.protocol", t.Protocol, "grpc", "http")
	v.need(t.SampleRatio >= 0 && t.SampleRatio <= 1, "trace.sample_ratio", t.SampleRatio, "must be in [0, 1]")
	d, _, err := t.SlowThreshold()
	v.need(err == nil && d >= 0, "trace.slow_step", t.SlowStep, "must be auto, 0 or a positive duration such as 1.5s")
	v.need(t.ServiceName != "", "trace.service_name", t.ServiceName, "must not be empty")
}

func validateOutput(v *validator, c *Config) {
	o := c.Output
	v.need(o.Dir != "", "output.dir", o.Dir, "must not be empty")
	v.need(o.Name == "" || !strings.HasPrefix(o.Name, "."), "output.name", o.Name, "must not start with a dot (., .. and hidden names are not run directories)")
	v.need(!strings.ContainsAny(o.Name, `/\`), "output.name", o.Name, "must not contain a path separator")
	v.need(printable(o.Name), "output.name", o.Name, "must be UTF-8 without control characters")
	v.need(len(o.Name) <= MaxRunNameBytes, "output.name", o.Name, fmt.Sprintf("must be at most %d bytes (a file name's limit is 255, and a run's files add to it)", MaxRunNameBytes))
	v.atLeast("output.log_every", o.LogEvery, 1)
	v.atLeast("output.sample_every", o.SampleEvery, 0)
	v.atLeast("output.sample_rows", o.SampleRows, 0)
	v.atLeast("output.keep_checkpoints", o.KeepCheckpoints, 0)
	v.need(o.PrometheusPort >= 0 && o.PrometheusPort <= 65535, "output.prometheus_port", o.PrometheusPort, "must be a port, or 0 for none")
	v.conflict(o.PrometheusPort == 0 || (o.PrometheusPort != c.Cluster.Port && o.PrometheusPort != c.Cluster.RemotePort), "output.prometheus_port", o.PrometheusPort,
		"must differ from cluster.port and cluster.remote_port")
	v.conflict(!o.Pprof || o.PrometheusPort != 0, "output.pprof", o.Pprof, "serves on output.prometheus_port: set that port too")
	v.need(o.OTLPMetricsEndpoint == "" || validHostPort(o.OTLPMetricsEndpoint), "output.otlp_metrics_endpoint", o.OTLPMetricsEndpoint, "must be host:port or empty")
	v.need(o.Serve == "" || validServeAddr(o.Serve), "output.serve", o.Serve, "must be HOST:PORT, :PORT (127.0.0.1) or empty")
}

// MaxRunNameBytes is the longest output.name.
const MaxRunNameBytes = 200

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// maxTopKKL bounds metrics.top_k_kl: every step's report carries that many
// tokens from the learner.
const maxTopKKL = 1000

func validateMetrics(v *validator, c *Config) {
	k := c.Metrics.TopKKL
	v.need(k >= 0 && k <= maxTopKKL, "metrics.top_k_kl", k, fmt.Sprintf("must be in [0, %d] (0 = off)", maxTopKKL))
}

// validServeAddr accepts HOST:PORT and :PORT, port 0 (any free port) to 65535.
func validServeAddr(s string) bool {
	_, port, err := net.SplitHostPort(s)
	n, perr := strconv.Atoi(port)
	return err == nil && perr == nil && n >= 0 && n <= 65535
}

// validAdvertise reports whether s is empty, a host, or host:port.
func validAdvertise(s string) bool {
	if _, _, err := net.SplitHostPort(s); err == nil {
		return validHostPort(s)
	}
	return !strings.ContainsAny(s, " /[]") || net.ParseIP(strings.Trim(s, "[]")) != nil
}

func validHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n <= 65535
}
