package actors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/gpu/optim"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/internal/tokenizer/chat"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
	"github.com/mgrpo/mgrpo/rewards/tasks"
)

// settings are a run's configuration resolved once, by the wiring (Run;
// newSettings), into what each part of the run reads: a stage actor its
// stage's settings, the trainer how a step's batch is made, the runner
// what it records and when. They are complete when built and never
// change, and nothing past the wiring holds the configuration itself.
type settings struct {
	model     gpu.Config          // the policy's dimensions
	tokenizer tokenizer.Tokenizer // the policy's tokenizer
	stages    stageSettings       // generators, reward evaluators, reference scorers
	learn     learnSettings       // the learner actor
	control   rewards.Controllers // the controller actor
	step      stepSettings        // the trainer: each step's batch, made and prepared
	optim     optimSettings       // the learners' AdamW and schedules
	start     startSettings       // where RL starts
	warm      warmSettings        // the supervised warm start
	eval      evalSettings        // greedy accuracy on held-out problems
	record    recordSettings      // what a step leaves behind, and when
	pipeline  PipelineOptions     // the actors of role all
	// longestPrompt is the task's longest prompt in tokens (preflight
	// measures it; 0 before).
	longestPrompt int
}

// stageSettings are what the stage actors that worker nodes also run
// read: generators, reward evaluators and reference scorers.
type stageSettings struct {
	generate  generateSettings
	reward    rewardSettings
	reference referenceSettings
}

// stepSettings are what the trainer reads to make and prepare a step's
// batch.
type stepSettings struct {
	task     tasks.Task
	prompter *chat.Prompter
	seed     int64 // train.seed: every draw of a step is seeded from it (stageSeed)
	taskSeed int64 // task.seed
	prompts  int   // train.prompts_per_step
	perPart  int   // train.prompts_per_part: generation, rewards and reference scoring take parts this size
	group    int   // generation.num_generations
	retries  int   // generation.retry_rounds
	// Dynamic sampling (DAPO): refill zero-variance groups for up to
	// refills rounds; zeroTruncated is how the rewards of a truncated
	// completion count when telling tied groups apart.
	dynamic       bool
	refills       int
	zeroTruncated bool
	prepare       rewards.PrepareConfig
	staleness     int // train.max_staleness
	syncEvery     int // train.sync_every
}

// optimSettings are the learners' AdamW (optim section, on the run's
// device when built: learnerConfig), their micro-batches
// (train.micro_batch) and the schedules of RL and of the warm start.
type optimSettings struct {
	adam   gpu.LearnerConfig // LR, Schedule and Device are set per learner
	rl     optim.Schedule
	warmLR float64
}

// startSettings say where RL starts: model.checkpoint, or a warm start from
// the random weights of model.seed; and the controllers' first state.
type startSettings struct {
	checkpoint     string // model.checkpoint ("": the preset's random weights)
	warmCheckpoint bool   // train.warm_start_from_checkpoint
	modelSeed      uint64
	tau, beta      float64
	meta           rewards.MetaController
	guards         bool // train.guard is not off: the collapse and no-signal rules watch the run
}

// warmSettings are what the supervised warm start reads.
type warmSettings struct {
	steps, batch int // train.warm_start_steps, train.warm_start_batch
	task         tasks.Task
	prompter     *chat.Prompter
	tokenizer    tokenizer.Tokenizer
	seed         int64 // train.seed
	taskSeed     int64
	model        gpu.Config
}

// evalSettings are what a held-out evaluation reads.
type evalSettings struct {
	task         tasks.Task // the held-out problems (task.eval_dataset or _fraction), else the task
	tokenizer    tokenizer.Tokenizer
	prompter     *chat.Prompter
	maxNewTokens int
	temperature  float64
	prompts      int // train.eval_prompts
	seed         int64
}

// recordSettings are what the runner reads to record each step.
type recordSettings struct {
	cadence    cadence
	sampleRows int    // output.sample_rows
	maxSkipped int    // train.max_skipped_steps
	guardStops bool   // train.guard=stop: an alert at the stop level ends the run
	keep       int    // output.keep_checkpoints
	seed       int64  // train.seed, for trainer_state.json
	config     []byte // the effective configuration a checkpoint keeps (train.resume cleared)
	metrics    metricSettings
	slowFixed  time.Duration // trace.slow_step: a fixed threshold,
	slowAuto   bool          // or relative to the recent steps
	showsTau   bool          // tau shapes the weights (maxent_listwise): the progress line shows it
	// timeouts are the stages' request timeouts (cluster.request_timeout
	// or automatic), which a skip for a timeout names.
	timeouts map[messages.Stage]time.Duration
}

