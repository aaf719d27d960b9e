package actors

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/gpu/loss"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
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
	topKKL      int     // metrics.top_k_kl: tokens with the largest K3 the report names
	vocab       int
	tokenizer   tokenizer.Tokenizer // written beside the weights in a checkpoint
}

// learn runs one optimiser step of l on pb with the configured objective
// and returns what the learner measured. Samples older than the learner's
// version (asynchronous mode) get the truncated importance correction on
// their behaviour log-probs (loss.Config.ISTruncation).
func learn(l *gpu.Learner, s learnSettings, pb *messages.PreparedBatch) (*messages.StepReport, error) {
	rs := pb.GetRefScored()
	ro := rs.GetScored().GetRollouts()
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
	var pm *messages.PolicyMetrics
	st, err := l.Step(batch, s.temperature, func(lp, ent []float64) (loss.Result, error) {
		pm = policyMetrics(s, lb, ro, lp, ent)
		switch s.objective {
		case rewards.ObjectiveMaxEntListwise:
			return loss.Listwise(cfg, lb, lp)
		case rewards.ObjectiveMaxEntEntropy:
			kl, err := loss.MeanK3(lb, lp)
			if err != nil {
				kl = math.NaN()
			}
			a := loss.ResolveAlpha(s.alphaCtl, s.alpha, kl)
			return loss.MaxEntEntropy(cfg, lb, lp, ent, a.Effective, s.vocab)
		}
		return loss.Policy(cfg, lb, lp)
	})
	if err != nil {
		return nil, fmt.Errorf("learn step %d: %w", step, err)
	}
	meta := messages.DeriveMeta(pb.GetMeta())
	meta.PolicyVersion = st.Version
	ls := st.LossStats
	return &messages.StepReport{
		Meta: meta, Loss: st.Loss, PolicyLoss: ls.PolicyLoss, Kl: ls.KL, WeightedKl: ls.KLLoss,
		Entropy: st.MeanEntropy, GradNorm: st.GradNorm, LearningRate: st.LR, Tokens: int64(st.Tokens),
		ClipLow: ls.ClipLow, ClipHigh: ls.ClipHigh, ClipRegion: ls.ClipRegion,
		IsWeightMean: ls.ISWeightMean, IsTruncatedFrac: ls.ISTruncatedFrac,
		StalenessMin: lag.min, StalenessMax: lag.max, ListwiseClipLoss: ls.ListwiseClipLoss,
		ForwardSeconds: st.Forward.Seconds(), BackwardSeconds: st.Backward.Seconds(), OptimizerSeconds: st.Optimizer.Seconds(),
		PolicyMetrics: pm,
	}, nil
}

// saveLearner writes l's policy (Hugging Face layout, with tok's
// tokenizer.json) and optimiser state into dir.
func saveLearner(l *gpu.Learner, tok tokenizer.Tokenizer, dir string) error {
	if err := gpu.SaveCheckpoint(dir, l.Snapshot(), tok); err != nil {
		return err
	}
	return l.SaveOptimizer(dir)
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

// learnerReply is the learner's answer in process: the report, the new
// weights as an immutable snapshot (across a network the weights go as
// PolicyWeights chunks instead) and how long making it took (a copy on
// the learner's device, GPU to GPU on cuda: part of the weight sync).
type learnerReply struct {
	report   *messages.StepReport
	policy   *gpu.Model
	snapshot time.Duration
}

// snapshot returns the learner's new weights for the generators and how
// long the copy took, traced as ctx's span's child learn.snapshot.
func snapshot(ctx context.Context, tr oteltrace.Tracer, l *gpu.Learner) (*gpu.Model, time.Duration) {
	start := time.Now()
	m := l.Snapshot()
	took := time.Since(start)
	childSpan(ctx, tr, spanLearn+".snapshot", start.Add(took), took)
	return m, took
}

// learnerActor owns the gpu.Learner, the trainable weights and the
// optimiser: PreparedBatch in, learnerReply out; CheckpointRequest in,
// CheckpointDone out. Nothing else reads or writes the learner.
type learnerActor struct {
	learner  *gpu.Learner
	settings learnSettings
	tel      telemetry
}

// newLearnerProps returns the props of the learner actor.
func newLearnerProps(l *gpu.Learner, s learnSettings, tel telemetry) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &learnerActor{learner: l, settings: s, tel: tel} })
}

// Receive implements actor.Actor.
func (a *learnerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.PreparedBatch:
		ctx, span := a.tel.actorSpan(m.GetMeta(), spanLearn, "learner")
		report, err := learn(a.learner, a.settings, m)
		if err != nil {
			endSpan(span, err)
			c.Respond(notice(m.GetMeta(), "learner", skip(messages.Stage_LEARN, err)))
			return
		}
		learnPhaseSpans(ctx, a.tel.tracer, report)
		policy, took := snapshot(ctx, a.tel.tracer, a.learner)
		endSpan(span, nil)
		c.Respond(&learnerReply{report: report, policy: policy, snapshot: took})
	case *messages.CheckpointRequest:
		c.Respond(checkpointDone(m.GetMeta(), saveLearner(a.learner, a.settings.tokenizer, m.GetDir())))
	}
}

// learnPhaseSpans records the learner's forward, backward and optimiser
// phases as children of ctx's span, back to back ending now.
func learnPhaseSpans(ctx context.Context, tr oteltrace.Tracer, r *messages.StepReport) {
	end := time.Now()
	for _, p := range []struct {
		name    string
		seconds float64
	}{{"optimizer", r.GetOptimizerSeconds()}, {"backward", r.GetBackwardSeconds()}, {"forward", r.GetForwardSeconds()}} {
		d := time.Duration(p.seconds * float64(time.Second))
		childSpan(ctx, tr, spanLearn+"."+p.name, end, d)
		end = end.Add(-d)
	}
}

// checkpointDone is the answer to a CheckpointRequest.
func checkpointDone(meta *messages.StepMeta, err error) *messages.CheckpointDone {
	done := &messages.CheckpointDone{Meta: messages.DeriveMeta(meta)}
	if err != nil {
		done.Error = err.Error()
	}
	return done
}
