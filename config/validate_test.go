package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestValidate breaks one rule per case, starting from the defaults, and
// checks the key named and the sentinel. Each rule of validate.go has a
// case here.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		modify func(c *Config)
		key    string
		want   error
	}{
		// generic
		{"NaN float", func(c *Config) { c.Optim.LR = math.NaN() }, "optim.lr", ErrRange},
		{"Inf in list", func(c *Config) { c.Rewards.Weights = []float64{math.Inf(1)} }, "rewards.weights", ErrRange},
		// model
		{"negative dim", func(c *Config) { c.Model.Layers = -1 }, "model.layers", ErrRange},
		{"explicit dims missing", func(c *Config) { c.Model.Preset = "" }, "model.hidden", ErrConflict},
		{"explicit context missing", func(c *Config) {
			c.Model = Model{Hidden: 32, Layers: 1, Heads: 2, MLP: 64, RopeTheta: 1e4, Device: "cpu", DType: "float32"}
		}, "model.context", ErrConflict},
		{"rope theta", func(c *Config) { c.Model.RopeTheta = -1 }, "model.rope_theta", ErrRange},
		{"device", func(c *Config) { c.Model.Device = "tpu" }, "model.device", ErrRange},
		{"dtype", func(c *Config) { c.Model.DType = "float16" }, "model.dtype", ErrRange},
		{"bf16 on the cpu", func(c *Config) { c.Model.DType = "bf16" }, "model.dtype", ErrConflict},
		// task
		{"task name", func(c *Config) { c.Task.Name = "chess" }, "task.name", ErrRange},
		{"digits", func(c *Config) { c.Task.Digits = 0 }, "task.digits", ErrRange},
		{"numbers", func(c *Config) { c.Task.Numbers = 7 }, "task.numbers", ErrRange},
		{"max number", func(c *Config) { c.Task.MaxNumber = 0 }, "task.max_number", ErrRange},
		{"word steps", func(c *Config) { c.Task.Steps = 6 }, "task.steps", ErrRange},
		{"eval fraction range", func(c *Config) { c.Task.Dataset, c.Task.EvalFraction = "d.parquet", 1 }, "task.eval_fraction", ErrRange},
		{"prompt field without dataset", func(c *Config) { c.Task.PromptField = "question" }, "task.prompt_field", ErrConflict},
		{"eval dataset without dataset", func(c *Config) { c.Task.EvalDataset = "e.jsonl" }, "task.eval_dataset", ErrConflict},
		{"eval file and fraction", func(c *Config) {
			c.Task.Dataset, c.Task.EvalDataset, c.Task.EvalFraction = "d.jsonl", "e.jsonl", 0.1
		}, "task.eval_fraction", ErrConflict},
		{"prompt template name", func(c *Config) { c.Task.PromptTemplate = "alpaca" }, "task.prompt_template", ErrRange},
		{"prompt template without checkpoint", func(c *Config) { c.Task.PromptTemplate = "chatml" }, "task.prompt_template", ErrConflict},
		{"system prompt without template", func(c *Config) { c.Task.SystemPrompt = "be brief" }, "task.system_prompt", ErrConflict},
		// generation
		{"group of one", func(c *Config) { c.Generation.NumGenerations = 1 }, "generation.num_generations", ErrRange},
		{"temperature", func(c *Config) { c.Generation.Temperature = 0 }, "generation.temperature", ErrRange},
		{"temperature below the floor", func(c *Config) { c.Generation.Temperature = 1e-300 }, "generation.temperature", ErrRange},
		{"temperature just below the floor", func(c *Config) { c.Generation.Temperature = 0.000999 }, "generation.temperature", ErrRange},
		{"top k", func(c *Config) { c.Generation.TopK = -1 }, "generation.top_k", ErrRange},
		{"top p", func(c *Config) { c.Generation.TopP = 0 }, "generation.top_p", ErrRange},
		{"completion len", func(c *Config) { c.Generation.MaxCompletionLen = 0 }, "generation.max_completion_len", ErrRange},
		{"retry rounds", func(c *Config) { c.Generation.RetryRounds = -1 }, "generation.retry_rounds", ErrRange},
		// rewards
		{"no reward funcs", func(c *Config) { c.Rewards.Funcs = nil; c.Rewards.Weights = nil }, "rewards.funcs", ErrRange},
		{"duplicate reward", func(c *Config) { c.Rewards.Funcs = []string{"accuracy", "accuracy"}; c.Rewards.Weights = nil }, "rewards.funcs", ErrRange},
		{"weights count", func(c *Config) { c.Rewards.Weights = []float64{1, 2} }, "rewards.weights", ErrConflict},
		// maxent
		{"objective", func(c *Config) { c.MaxEnt.Objective = "ppo" }, "maxent.objective", ErrRange},
		{"negative tau", func(c *Config) { c.MaxEnt.Tau = -1 }, "maxent.tau", ErrRange},
		{"negative beta", func(c *Config) { c.MaxEnt.Beta = -0.1 }, "maxent.beta", ErrRange},
		{"negative alpha", func(c *Config) { c.MaxEnt.Alpha = -0.1 }, "maxent.alpha", ErrRange},
		{"q temperature", func(c *Config) { c.MaxEnt.QTemperature = 0 }, "maxent.q_temperature", ErrRange},
		{"q epsilon", func(c *Config) { c.MaxEnt.QEpsilon = 1 }, "maxent.q_epsilon", ErrRange},
		{"weight denominator", func(c *Config) { c.MaxEnt.WeightDenominator = "beta" }, "maxent.weight_denominator", ErrRange},
		{"clip coef", func(c *Config) { c.MaxEnt.ClipObjectiveCoef = -1 }, "maxent.clip_objective_coef", ErrRange},
		{"clip baseline", func(c *Config) { c.MaxEnt.ClipAdvBaseline = 2 }, "maxent.clip_adv_baseline", ErrRange},
		{"negative bonus", func(c *Config) { c.MaxEnt.EntropyBonusCoef = -1 }, "maxent.entropy_bonus_coef", ErrRange},
		{"negative seed alpha", func(c *Config) { c.MaxEnt.SeedGRPO.Alpha = -1 }, "maxent.seed_grpo.alpha", ErrRange},
		{"listwise with tau 0", func(c *Config) { c.MaxEnt.Objective = ObjectiveMaxEntListwise; c.MaxEnt.Tau = 0 }, "maxent.tau", ErrConflict},
		{"bonus objective without coef", func(c *Config) { c.MaxEnt.Objective = ObjectiveGRPOEntropyBonus }, "maxent.entropy_bonus_coef", ErrConflict},
		{"bonus coef with grpo", func(c *Config) { c.MaxEnt.EntropyBonusCoef = 0.3 }, "maxent.entropy_bonus_coef", ErrConflict},
		{"seed-grpo with maxent", func(c *Config) { c.MaxEnt.Objective = ObjectiveMaxEntEntropy; c.MaxEnt.SeedGRPO.Enabled = true }, "maxent.seed_grpo.enabled", ErrConflict},
		{"clip objective without listwise", func(c *Config) { c.MaxEnt.ClipObjective = true }, "maxent.clip_objective", ErrConflict},
		// controller
		{"tau target", func(c *Config) { c.Controller.Tau.TargetEntropy = -1 }, "controller.tau.target_entropy", ErrRange},
		{"tau final", func(c *Config) { c.Controller.Tau.TargetEntropyFinal = -1 }, "controller.tau.target_entropy_final", ErrRange},
		{"tau horizon", func(c *Config) { c.Controller.Tau.Horizon = -1 }, "controller.tau.horizon", ErrRange},
		{"tau lr", func(c *Config) { c.Controller.Tau.LR = -1 }, "controller.tau.lr", ErrRange},
		{"tau min", func(c *Config) { c.Controller.Tau.Min = -1 }, "controller.tau.min", ErrRange},
		{"tau max", func(c *Config) { c.Controller.Tau.Max = -1 }, "controller.tau.max", ErrRange},
		{"tau max below min", func(c *Config) { c.Controller.Tau.Min = 0.5; c.Controller.Tau.Max = 0.1 }, "controller.tau.max", ErrConflict},
		{"tau warmup", func(c *Config) { c.Controller.Tau.WarmupSteps = -2 }, "controller.tau.warmup_steps", ErrRange},
		{"tau ema", func(c *Config) { c.Controller.Tau.EMADecay = 1 }, "controller.tau.ema_decay", ErrRange},
		{"negative kl target", func(c *Config) { c.Controller.Beta.KLTarget = -0.1 }, "controller.beta.kl_target", ErrRange},
		{"negative kl horizon", func(c *Config) { c.Controller.Beta.Horizon = -1 }, "controller.beta.horizon", ErrRange},
		{"negative kl step", func(c *Config) { c.Controller.Beta.StepSize = -1 }, "controller.beta.step_size", ErrRange},
		{"meta method", func(c *Config) { c.Controller.Meta.Method = "hessian" }, "controller.meta.method", ErrRange},
		{"meta lr", func(c *Config) { c.Controller.Meta.LR = -1 }, "controller.meta.lr", ErrRange},
		{"meta tau lr", func(c *Config) { c.Controller.Meta.TauLR = -1 }, "controller.meta.tau_lr", ErrRange},
		{"meta beta lr", func(c *Config) { c.Controller.Meta.BetaLR = -1 }, "controller.meta.beta_lr", ErrRange},
		{"meta clip", func(c *Config) { c.Controller.Meta.BetaGradClip = -1 }, "controller.meta.beta_grad_clip", ErrRange},
		{"meta interval", func(c *Config) { c.Controller.Meta.Interval = 0 }, "controller.meta.interval", ErrRange},
		{"tau controller without listwise", func(c *Config) { c.Controller.Tau.Enabled = true }, "controller.tau.enabled", ErrConflict},
		{"tau controller lr 0", func(c *Config) { listwise(c); c.Controller.Tau.LR = 0 }, "controller.tau.lr", ErrConflict},
		{"tau target above ln K", func(c *Config) { listwise(c); c.Controller.Tau.TargetEntropy = 2.1 }, "controller.tau.target_entropy", ErrConflict},
		{"tau final above ln K", func(c *Config) {
			listwise(c)
			c.Controller.Tau.Horizon = 10
			c.Controller.Tau.TargetEntropyFinal = 3
		}, "controller.tau.target_entropy_final", ErrConflict},
		{"tau below min", func(c *Config) { listwise(c); c.Controller.Tau.Min = 0.6 }, "maxent.tau", ErrConflict},
		{"beta controller target 0", func(c *Config) { betaOn(c); c.Controller.Beta.KLTarget = 0 }, "controller.beta.kl_target", ErrConflict},
		{"beta controller horizon 0", func(c *Config) { betaOn(c); c.Controller.Beta.Horizon = 0 }, "controller.beta.horizon", ErrConflict},
		{"beta controller step 0", func(c *Config) { betaOn(c); c.Controller.Beta.StepSize = 0 }, "controller.beta.step_size", ErrConflict},
		{"beta controller from beta 0", func(c *Config) { betaOn(c); c.MaxEnt.Beta = 0 }, "maxent.beta", ErrConflict},
		{"meta without lr", func(c *Config) { c.Controller.Meta.Enabled = true; c.Controller.Meta.LR = 0 }, "controller.meta.lr", ErrConflict},
		{"meta with beta controller", func(c *Config) { betaOn(c); c.Controller.Meta.Enabled = true }, "controller.meta.enabled", ErrConflict},
		// loss
		{"loss type", func(c *Config) { c.Loss.Type = "sum" }, "loss.type", ErrRange},
		{"policy loss", func(c *Config) { c.Loss.PolicyLoss = "ppo" }, "loss.policy_loss", ErrRange},
		{"epsilon", func(c *Config) { c.Loss.Epsilon = 0 }, "loss.epsilon", ErrRange},
		{"negative epsilon high", func(c *Config) { c.Loss.EpsilonHigh = -1 }, "loss.epsilon_high", ErrRange},
		{"epsilon high below epsilon", func(c *Config) { c.Loss.EpsilonHigh = 0.1 }, "loss.epsilon_high", ErrConflict},
		{"is ratio", func(c *Config) { c.Loss.ISRatioMax = 0.5 }, "loss.is_ratio_max", ErrRange},
		// optim
		{"lr", func(c *Config) { c.Optim.LR = 0 }, "optim.lr", ErrRange},
		{"warm start lr", func(c *Config) { c.Optim.WarmStartLR = -1 }, "optim.warm_start_lr", ErrRange},
		{"beta1", func(c *Config) { c.Optim.Beta1 = 1 }, "optim.beta1", ErrRange},
		{"beta2", func(c *Config) { c.Optim.Beta2 = -0.1 }, "optim.beta2", ErrRange},
		{"eps", func(c *Config) { c.Optim.Eps = 0 }, "optim.eps", ErrRange},
		{"weight decay", func(c *Config) { c.Optim.WeightDecay = -1 }, "optim.weight_decay", ErrRange},
		{"grad clip", func(c *Config) { c.Optim.GradClip = -1 }, "optim.grad_clip", ErrRange},
		{"schedule", func(c *Config) { c.Optim.Schedule = "step" }, "optim.schedule", ErrRange},
		{"warmup", func(c *Config) { c.Optim.WarmupSteps = -1 }, "optim.warmup_steps", ErrRange},
		{"warmup longer than run", func(c *Config) { c.Optim.WarmupSteps = 201 }, "optim.warmup_steps", ErrConflict},
		{"cosine without decay", func(c *Config) { c.Optim.Schedule, c.Optim.WarmupSteps = ScheduleCosine, 200 }, "optim.warmup_steps", ErrConflict},
		// train
		{"steps", func(c *Config) { c.Train.Steps = -1 }, "train.steps", ErrRange},
		{"prompts per step", func(c *Config) { c.Train.PromptsPerStep = 0 }, "train.prompts_per_step", ErrRange},
		{"micro-batch", func(c *Config) { c.Train.MicroBatch = -1 }, "train.micro_batch", ErrRange},
		{"warm start steps", func(c *Config) { c.Train.WarmStartSteps = -1 }, "train.warm_start_steps", ErrRange},
		{"warm start batch", func(c *Config) { c.Train.WarmStartBatch = 0 }, "train.warm_start_batch", ErrRange},
		{"max staleness", func(c *Config) { c.Train.MaxStaleness = -1 }, "train.max_staleness", ErrRange},
		{"sync every", func(c *Config) { c.Train.SyncEvery = 0 }, "train.sync_every", ErrRange},
		{"refill rounds", func(c *Config) { c.Train.DynamicSamplingMaxRounds = 0 }, "train.dynamic_sampling_max_rounds", ErrRange},
		{"checkpoint every", func(c *Config) { c.Train.CheckpointEvery = -1 }, "train.checkpoint_every", ErrRange},
		{"eval every", func(c *Config) { c.Train.EvalEvery = -1 }, "train.eval_every", ErrRange},
		{"eval prompts", func(c *Config) { c.Train.EvalPrompts = 0 }, "train.eval_prompts", ErrRange},
		{"sync slower than staleness", func(c *Config) { c.Train.SyncEvery = 3; c.Train.MaxStaleness = 1 }, "train.sync_every", ErrConflict},
		{"resume with checkpoint", func(c *Config) { c.Train.Resume = "runs/a"; c.Model.Checkpoint = "ck" }, "train.resume", ErrConflict},
		// cluster
		{"role", func(c *Config) { c.Cluster.Role = "boss" }, "cluster.role", ErrRange},
		{"cluster name", func(c *Config) { c.Cluster.Name = "" }, "cluster.name", ErrRange},
		{"host", func(c *Config) { c.Cluster.Host = "" }, "cluster.host", ErrRange},
		{"port", func(c *Config) { c.Cluster.Port = 70000 }, "cluster.port", ErrRange},
		{"seed not host:port", func(c *Config) { c.Cluster.Seeds = []string{"10.0.0.1"} }, "cluster.seeds", ErrRange},
		{"role in a list", func(c *Config) { c.Cluster.Role = "learner,boss" }, "cluster.role", ErrRange},
		{"all with others", func(c *Config) { c.Cluster.Role = "all,reward" }, "cluster.role", ErrConflict},
		{"worker without seeds", func(c *Config) { c.Cluster.Role = "generator" }, "cluster.seeds", ErrConflict},
		{"public host without tls", func(c *Config) { c.Cluster.Role, c.Cluster.Host = RoleLearner, "0.0.0.0" }, "cluster.host", ErrConflict},
		{"tls half given", func(c *Config) { c.Cluster.Role, c.Cluster.TLS.CA = RoleLearner, "ca.pem" }, "cluster.tls", ErrConflict},
		{"tls and insecure", func(c *Config) {
			c.Cluster.Role, c.Cluster.Insecure, c.Cluster.TLS = RoleLearner, true, TLS{CA: "a", Cert: "b", Key: "c"}
		}, "cluster.insecure", ErrConflict},
		{"remote port", func(c *Config) { c.Cluster.RemotePort = -1 }, "cluster.remote_port", ErrRange},
		{"advertise port", func(c *Config) { c.Cluster.Advertise = "10.0.0.1:0" }, "cluster.advertise", ErrRange},
		{"advertise not a host", func(c *Config) { c.Cluster.Advertise = "http://10.0.0.1/" }, "cluster.advertise", ErrRange},
		{"reward evaluators", func(c *Config) { c.Cluster.RewardEvaluators = 0 }, "cluster.reward_evaluators", ErrRange},
		{"generators", func(c *Config) { c.Cluster.Generators = 0 }, "cluster.generators", ErrRange},
		{"min generators", func(c *Config) { c.Cluster.MinGenerators = 0 }, "cluster.min_generators", ErrRange},
		{"min generators above role all's own", func(c *Config) { c.Cluster.MinGenerators = 2 }, "cluster.min_generators", ErrConflict},
		{"max message bytes", func(c *Config) { c.Cluster.MaxMessageBytes = 1 << 20 }, "cluster.max_message_bytes", ErrRange},
		{"chunk bytes", func(c *Config) { c.Cluster.WeightChunkBytes = 10 }, "cluster.weight_chunk_bytes", ErrRange},
		{"chunk above message limit", func(c *Config) { c.Cluster.WeightChunkBytes = c.Cluster.MaxMessageBytes }, "cluster.weight_chunk_bytes", ErrConflict},
		{"request timeout", func(c *Config) { c.Cluster.RequestTimeout = -time.Second }, "cluster.request_timeout", ErrRange},
		// trace
		{"otlp endpoint", func(c *Config) { c.Trace.OTLPEndpoint = "localhost" }, "trace.otlp_endpoint", ErrRange},
		{"protocol", func(c *Config) { c.Trace.Protocol = "udp" }, "trace.protocol", ErrRange},
		{"sample ratio", func(c *Config) { c.Trace.SampleRatio = 1.5 }, "trace.sample_ratio", ErrRange},
		{"slow step", func(c *Config) { c.Trace.SlowStep = "-1s" }, "trace.slow_step", ErrRange},
		{"service name", func(c *Config) { c.Trace.ServiceName = "" }, "trace.service_name", ErrRange},
		// output
		{"output dir", func(c *Config) { c.Output.Dir = "" }, "output.dir", ErrRange},
		{"output name", func(c *Config) { c.Output.Name = "a/b" }, "output.name", ErrRange},
		{"output name backslash", func(c *Config) { c.Output.Name = `a\b` }, "output.name", ErrRange},
		{"output name dot", func(c *Config) { c.Output.Name = "." }, "output.name", ErrRange},
		{"output name dot dot", func(c *Config) { c.Output.Name = ".." }, "output.name", ErrRange},
		{"output name hidden", func(c *Config) { c.Output.Name = ".run" }, "output.name", ErrRange},
		{"output name newline", func(c *Config) { c.Output.Name = "run\nfake line" }, "output.name", ErrRange},
		{"output name escape", func(c *Config) { c.Output.Name = "run\x1b[2J" }, "output.name", ErrRange},
		{"output name not utf-8", func(c *Config) { c.Output.Name = "run\xff" }, "output.name", ErrRange},
		{"output name too long", func(c *Config) { c.Output.Name = strings.Repeat("a", MaxRunNameBytes+1) }, "output.name", ErrRange},
		{"log every", func(c *Config) { c.Output.LogEvery = 0 }, "output.log_every", ErrRange},
		{"sample every", func(c *Config) { c.Output.SampleEvery = -1 }, "output.sample_every", ErrRange},
		{"sample rows", func(c *Config) { c.Output.SampleRows = -1 }, "output.sample_rows", ErrRange},
		{"keep checkpoints", func(c *Config) { c.Output.KeepCheckpoints = -1 }, "output.keep_checkpoints", ErrRange},
		// metrics
		{"top k kl negative", func(c *Config) { c.Metrics.TopKKL = -1 }, "metrics.top_k_kl", ErrRange},
		{"top k kl above the cap", func(c *Config) { c.Metrics.TopKKL = 1001 }, "metrics.top_k_kl", ErrRange},
		// values that cannot be meant (the fault probe's)
		{"lr 1e308", func(c *Config) { c.Optim.LR = 1e308 }, "optim.lr", ErrRange},
		{"lr above 1", func(c *Config) { c.Optim.LR = 1.5 }, "optim.lr", ErrRange},
		{"warm start lr above 1", func(c *Config) { c.Optim.WarmStartLR = 2 }, "optim.warm_start_lr", ErrRange},
		{"weight decay flips weights", func(c *Config) { c.Optim.WeightDecay = 1000 }, "optim.weight_decay", ErrConflict},
		{"max update ratio", func(c *Config) { c.Optim.MaxUpdateRatio = -1 }, "optim.max_update_ratio", ErrRange},
		{"beta 1e308", func(c *Config) { c.MaxEnt.Beta = 1e308 }, "maxent.beta", ErrRange},
		{"tau above the cap", func(c *Config) { c.MaxEnt.Tau = 1e4 }, "maxent.tau", ErrRange},
		{"alpha above the cap", func(c *Config) { c.MaxEnt.Alpha = 1e4 }, "maxent.alpha", ErrRange},
		{"q temperature above the cap", func(c *Config) { c.MaxEnt.QTemperature = 1e9 }, "maxent.q_temperature", ErrRange},
		{"tau lr above 1", func(c *Config) { c.Controller.Tau.LR = 5 }, "controller.tau.lr", ErrRange},
		{"meta lr above 1", func(c *Config) { c.Controller.Meta.LR = 5 }, "controller.meta.lr", ErrRange},
		{"request timeout 1ns", func(c *Config) { c.Cluster.RequestTimeout = time.Nanosecond }, "cluster.request_timeout", ErrRange},
		{"max skipped steps", func(c *Config) { c.Train.MaxSkippedSteps = -1 }, "train.max_skipped_steps", ErrRange},
		{"prometheus port", func(c *Config) { c.Output.PrometheusPort = 70000 }, "output.prometheus_port", ErrRange},
		{"prometheus port on the membership port", func(c *Config) { c.Output.PrometheusPort, c.Cluster.Port = 7000, 7000 }, "output.prometheus_port", ErrConflict},
		{"prometheus port on the remote port", func(c *Config) { c.Output.PrometheusPort, c.Cluster.RemotePort = 7000, 7000 }, "output.prometheus_port", ErrConflict},
		{"profiles without a port", func(c *Config) { c.Output.Pprof = true }, "output.pprof", ErrConflict},
		{"otlp metrics endpoint", func(c *Config) { c.Output.OTLPMetricsEndpoint = "collector" }, "output.otlp_metrics_endpoint", ErrRange},
		{"serve without a port", func(c *Config) { c.Output.Serve = "8080" }, "output.serve", ErrRange},
		{"serve port range", func(c *Config) { c.Output.Serve = ":70000" }, "output.serve", ErrRange},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.modify(c)
			err := c.Validate()
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Validate() = %v, want an *Error for %s", err, tc.key)
			}
			if ce.Key != tc.key || !errors.Is(err, tc.want) {
				t.Errorf("Validate() = %q (key %s, %v); want key %s, %v", err, ce.Key, ce.Err, tc.key, tc.want)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "config: "+tc.key) {
				t.Errorf("message %q is not one line starting with the key", msg)
			}
		})
	}
}