// metricSettings are the settings a step's metrics report beside its
// numbers: the objective, the controllers and how q was formed.
type metricSettings struct {
	objective rewards.Objective
	clip      bool // maxent.clip_objective: the listwise clip loss is reported
	control   rewards.Controllers
	prepare   rewards.PrepareConfig
}

// newSettings resolves cfg (valid: config.Load validates it) into a run's
// settings: the task, reward functions, tokenizer, model dimensions and
// every stage's settings. What config cannot check alone (a preset's
// dimensions, model.checkpoint's files, a data set) is refused here, before
// a run writes anything.
func newSettings(cfg *config.Config) (*settings, error) {
	task, evalTask, err := newTask(cfg.Task)
	var cfgErr *config.Error
	if errors.As(err, &cfgErr) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", cfg.Task.Name, err)
	}
	fns, err := rewardFuncs(cfg.Rewards, task)
	if err != nil {
		return nil, err
	}
	objective, err := rewards.ParseObjective(cfg.MaxEnt.Objective)
	if err != nil {
		return nil, fmt.Errorf("maxent.objective: %w", err)
	}
	model, tok, err := policyConfig(cfg.Model, cfg.Train.Resume, cfg.Generation.MaxCompletionLen)
	if err != nil {
		return nil, err
	}
	prompter, err := chat.NewPrompter(tok, cfg.Task.PromptTemplate, cfg.Task.SystemPrompt)
	if err != nil {
		return nil, fmt.Errorf("task.prompt_template: %w", err)
	}
	control := controllers(cfg.Controller, objective)
	prepare := prepareConfig(cfg, objective)
	s := &settings{model: model, tokenizer: tok, stages: stagesOf(cfg, fns, model, tok), control: control,
		learn:    learnSettingsOf(cfg, objective, model, tok),
		step:     stepSettingsOf(cfg, task, prompter, prepare),
		optim:    optimSettingsOf(cfg),
		start:    startSettingsOf(cfg, control.Meta),
		warm:     warmSettings{steps: cfg.Train.WarmStartSteps, batch: cfg.Train.WarmStartBatch, task: task, prompter: prompter, tokenizer: tok, seed: cfg.Train.Seed, taskSeed: cfg.Task.Seed, model: model},
		eval:     evalSettings{task: evalTask, tokenizer: tok, prompter: prompter, maxNewTokens: cfg.Generation.MaxCompletionLen, temperature: cfg.Generation.Temperature, prompts: max(cfg.Train.EvalPrompts, 1), seed: cfg.Train.Seed},
		pipeline: pipelineOptionsOf(cfg.Cluster),
	}
	if s.record, err = recordSettingsOf(cfg, model, metricSettings{objective: objective, clip: cfg.MaxEnt.ClipObjective, control: control, prepare: prepare}); err != nil {
		return nil, err
	}
	s.sizeTimeouts(cfg, model, model.Context) // preflight sizes them from the longest prompt
	return s, nil
}

// stagesOf resolves the settings of the stage actors: sampling, reward
// functions, reference scoring.
func stagesOf(cfg *config.Config, fns []tasks.Weighted, model gpu.Config, tok tokenizer.Tokenizer) stageSettings {
	g := cfg.Generation
	r := rewardSettings{fns: fns}
	if cfg.Rewards.Shuffle {
		r.shuffleSeed = stageSeed(cfg.Train.Seed, 0, stageShuffle, 0) | 1
	}
	return stageSettings{reward: r, reference: referenceSettings{temperature: g.Temperature, model: model},
		generate: generateSettings{tokenizer: tok, model: model, sample: gpu.SampleOptions{Temperature: g.Temperature,
			TopK: g.TopK, TopP: g.TopP, MaxNewTokens: g.MaxCompletionLen, EOS: tok.EOS()}}}
}

