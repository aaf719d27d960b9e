package actors

import (
	"fmt"
	"math"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// learnSettings is what the learner stage reads besides the batch.
type learnSettings struct {
	objective   rewards.Objective
	loss        loss.Config // Beta is taken from the batch's controller state
	alpha       float64     // maxent_entropy: base entropy coefficient
	alphaCtl    loss.AlphaControl
	temperature float64 // the sampling temperature: log-probs are taken at it
	vocab       int
}

// learn runs one optimiser step of l on pb with the configured objective
// and returns the step's report. Samples older than the learner's version
// (asynchronous mode) get the truncated importance correction on their
// behaviour log-probs (loss.Config.ISTruncation).
func learn(l *gpu.Learner, s learnSettings, pb *messages.PreparedBatch) (*messages.StepReport, error) {
	rs := pb.GetRefScored()
	sc := rs.GetScored()
	ro := sc.GetRollouts()
	step := pb.GetMeta().GetStep()
	seqs := sequences(ro)
	width := 1
	for _, q := range seqs {
		width = max(width, len(q.Completion))
	}
	batch := gpu.Batch{Seqs: seqs, Width: width}
	lb := loss.Batch{
		N: len(seqs), T: width, Mask: batch.Mask(), Advantages: pb.GetAdvantages(),
		GroupSize: int(ro.GetNumGenerations()), Weights: pb.GetWeights(),
		RefLogp: padTokens(refRows(rs), width),
	}
	lag := stalenessOf(ro, l.Version())
	if lag.max > 0 && s.loss.ISTruncation > 0 {
		lb.BehaviourLogp = padTokens(behaviourRows(ro), width)
	}
	cfg := s.loss
	cfg.Beta = pb.GetController().GetBeta()
	if s.objective == rewards.ObjectiveMaxEntListwise {
		cfg.Beta = 0 // beta tilts the listwise weights; the KL is only measured (spec §1.9b)
	}
	var res loss.Result
	st, err := l.Step(batch, s.temperature, func(lp, ent []float64) (loss.Result, error) {
		var err error
		switch s.objective {
		case rewards.ObjectiveMaxEntListwise:
			res, err = loss.Listwise(cfg, lb, lp)
		case rewards.ObjectiveMaxEntEntropy:
			kl, kerr := loss.MeanK3(lb, lp)
			if kerr != nil {
				kl = math.NaN()
			}
			a := loss.ResolveAlpha(s.alphaCtl, s.alpha, kl)
			res, err = loss.MaxEntEntropy(cfg, lb, lp, ent, a.Effective, s.vocab)
		default:
			res, err = loss.Policy(cfg, lb, lp)
		}
		return res, err
	})
	if err != nil {
		return nil, fmt.Errorf("learn step %d: %w", step, err)
	}
	mean, std := rewards.Moments(sc.GetUtilities())
	meta := messages.DeriveMeta(pb.GetMeta())
	meta.PolicyVersion = st.Version
	m := rewards.StepMetrics{
		Step: step + 1, LearningRate: st.LR, GradNorm: st.GradNorm, CompletionTokens: float64(st.Tokens), Objective: s.objective,
		Loss: rewards.LossStats{Total: res.Loss, Policy: res.Stats.PolicyLoss, KL: res.Stats.KL, WeightedKL: res.Stats.KLLoss},
	}.Flatten()
	m["train/clip_ratio/low_mean"] = res.Stats.ClipLow
	m["train/clip_ratio/high_mean"] = res.Stats.ClipHigh
	m["train/clip_ratio/region_mean"] = res.Stats.ClipRegion
	m["train/is_weight_mean"] = res.Stats.ISWeightMean
	m["train/is_truncated_frac"] = res.Stats.ISTruncatedFrac
	m["train/policy_version"] = float64(st.Version)
	m["train/staleness_min"] = float64(lag.min)
	m["train/staleness_max"] = float64(lag.max)
	return &messages.StepReport{
		Meta: meta, Loss: res.Loss, Kl: res.Stats.KL, Entropy: st.MeanEntropy, WeightEntropy: pb.GetWeightEntropy(),
		RewardMean: mean, RewardStd: std, Accuracy: accuracy(sc), Tau: pb.GetController().GetTau(),
		Beta: pb.GetController().GetBeta(), GradNorm: st.GradNorm, Tokens: int64(st.Tokens), Metrics: m,
	}, nil
}

// staleness is the range of version lags of a batch's samples.
type staleness struct{ min, max int64 }

// stalenessOf returns how many versions each sample is behind the learner.
func stalenessOf(ro *messages.Rollouts, version int64) staleness {
	s := staleness{min: math.MaxInt64}
	for _, r := range ro.GetRollouts() {
		lag := version - r.GetPolicyVersion()
		s.min, s.max = min(s.min, lag), max(s.max, lag)
	}
	if s.min == math.MaxInt64 {
		s.min = 0
	}
	return s
}

func refRows(rs *messages.RefScored) [][]float32 {
	out := make([][]float32, len(rs.GetRef()))
	for i, r := range rs.GetRef() {
		out[i] = r.GetLogp()
	}
	return out
}

func behaviourRows(ro *messages.Rollouts) [][]float32 {
	out := make([][]float32, len(ro.GetRollouts()))
	for i, r := range ro.GetRollouts() {
		out[i] = r.GetLogp()
	}
	return out
}

// padTokens lays per-sequence rows out as [N·width], zero past each row.
func padTokens(rows [][]float32, width int) []float64 {
	out := make([]float64, len(rows)*width)
	for i, row := range rows {
		for t, v := range row {
			out[i*width+t] = float64(v)
		}
	}
	return out
}

// learnerReply is the learner actor's answer in process: the report and
// the new weights as an immutable snapshot (across a network the weights
// go as PolicyWeights chunks instead).
type learnerReply struct {
	report *messages.StepReport
	policy *gpu.Model
}

// saveRequest asks the learner actor to run save with its learner; the
// reply is the error (nil on success).
type saveRequest struct {
	save func(l *gpu.Learner) error
}

// learnerActor owns the gpu.Learner: PreparedBatch in, learnerReply out.
type learnerActor struct {
	learner  *gpu.Learner
	settings learnSettings
}

// newLearnerProps returns the props of the learner actor.
func newLearnerProps(l *gpu.Learner, s learnSettings) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &learnerActor{learner: l, settings: s} })
}

// Receive implements actor.Actor.
func (a *learnerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.PreparedBatch:
		report, err := learn(a.learner, a.settings, m)
		if err != nil {
			c.Respond(notice(m.GetMeta(), "learner", skip(messages.Stage_LEARN, err)))
			return
		}
		c.Respond(&learnerReply{report: report, policy: a.learner.Snapshot()})
	case *saveRequest:
		c.Respond(&saveResult{err: m.save(a.learner)})
	}
}

// saveResult carries the outcome of a saveRequest.
type saveResult struct{ err error }
