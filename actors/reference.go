package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
)

// Scorer gives per-token log-probs of completions under a frozen model: a
// *gpu.Model, or a test double.
type Scorer interface {
	// Score scores the completions at the given temperature (gpu.Model.Score).
	Score(seqs []gpu.Sequence, temperature float64) ([]gpu.TokenScores, error)
}

var _ Scorer = (*gpu.Model)(nil)

// referenceSettings is what the reference stage reads.
type referenceSettings struct {
	temperature float64    // the sampling temperature (spec §1.9a)
	model       gpu.Config // the dimensions of the weights a worker node's scorer is sent
}

// referenceScore adds the reference model's per-token log-probs of every
// completion of sc, and their raw sums (spec §1.7; rewards.Prepare
// length-normalises them when configured).
func referenceScore(ref Scorer, s referenceSettings, sc *messages.Scored) (*messages.RefScored, error) {
	step := sc.GetMeta().GetStep()
	if err := messages.CheckScored(sc); err != nil {
		return nil, fmt.Errorf("reference step %d: %w", step, err)
	}
	seqs := sequences(sc.GetRollouts())
	scores, err := ref.Score(seqs, s.temperature)
	if err != nil {
		return nil, fmt.Errorf("reference step %d: %w", step, err)
	}
	if len(scores) != len(seqs) {
		return nil, fmt.Errorf("reference step %d: %d scores for %d sequences: %w", step, len(scores), len(seqs), messages.ErrShape)
	}
	rs := &messages.RefScored{Meta: messages.DeriveMeta(sc.GetMeta()), Scored: sc,
		Ref: make([]*messages.TokenLogprobs, len(seqs)), RefLogpSum: make([]float64, len(seqs))}
	for i, ts := range scores {
		sum := 0.0
		for _, v := range ts.LogProbs {
			sum += v
		}
		rs.Ref[i] = &messages.TokenLogprobs{Logp: messages.Float32s(ts.LogProbs)}
		rs.RefLogpSum[i] = sum
	}
	return rs, messages.CheckRefLogps(rs) // a non-finite log-prob is this scorer's skip, never an answer the learner must refuse
}

// sequences returns prompt + completion token ids of every rollout.
func sequences(ro *messages.Rollouts) []gpu.Sequence {
	seqs := make([]gpu.Sequence, len(ro.GetRollouts()))
	for i, r := range ro.GetRollouts() {
		seqs[i] = gpu.Sequence{Prompt: ints(ro.GetPrompts()[r.GetPromptIndex()].GetTokenIds()), Completion: ints(r.GetTokenIds())}
	}
	return seqs
}

// referenceActor answers Scored with RefScored (or a SkipNotice). On a
// worker node it starts without weights and receives the frozen reference
// as PolicyWeights chunks when it joins. The learner sends them before any
// work of its own, but a part relayed by the reward evaluator beside it
// comes by another way and may come first: such a part is held until the
// weights are complete (at most maxHeld parts; a part beyond is answered
// errNoWeights).
type referenceActor struct {
	id       string
	ref      Scorer
	settings referenceSettings
	weights  weightReceiver
	tel      telemetry
	held     []heldPart // parts that came before the weights, oldest first
}

// maxHeld bounds the parts a reference scorer holds for its weights: a
// step's parts, many times over.
const maxHeld = 64

// heldPart is a Scored that came before the reference weights, and who
// asked for its answer.
type heldPart struct {
	scored *messages.Scored
	sender *actor.PID
}

// newReferenceProps returns the props of reference scorer id scoring with
// ref (nil: weights to come as chunks, or offered and fetched with blobs,
// which become a model on dev).
func newReferenceProps(id string, s referenceSettings, dev gpu.Device, blobs blobFetcher, tel telemetry, ref Scorer) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &referenceActor{id: id, ref: ref, settings: s, weights: weightReceiver{cfg: s.model, device: dev, blobs: blobs, meter: tel.meter}, tel: tel}
	})
}

// Receive implements actor.Actor.
func (a *referenceActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.PolicyWeights:
		a.weights.receive(c, a.id, m, func(model *gpu.Model) { a.take(c, model) })
	case *messages.WeightsOffer:
		a.weights.pull(c, a.id, m, func(model *gpu.Model) { a.take(c, model) })
	case *messages.Scored:
		if a.ref == nil && len(a.held) < maxHeld {
			a.held = append(a.held, heldPart{scored: m, sender: c.Sender()})
			return
		}
		a.score(c, m, c.Sender())
	}
}

// take scores with model from now on, and answers the parts held for it
// (nil: no weights yet).
func (a *referenceActor) take(c actor.Context, model *gpu.Model) {
	if model == nil {
		return
	}
	a.ref = model
	for _, h := range a.held {
		a.score(c, h.scored, h.sender)
	}
	a.held = nil
}

// score answers m to sender: its RefScored, or why not.
func (a *referenceActor) score(c actor.Context, m *messages.Scored, sender *actor.PID) {
	_, span := a.tel.actorSpan(m.GetMeta(), spanReference+".part", a.id, attrSamples.Int(len(m.GetRollouts().GetRollouts())))
	var rs *messages.RefScored
	err := errNoWeights
	if a.ref != nil {
		rs, err = referenceScore(a.ref, a.settings, m)
	}
	endSpan(span, err)
	respondTo(c, sender, a.tel.meter, m.GetMeta(), a.id, messages.Stage_REFERENCE, rs, err)
}
