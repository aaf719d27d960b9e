package actors

import (
	"errors"
	"fmt"

	"github.com/mgrpo/mgrpo/actors/meter"
	"github.com/mgrpo/mgrpo/actors/trace"
	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/gpu/optim"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/internal/tokenizer/chat"
	"github.com/mgrpo/mgrpo/rewards"
	"github.com/mgrpo/mgrpo/rewards/tasks"
	"go.opentelemetry.io/otel/metric"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Deps are the immutable things every stage reads, built once from the
// configuration: the task, the reward functions, the tokenizer and the
// settings of rewards and losses in the form their packages take. Stages
// share one Deps; none modifies it.
type Deps struct {
	Cfg  *config.Config
	Task tasks.Task
	// EvalTask is the held-out data set evaluations draw from
	// (task.eval_dataset or task.eval_fraction); Task when there is none.
	EvalTask  tasks.Task
	Rewards   []tasks.Weighted
	Tokenizer tokenizer.Tokenizer
	// Prompter encodes prompts as the policy reads them (task.prompt_template).
	Prompter *chat.Prompter
	Sample   gpu.SampleOptions
	Prepare  rewards.PrepareConfig
	Loss     loss.Config
	Alpha    loss.AlphaControl
	Tau      rewards.TauController
	Beta     rewards.BetaController
	Meta     rewards.MetaController
	Model    gpu.Config
	// Device runs the learner's weight products (model.device); Run
	// closes it when the run ends.
	Device gpu.Device
	RunID  string
	// Tracer makes the spans of this node's actors (a no-op one unless
	// trace.otlp_endpoint or trace.file is set); NodeID names the node in
	// them.
	Tracer oteltrace.Tracer
	NodeID string
	// Meter records this node's OTel metrics (nil: off, see
	// output.prometheus_port and output.otlp_metrics_endpoint);
	// MeterProvider, when set, turns on proto.actor's own.
	Meter         *meter.Instruments
	MeterProvider metric.MeterProvider
}

// NewDeps resolves the task, reward functions, tokenizer and the settings
// of cfg (which must be valid: config.Load validates it).
func NewDeps(cfg *config.Config, runID string) (*Deps, error) {
	task, evalTask, err := newTask(cfg.Task)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", cfg.Task.Name, err)
	}
	fns, err := tasks.Rewards(cfg.Rewards.Funcs, weightsOrNil(cfg.Rewards.Weights), task, 0)
	if err != nil {
		return nil, fmt.Errorf("rewards: %w", err)
	}
	objective, err := rewards.ParseObjective(cfg.MaxEnt.Objective)
	if err != nil {
		return nil, fmt.Errorf("maxent.objective: %w", err)
	}
	model, tok, err := policyConfig(cfg.Model, cfg.Generation.MaxCompletionLen)
	if err != nil {
		return nil, err
	}
	prompter, err := chat.NewPrompter(tok, cfg.Task.PromptTemplate, cfg.Task.SystemPrompt)
	if err != nil {
		return nil, fmt.Errorf("task.prompt_template: %w", err)
	}
	dev, err := gpu.OpenDevice(cfg.Model.Device) // opened last: nothing below can fail
	if err != nil {
		return nil, err
	}
	d := stageDeps(cfg, task, fns, model, tok, runID)
	d.EvalTask, d.Prompter, d.Device = evalTask, prompter, dev
	d.Prepare = prepareConfig(cfg, objective)
	d.Loss = lossConfig(cfg)
	d.Alpha = loss.DefaultAlphaControl()
	d.Tau, d.Beta, d.Meta = controllers(cfg.Controller)
	return d, nil
}

// workerDeps are the Deps of a worker node: what its stage actors read,
// from the configuration, model dimensions and tokenizer the learner sent.
// The task is only its verifier: prompts and answers come in the messages,
// so a data set file need not be on the node's disk.
func workerDeps(cfg *config.Config, model gpu.Config, tok tokenizer.Tokenizer, runID string) (*Deps, error) {
	task, err := tasks.New(cfg.Task.Name, tasks.Options{Digits: cfg.Task.Digits, Numbers: cfg.Task.Numbers, MaxNumber: cfg.Task.MaxNumber})
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", cfg.Task.Name, err)
	}
	fns, err := tasks.Rewards(cfg.Rewards.Funcs, weightsOrNil(cfg.Rewards.Weights), task, 0)
	if err != nil {
		return nil, fmt.Errorf("rewards: %w", err)
	}
	if err := model.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return stageDeps(cfg, task, fns, model, tok, runID), nil
}