// TestValidateAccepts checks valid combinations near the rules' edges.
func TestValidateAccepts(t *testing.T) {
	cases := []struct {
		name   string
		modify func(c *Config)
	}{
		{"listwise with tau controller", func(c *Config) { listwise(c) }},
		{"beta controller", betaOn},
		{"meta controller alone", func(c *Config) { c.Controller.Meta.Enabled = true }},
		{"meta method first_order", func(c *Config) { c.Controller.Meta.Enabled, c.Controller.Meta.Method = true, "first_order" }},
		{"meta method truncated_backprop", func(c *Config) { c.Controller.Meta.Method = "truncated_backprop" }},
		{"meta method potential", func(c *Config) { c.Controller.Meta.Method = "potential" }},
		{"seed-grpo with grpo", func(c *Config) { c.MaxEnt.SeedGRPO.Enabled = true }},
		{"entropy bonus", func(c *Config) { c.MaxEnt.Objective = ObjectiveGRPOEntropyBonus; c.MaxEnt.EntropyBonusCoef = 0.3 }},
		{"tau_plus_beta", func(c *Config) { c.MaxEnt.WeightDenominator = WeightDenominatorTauPlusBeta }},
		{"async with slow sync", func(c *Config) { c.Train.MaxStaleness = 2; c.Train.SyncEvery = 3 }},
		{"output name with dots and unicode", func(c *Config) { c.Output.Name = "run..v2-é" }},
		{"output name of the longest", func(c *Config) { c.Output.Name = strings.Repeat("a", MaxRunNameBytes) }},
		{"explicit dims", func(c *Config) {
			c.Model.Preset = ""
			c.Model.Hidden, c.Model.Layers, c.Model.Heads, c.Model.KVHeads, c.Model.MLP, c.Model.Context = 48, 1, 4, 2, 96, 32
		}},
		{"cluster seeds", func(c *Config) {
			c.Cluster.Seeds = []string{"10.0.0.1:8090", "[::1]:8091"}
			c.Cluster.Role = RoleGenerator
		}},
		{"otlp", func(c *Config) { c.Trace.OTLPEndpoint = "127.0.0.1:4317" }},
		{"no reward weights", func(c *Config) { c.Rewards.Weights = nil }},
		{"temperature at the floor", func(c *Config) { c.Generation.Temperature = MinTemperature }},
		{"two reward funcs, default weights", func(c *Config) { c.Rewards.Funcs = []string{"accuracy", "format"} }},
		{"the largest learning rates", func(c *Config) { c.Optim.LR, c.Optim.WarmStartLR, c.Controller.Tau.LR = maxLR, maxLR, maxLR }},
		{"the largest coefficients", func(c *Config) { c.MaxEnt.Beta, c.MaxEnt.Alpha = maxCoefficient, maxCoefficient }},
		{"the shortest request timeout", func(c *Config) { c.Cluster.RequestTimeout = minRequestTimeout }},
		{"no stop on skips, keep every checkpoint", func(c *Config) { c.Train.MaxSkippedSteps, c.Output.KeepCheckpoints = 0, 0 }},
	}
	for _, tc := range cases {
		c := Default()
		tc.modify(c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		}
	}
}

func listwise(c *Config) {
	c.MaxEnt.Objective = ObjectiveMaxEntListwise
	c.Controller.Tau.Enabled = true
}

func betaOn(c *Config) {
	c.MaxEnt.Beta = 0.04
	c.Controller.Beta.Enabled = true
}

// TestErrorLineIsShort: an error never echoes a huge value whole (a 45 MB
// value once made a 45 MB error line); it shows its start and its size.
func TestErrorLineIsShort(t *testing.T) {
	huge := strings.Repeat("é/", 1<<20)
	_, err := loadArgs([]string{"--output.name", huge}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if len(msg) > 600 || !strings.HasPrefix(msg, "config: output.name = \"é/") || !strings.Contains(msg, fmt.Sprintf("(%d bytes)", len(strconv.Quote(huge)))) {
		t.Errorf("error line of %d bytes: %.300s", len(msg), msg)
	}
	if !utf8.ValidString(msg) {
		t.Errorf("error line is not valid UTF-8")
	}
}