// workerStages are the stage settings of a worker node: from the
// configuration, model dimensions and tokenizer the learner sent. The task
// is only its verifier: prompts and answers come in the messages, so a
// data set file need not be on the node's disk.
func workerStages(cfg *config.Config, model gpu.Config, tok tokenizer.Tokenizer) (stageSettings, error) {
	task, err := tasks.New(cfg.Task.Name, taskOptions(cfg.Task))
	if err != nil {
		return stageSettings{}, fmt.Errorf("task %s: %w", cfg.Task.Name, err)
	}
	fns, err := rewardFuncs(cfg.Rewards, task)
	if err != nil {
		return stageSettings{}, err
	}
	if err := model.Validate(); err != nil {
		return stageSettings{}, fmt.Errorf("model: %w", err)
	}
	return stagesOf(cfg, fns, model, tok), nil
}

// rewardFuncs resolves rewards.funcs and rewards.weights for task. A name
// that is no reward function is refused as the configuration error it is,
// naming it (config validates the list without knowing the names).
func rewardFuncs(r config.Rewards, task tasks.Task) ([]tasks.Weighted, error) {
	fns, err := tasks.Rewards(r.Funcs, weightsOrNil(r.Weights), task, 0)
	if !errors.Is(err, tasks.ErrUnknownReward) {
		if err != nil {
			return nil, fmt.Errorf("rewards: %w", err)
		}
		return fns, nil
	}
	for _, n := range r.Funcs {
		if _, e := tasks.Reward(n, task, 0); errors.Is(e, tasks.ErrUnknownReward) {
			names := tasks.RewardNames()
			for i, name := range names {
				names[i] = strconv.Quote(name)
			}
			return nil, &config.Error{Key: "rewards.funcs", Value: strconv.Quote(n),
				Reason: "must be one of " + strings.Join(names, ", ") + " (or an alias of one)", Err: config.ErrRange}
		}
	}
	return nil, fmt.Errorf("rewards: %w", err)
}

// stepSettingsOf resolves what the trainer reads.
func stepSettingsOf(cfg *config.Config, task tasks.Task, prompter *chat.Prompter, prepare rewards.PrepareConfig) stepSettings {
	t := cfg.Train
	return stepSettings{task: task, prompter: prompter, seed: t.Seed, taskSeed: cfg.Task.Seed,
		prompts: t.PromptsPerStep, perPart: t.PromptsPerPart, group: cfg.Generation.NumGenerations,
		retries: cfg.Generation.RetryRounds, dynamic: t.DynamicSampling, refills: t.DynamicSamplingMaxRounds,
		zeroTruncated: cfg.Rewards.ZeroTruncatedCompletionRewards, prepare: prepare,
		staleness: t.MaxStaleness, syncEvery: t.SyncEvery}
}

// learnSettingsOf resolves what the learner actor reads.
func learnSettingsOf(cfg *config.Config, o rewards.Objective, model gpu.Config, tok tokenizer.Tokenizer) learnSettings {
	return learnSettings{objective: o, loss: lossConfig(cfg), alpha: cfg.MaxEnt.Alpha, alphaCtl: loss.DefaultAlphaControl(),
		temperature: cfg.Generation.Temperature, topKKL: cfg.Metrics.TopKKL, vocab: model.Vocab, tokenizer: tok}
}

// optimSettingsOf resolves the optim section (AdamW, the RL schedule and
// the warm start's rate) and train.micro_batch, the learners' passes.
func optimSettingsOf(cfg *config.Config) optimSettings {
	o := cfg.Optim
	return optimSettings{warmLR: o.WarmStartLR, rl: rlSchedule(cfg),
		adam: gpu.LearnerConfig{Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay,
			MaxGradNorm: o.GradClip, MaxUpdateRatio: o.MaxUpdateRatio, MicroBatch: cfg.Train.MicroBatch}}
}

// startSettingsOf resolves where RL starts.
func startSettingsOf(cfg *config.Config, meta rewards.MetaController) startSettings {
	return startSettings{checkpoint: cfg.Model.Checkpoint, warmCheckpoint: cfg.Train.WarmStartFromCheckpoint,
		modelSeed: uint64(cfg.Model.Seed), tau: cfg.MaxEnt.Tau, beta: cfg.MaxEnt.Beta, meta: meta, guards: cfg.Train.Guard != config.GuardOff}
}