// stageDeps are the Deps the stage actors read: task, reward functions,
// tokenizer, model dimensions and sampling options.
func stageDeps(cfg *config.Config, task tasks.Task, fns []tasks.Weighted, model gpu.Config, tok tokenizer.Tokenizer, runID string) *Deps {
	d := &Deps{Cfg: cfg, Task: task, Rewards: fns, Tokenizer: tok, Model: model, RunID: runID,
		Tracer: noop.NewTracerProvider().Tracer(trace.ScopeName), NodeID: "local"}
	d.Sample = gpu.SampleOptions{
		Temperature:  cfg.Generation.Temperature,
		TopK:         cfg.Generation.TopK,
		TopP:         cfg.Generation.TopP,
		MaxNewTokens: cfg.Generation.MaxCompletionLen,
		EOS:          tok.EOS(),
	}
	return d
}

// newTask builds the configured task, or a data set verified by it, and
// the task evaluations draw from: the data set's held-out rows, or the
// task itself.
func newTask(c config.Task) (train, eval tasks.Task, err error) {
	opts := tasks.Options{Digits: c.Digits, Numbers: c.Numbers, MaxNumber: c.MaxNumber}
	if c.Dataset == "" {
		t, err := tasks.New(c.Name, opts)
		return t, t, err
	}
	src := tasks.Source{Path: c.Dataset, Fields: tasks.Fields{Prompt: c.PromptField, Answer: c.AnswerField},
		EvalPath: c.EvalDataset, EvalFraction: c.EvalFraction, Seed: uint64(c.Seed)}
	tr, ev, err := tasks.OpenDatasets(src, c.Name, opts)
	if err != nil {
		return nil, nil, err
	}
	if ev == nil {
		return tr, tr, nil
	}
	return tr, ev, nil
}

// errEOSZero refuses a tokenizer whose end-of-sequence id is 0:
// gpu.SampleOptions reads EOS 0 as "no stop token", so generation would
// never stop at it.
var errEOSZero = errors.New("the tokenizer's end-of-sequence id is 0, which generation cannot stop at yet (gpu.SampleOptions reads EOS 0 as none); use a checkpoint whose eos_token has another id (an instruct model's, say)")

// policyConfig is the policy's configuration and tokenizer: those of
// model.checkpoint, or the preset's with the built-in tokenizer.
func policyConfig(m config.Model, completionLen int) (gpu.Config, tokenizer.Tokenizer, error) {
	if m.Checkpoint == "" {
		c, err := modelConfig(m, completionLen)
		return c, tokenizer.NewChar(), err
	}
	c, err := gpu.ReadCheckpointConfig(m.Checkpoint)
	if err != nil {
		return gpu.Config{}, nil, fmt.Errorf("model.checkpoint: %w", err)
	}
	tok, err := tokenizer.Load(m.Checkpoint)
	if err != nil {
		return gpu.Config{}, nil, fmt.Errorf("model.checkpoint: %w", err)
	}
	if tok.EOS() == 0 {
		return gpu.Config{}, nil, fmt.Errorf("model.checkpoint %s: %w", m.Checkpoint, errEOSZero)
	}
	if tok.VocabSize() > c.Vocab {
		return gpu.Config{}, nil, fmt.Errorf("model.checkpoint %s: tokenizer has %d ids, the model's vocabulary %d", m.Checkpoint, tok.VocabSize(), c.Vocab)
	}
	return c, tok, nil
}

// weightsOrNil maps an empty weight list to nil (every weight 1).
func weightsOrNil(w []float64) []float64 {
	if len(w) == 0 {
		return nil
	}
	return w
}

// prepareConfig maps the maxent and rewards sections to rewards.Prepare's.
// The reward names and weights are not here: each batch says which
// functions scored it (messages.Scored).
func prepareConfig(cfg *config.Config, o rewards.Objective) rewards.PrepareConfig {
	p := rewards.DefaultPrepareConfig()
	p.Objective = o
	p.ZeroTruncated = cfg.Rewards.ZeroTruncatedCompletionRewards
	p.ScaleRewards = cfg.Rewards.ScaleRewards
	p.QTemperature = cfg.MaxEnt.QTemperature
	p.QEpsilon = cfg.MaxEnt.QEpsilon
	p.Seed.Enabled = cfg.MaxEnt.SeedGRPO.Enabled
	p.Seed.Alpha = cfg.MaxEnt.SeedGRPO.Alpha
	p.Seed.NormalizeByMaxEntropy = cfg.MaxEnt.SeedGRPO.NormalizeByMaxEntropy
	p.Seed.LengthNormalizeLogprobs = cfg.MaxEnt.SeedGRPO.LengthNormalizeLogprobs
	p.EntropyBonusCoef = cfg.MaxEnt.EntropyBonusCoef
	if cfg.MaxEnt.WeightDenominator == config.WeightDenominatorTauPlusBeta {
		p.Weights.Denominator = rewards.WeightDenominatorTauPlusBeta
	}
	p.LengthNormalizeRef = cfg.MaxEnt.LengthNormalizeRef
	p.SkipZeroVarianceGroups = cfg.MaxEnt.SkipZeroVarianceGroups
	return p
}

// lossConfig maps the loss and maxent sections to gpu/loss's Config.
// Beta is filled per step from the controller state.
func lossConfig(cfg *config.Config) loss.Config {
	l := loss.Default()
	l.Type = cfg.Loss.Type
	l.Policy = cfg.Loss.PolicyLoss
	l.Epsilon = cfg.Loss.Epsilon
	l.EpsilonHigh = cfg.Loss.EpsilonHigh
	l.ISTruncation = cfg.Loss.ISRatioMax
	l.MaxCompletionLen = cfg.Generation.MaxCompletionLen
	l.ListwiseSkipZeroVariance = cfg.MaxEnt.SkipZeroVarianceGroups
	l.ListwiseLengthNormalize = cfg.MaxEnt.LengthNormalizePolicy
	if cfg.MaxEnt.ClipObjective {
		l.ListwiseClipCoef = cfg.MaxEnt.ClipObjectiveCoef
	}
	if cfg.MaxEnt.ClipAdvBaseline > 0 {
		l.ListwiseClipBaseline = cfg.MaxEnt.ClipAdvBaseline
	}
	return l
}

// controllers maps the controller section to the rewards controllers.
func controllers(c config.Controller) (rewards.TauController, rewards.BetaController, rewards.MetaController) {
	tau := rewards.TauController{
		Enabled: c.Tau.Enabled, Target: c.Tau.TargetEntropy, LR: c.Tau.LR, Min: c.Tau.Min, Max: c.Tau.Max,
		WarmupSteps: int64(c.Tau.WarmupSteps), EMADecay: c.Tau.EMADecay,
	}
	if c.Tau.Horizon > 0 {
		tau.Anneal, tau.TargetStart, tau.TargetFinal, tau.Horizon = true, c.Tau.TargetEntropy, c.Tau.TargetEntropyFinal, int64(c.Tau.Horizon)
	}
	// The KL target is kept with the beta controller off: the meta-controller
	// reads it. Without a horizon and step size the controller itself is off.
	beta := rewards.BetaController{Target: c.Beta.KLTarget}
	if c.Beta.Enabled {
		beta.Horizon, beta.StepSize = float64(c.Beta.Horizon), c.Beta.StepSize
	}
	meta := rewards.DefaultMetaController()
	meta.Enabled, meta.Method, meta.LR, meta.TauLR, meta.BetaLR = c.Meta.Enabled, c.Meta.Method, c.Meta.LR, c.Meta.TauLR, c.Meta.BetaLR
	meta.BetaGradClip, meta.UpdateInterval = c.Meta.BetaGradClip, int64(max(c.Meta.Interval, 1))
	return tau, beta, meta
}

// learnerConfig is the AdamW of the run's settings (optim section) at the
// schedule's rate, on the run's device: the warm start's and RL's
// learners differ only in their schedule.
func learnerConfig(d *Deps, s optim.Schedule) gpu.LearnerConfig {
	o := d.Cfg.Optim
	return gpu.LearnerConfig{LR: s.Base, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay,
		MaxGradNorm: o.GradClip, MaxUpdateRatio: o.MaxUpdateRatio, Device: d.Device, Schedule: s}
}

// rlSchedule is optim.schedule at optim.lr over the run's train.steps:
// constant (with a linear warm-up when optim.warmup_steps > 0), or a
// cosine or linear decay to 0 at the last step after the warm-up.
func rlSchedule(c *config.Config) optim.Schedule {
	o := c.Optim
	s := optim.Schedule{Kind: optim.Constant, Warmup: o.WarmupSteps, Total: c.Train.Steps, Base: o.LR}
	switch {
	case o.Schedule == config.ScheduleCosine:
		s.Kind = optim.Cosine
	case o.Schedule == config.ScheduleLinear:
		s.Kind = optim.LinearDecay
	case o.WarmupSteps > 0:
		s.Kind = optim.LinearWarmup
	}
	return s
}