// recordSettingsOf resolves what the runner records and when; model is
// the policy's configuration (recordedConfig).
func recordSettingsOf(cfg *config.Config, model gpu.Config, m metricSettings) (recordSettings, error) {
	saved := recordedConfig(cfg, model)
	text, err := saved.YAML()
	if err != nil {
		return recordSettings{}, err
	}
	fixed, auto, err := cfg.Trace.SlowThreshold()
	if err != nil {
		return recordSettings{}, &config.Error{Key: "trace.slow_step", Value: cfg.Trace.SlowStep, Reason: err.Error(), Err: config.ErrRange}
	}
	t, o := cfg.Train, cfg.Output
	return recordSettings{
		cadence:    cadence{log: max(o.LogEvery, 1), samples: o.SampleEvery, eval: t.EvalEvery, checkpoint: t.CheckpointEvery, steps: t.Steps},
		sampleRows: o.SampleRows, maxSkipped: t.MaxSkippedSteps, guardStops: t.Guard == config.GuardStop, keep: o.KeepCheckpoints, seed: t.Seed,
		config: text, metrics: m, slowFixed: fixed, slowAuto: auto, showsTau: m.objective == rewards.ObjectiveMaxEntListwise,
	}, nil
}

// recordedConfig is the configuration a run records (config.yaml): the
// values that run, readable from any directory. A model.checkpoint's
// dimensions replace the preset's and the model section's (they are what
// runs: its context, not the recipe's), and the paths of the checkpoint
// and data sets are absolute, so that `mgrpo-node eval` finds the data
// from elsewhere. train.resume is cleared: a resume takes the
// configuration from a checkpoint, not the path it came from.
func recordedConfig(cfg *config.Config, model gpu.Config) config.Config {
	saved := *cfg
	saved.Train.Resume = ""
	if m := &saved.Model; m.Checkpoint != "" {
		m.Preset, m.Hidden, m.Layers, m.Heads, m.KVHeads, m.MLP, m.Context = "", model.Hidden, model.Layers, model.Heads, model.KVHeads, model.MLP, model.Context
		m.RopeTheta, m.TieEmbeddings = model.RopeTheta, model.TieEmbeddings
	}
	for _, p := range []*string{&saved.Model.Checkpoint, &saved.Task.Dataset, &saved.Task.EvalDataset} {
		if abs, err := filepath.Abs(*p); *p != "" && err == nil {
			*p = abs
		}
	}
	return saved
}

// pipelineOptionsOf are the options of a run's pipeline: every pool local
// under role all; on a learner node, local pools only for the other roles
// it also has (the rest start empty, for worker nodes to fill), and the
// first generation held until cluster.min_generators have joined.
func pipelineOptionsOf(c config.Cluster) PipelineOptions {
	o := PipelineOptions{Generators: max(c.Generators, 1), RewardEvaluators: 1, ReferenceScorers: 1,
		RequestTimeout: c.RequestTimeout, Retries: 2, Hedge: c.Hedge, ChunkBytes: c.WeightChunkBytes}
	if c.HasRole(config.RoleAll) {
		return o
	}
	o.Generators, o.RewardEvaluators, o.ReferenceScorers = 0, 0, 0
	if c.HasRole(config.RoleGenerator) {
		o.Generators = max(c.Generators, 1)
	}
	if c.HasRole(config.RoleReward) {
		o.RewardEvaluators = max(c.RewardEvaluators, 1)
	}
	if c.HasRole(config.RoleReference) {
		o.ReferenceScorers = 1
	}
	o.MinGenerators = c.MinGenerators
	return o
}

// newTask builds the configured task, or a data set verified by it, and
// the task evaluations draw from: the data set's held-out rows, or the
// task itself.
func newTask(c config.Task) (train, eval tasks.Task, err error) {
	if c.Dataset == "" {
		t, err := tasks.New(c.Name, taskOptions(c))
		return t, t, err
	}
	for _, f := range []struct{ key, path string }{{"task.dataset", c.Dataset}, {"task.eval_dataset", c.EvalDataset}} {
		if err := readableFile(f.path); f.path != "" && err != nil {
			return nil, nil, pathError(f.key, f.path, err)
		}
	}
	src := tasks.Source{Path: c.Dataset, Fields: tasks.Fields{Prompt: c.PromptField, Answer: c.AnswerField},
		EvalPath: c.EvalDataset, EvalFraction: c.EvalFraction, Seed: uint64(c.Seed)}
	tr, ev, err := tasks.OpenDatasets(src, c.Name, taskOptions(c))
	if err != nil {
		key, path := "task.dataset", c.Dataset
		if c.EvalDataset != "" && strings.HasPrefix(err.Error(), "dataset "+c.EvalDataset+":") {
			key, path = "task.eval_dataset", c.EvalDataset
		}
		return nil, nil, pathError(key, path, errors.New(strings.TrimPrefix(err.Error(), "dataset "+path+": ")))
	}
	if ev == nil {
		return tr, tr, nil
	}
	return tr, ev, nil
}

// readableFile returns why path is not a regular file this process can
// open, or nil. It looks before it opens: opening a named pipe waits for
// a writer.
func readableFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return unwrapPath(err)
	case fi.IsDir():
		return errors.New("is a directory, not a file")
	case !fi.Mode().IsRegular():
		return errors.New("is not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return unwrapPath(err)
	}
	return f.Close()
}

// unwrapPath is a path error's cause alone: the key's value names the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// taskOptions are the task section's generator options.
func taskOptions(c config.Task) tasks.Options {
	return tasks.Options{Digits: c.Digits, Numbers: c.Numbers, MaxNumber: c.MaxNumber}
}

// errEOSZero refuses a tokenizer whose end-of-sequence id is 0:
// gpu.SampleOptions reads EOS 0 as "no stop token", so generation would
// never stop at it.
var errEOSZero = errors.New("the tokenizer's end-of-sequence id is 0, which generation cannot stop at yet (gpu.SampleOptions reads EOS 0 as none); use a checkpoint whose eos_token has another id (an instruct model's, say)")

// policyConfig is the policy's configuration and tokenizer: those of
// model.checkpoint; of a resumed run's reference/ (the model the run
// started from, saved with its tokenizer: a run from a Hugging Face
// checkpoint resumes with that checkpoint's shape, family and tokenizer,
// which the model section does not hold); or the preset's with the
// built-in tokenizer.
func policyConfig(m config.Model, resume string, completionLen int) (gpu.Config, tokenizer.Tokenizer, error) {
	dir, key := m.Checkpoint, "model.checkpoint"
	if ref := filepath.Join(resume, ReferenceDir); resume != "" && hasFile(ref, tokenizer.FileName) {
		dir, key = ref, "train.resume"
	}
	if dir == "" {
		c, err := modelConfig(m, completionLen)
		return c, tokenizer.NewChar(), err
	}
	c, err := gpu.ReadCheckpointConfig(dir)
	if err != nil {
		return gpu.Config{}, nil, pathError(key, dir, err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return gpu.Config{}, nil, pathError(key, dir, err)
	}
	if tok.EOS() == 0 {
		return gpu.Config{}, nil, pathError(key, dir, errEOSZero)
	}
	if tok.VocabSize() > c.Vocab {
		return gpu.Config{}, nil, pathError(key, dir, fmt.Errorf("tokenizer has %d ids, the model's vocabulary %d", tok.VocabSize(), c.Vocab))
	}
	return c, tok, nil
}

// pathError is the configuration error of a key naming a file or
// directory that cannot be used (missing, unreadable, of the wrong kind or
// content): bad input, refused before a run starts, not a failed run.
// The reason drops the path where the error repeats it, to stay within
// the line's 200 bytes a part.
func pathError(key, path string, err error) error {
	reason := err.Error()
	for _, prefix := range []string{"load checkpoint " + path + ": ", "dataset " + path + ": "} {
		reason = strings.TrimPrefix(reason, prefix)
	}
	reason = strings.ReplaceAll(reason, path+string(filepath.Separator), "")
	return &config.Error{Key: key, Value: strconv.Quote(path), Reason: reason, Err: config.ErrRange}
}

// hasFile reports whether dir holds a file name.
func hasFile(dir, name string) bool {
	fi, err := os.Stat(filepath.Join(dir, name))
	return err == nil && fi.Mode().IsRegular()
}

// modelConfig resolves the policy's dimensions for the built-in tokenizer:
// the preset's (gpu.Preset, the one preset table), overridden by every
// non-zero explicit dimension and model.rope_theta; model.kv_heads 0
// means model.heads; a tied preset stays tied. A
// preset gpu does not know, dimensions no model can have, and a
// completion that leaves no room for the prompt in the context are
// refused as the configuration errors they are (config validates every
// other key without knowing the presets).
func modelConfig(m config.Model, completionLen int) (gpu.Config, error) {
	c := gpu.Config{Vocab: gpu.PresetVocab, NormEps: 1e-6, RopeTheta: 10000}
	if m.Preset != "" {
		p, err := gpu.Preset(m.Preset)
		if err != nil {
			names := append(gpu.PresetNames(), "")
			for i, name := range names {
				names[i] = strconv.Quote(name)
			}
			return gpu.Config{}, &config.Error{Key: "model.preset", Value: strconv.Quote(m.Preset),
				Reason: "must be one of " + strings.Join(names, ", "), Err: config.ErrRange}
		}
		c = p
	}
	for _, o := range []struct {
		dst *int
		v   int
	}{{&c.Hidden, m.Hidden}, {&c.Layers, m.Layers}, {&c.Heads, m.Heads}, {&c.KVHeads, m.KVHeads}, {&c.MLP, m.MLP}, {&c.Context, m.Context}} {
		if o.v != 0 {
			*o.dst = o.v
		}
	}
	if m.KVHeads == 0 && (m.Preset == "" || m.Heads != 0) {
		c.KVHeads = c.Heads
	}
	if m.RopeTheta != 0 {
		c.RopeTheta = m.RopeTheta
	}
	c.TieEmbeddings = c.TieEmbeddings || m.TieEmbeddings
	return c, checkModel(c, completionLen)
}

// checkModel refuses dimensions of a resolved model that no model can
// have, naming the key to change, and a completion length that leaves no
// room for the prompt.
func checkModel(c gpu.Config, completionLen int) error {
	conflict := func(key string, value int, reason string) error {
		return &config.Error{Key: key, Value: strconv.Itoa(value), Reason: reason, Err: config.ErrConflict}
	}
	for _, d := range []struct {
		key        string
		value, max int
	}{{"model.hidden", c.Hidden, gpu.MaxDim}, {"model.layers", c.Layers, gpu.MaxLayers}, {"model.heads", c.Heads, gpu.MaxDim},
		{"model.kv_heads", c.KVHeads, gpu.MaxDim}, {"model.mlp", c.MLP, gpu.MaxDim}, {"model.context", c.Context, gpu.MaxContext}} {
		if d.value > d.max {
			return &config.Error{Key: d.key, Value: strconv.Itoa(d.value), Reason: fmt.Sprintf("must be at most %d", d.max), Err: config.ErrRange}
		}
	}
	switch {
	case c.Hidden%c.Heads != 0:
		return conflict("model.hidden", c.Hidden, fmt.Sprintf("must be a multiple of model.heads (%d)", c.Heads))
	case c.Heads%c.KVHeads != 0:
		return conflict("model.kv_heads", c.KVHeads, fmt.Sprintf("must divide model.heads (%d)", c.Heads))
	case (c.Hidden/c.Heads)%2 != 0:
		return conflict("model.hidden", c.Hidden, fmt.Sprintf("head size hidden/heads = %d must be even for RoPE", c.Hidden/c.Heads))
	case completionLen >= c.Context:
		return conflict("generation.max_completion_len", completionLen, fmt.Sprintf("must be below the model context (%d) to leave room for the prompt", c.Context))
	}
	if err := c.Validate(); err != nil {
		return &config.Error{Key: "model", Reason: strings.TrimPrefix(err.Error(), gpu.ErrBadConfig.Error()+": "), Err: config.ErrRange}
	}
	return nil
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
func controllers(c config.Controller, o rewards.Objective) rewards.Controllers {
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
	return rewards.Controllers{Tau: tau, Beta: beta, Meta: meta, Objective: o}
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

// learnerConfig is the run's AdamW at schedule s, on dev: the warm start's
// and RL's learners differ only in their schedule.
func (o optimSettings) learnerConfig(s optim.Schedule, dev gpu.Device) gpu.LearnerConfig {
	c := o.adam
	c.LR, c.Schedule, c.Device = s.Base, s, dev
	return c
}

// openDevice opens this process's device, model.device, with its
// products' precision, model.dtype (bf16 needs cuda: config.Validate
// refuses it on the CPU).
func openDevice(m config.Model) (gpu.Device, error) {
	return gpu.OpenDeviceWith(m.Device, gpu.DeviceOptions{DType: m.DType})
}
