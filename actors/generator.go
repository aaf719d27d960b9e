package actors

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mgrpo/mgrpo/actors/meter"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/messages"
)

// Sampler is the policy a generator draws from: a *gpu.Model, or a test
// double. It must be immutable and safe for concurrent use.
type Sampler interface {
	// Sample draws n completions per prompt, group-major (gpu.Model.Sample).
	Sample(prompts [][]int, n int, opt gpu.SampleOptions) ([]gpu.Sample, error)
	// Version is the policy version of the weights.
	Version() int64
}

var _ Sampler = (*gpu.Model)(nil)

// generateSettings is what a generator reads besides the prompts.
type generateSettings struct {
	sample    gpu.SampleOptions   // Seeds are set per batch, EOS is the tokenizer's
	tokenizer tokenizer.Tokenizer // decodes the completions' text
	model     gpu.Config          // the dimensions of the weights it is sent
}

// generate samples K completions of every prompt of pb with policy p,
// completion k of a prompt from the stream (prompt seed, k), and returns
// them grouped by prompt, each tagged with the policy version and the
// generator id.
func generate(p Sampler, s generateSettings, id string, pb *messages.PromptBatch) (*messages.Rollouts, error) {
	opt, tok := s.sample, s.tokenizer
	k := int(pb.GetNumGenerations())
	prompts := make([][]int, len(pb.GetPrompts()))
	opt.Seeds = make([]uint64, len(prompts))
	for i, pr := range pb.GetPrompts() {
		prompts[i], opt.Seeds[i] = ints(pr.GetTokenIds()), pr.GetSeed()
	}
	samples, err := p.Sample(prompts, k, opt)
	if err != nil {
		return nil, fmt.Errorf("generate step %d: %w", pb.GetMeta().GetStep(), err)
	}
	if len(samples) != len(prompts)*k {
		return nil, fmt.Errorf("generate step %d: %d samples for %d prompts × %d: %w", pb.GetMeta().GetStep(), len(samples), len(prompts), k, messages.ErrShape)
	}
	meta := messages.DeriveMeta(pb.GetMeta())
	meta.PolicyVersion = p.Version()
	ro := &messages.Rollouts{Meta: meta, Prompts: pb.GetPrompts(), NumGenerations: int32(k), Rollouts: make([]*messages.Rollout, len(samples))}
	for i, s := range samples {
		ro.Rollouts[i] = &messages.Rollout{
			PromptIndex:   int32(i / k),
			TokenIds:      int32s(s.Tokens),
			Logp:          messages.Float32s(s.LogProbs),
			Entropy:       messages.Float32s(s.Entropies),
			FinishReason:  finishReason(s.Finish),
			PolicyVersion: p.Version(),
			GeneratorId:   id,
			Text:          completionText(tok, s.Tokens),
		}
	}
	return ro, nil
}

// completionText decodes completion tokens, cut at the first EOS.
func completionText(tok tokenizer.Tokenizer, ids []int) string {
	for i, id := range ids {
		if id == tok.EOS() {
			return tok.Decode(ids[:i])
		}
	}
	return tok.Decode(ids)
}

func finishReason(f gpu.FinishReason) messages.FinishReason {
	switch f {
	case gpu.FinishStop:
		return messages.FinishReason_STOP
	case gpu.FinishLength:
		return messages.FinishReason_LENGTH
	}
	return messages.FinishReason_FINISH_UNSPECIFIED
}

func ints(x []int32) []int {
	out := make([]int, len(x))
	for i, v := range x {
		out[i] = int(v)
	}
	return out
}

func int32s(x []int) []int32 {
	out := make([]int32, len(x))
	for i, v := range x {
		out[i] = int32(v)
	}
	return out
}

// policySlot holds the policy one generator slot samples from. It outlives
// the generator actor's restarts (the supervisor makes a new actor with the
// same slot), so a restarted generator keeps the newest weights.
type policySlot struct {
	policy atomic.Pointer[samplerBox]
}

type samplerBox struct{ s Sampler }

// newPolicySlot returns a slot holding s (nil: none yet).
func newPolicySlot(s Sampler) *policySlot {
	slot := &policySlot{}
	slot.policy.Store(&samplerBox{s})
	return slot
}

func (s *policySlot) get() Sampler  { return s.policy.Load().s }
func (s *policySlot) set(p Sampler) { s.policy.Store(&samplerBox{p}) }

// generatorActor answers PromptBatch with Rollouts (or a SkipNotice),
// hands the Rollouts of a Chain on to its reward evaluator, and takes new
// weights as a policySnapshot (in process) or PolicyWeights
// chunks (across a network).
type generatorActor struct {
	id       string
	settings generateSettings
	tel      telemetry
	slot     *policySlot
	weights  weightReceiver
}

// newGeneratorProps returns the props of generator id sampling from slot;
// weights sent as chunks, or offered and fetched with blobs, become models
// on dev.
func newGeneratorProps(id string, s generateSettings, dev gpu.Device, blobs blobFetcher, tel telemetry, slot *policySlot) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &generatorActor{id: id, settings: s, tel: tel, slot: slot, weights: weightReceiver{cfg: s.model, device: dev, blobs: blobs, channel: weightsChannel, meter: tel.meter}}
	})
}

// Receive implements actor.Actor.
func (a *generatorActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Stopping, *actor.Restarting:
		a.weights.stop()
	case *policySnapshot:
		a.slot.set(m.model)
	case *messages.PolicyWeights:
		a.weights.receive(c, a.id, m, a.install)
	case *messages.WeightsOffer:
		a.take(c, m)
	case *messages.PromptBatch:
		ro, err := a.generate(m)
		respond(c, a.tel.meter, m.GetMeta(), a.id, messages.Stage_GENERATE, ro, err)
	case *messages.Chain:
		a.chain(c, m)
	}
}

// take takes the version m offers into use (weightReceiver.pull), in a
// span of the publication's trace when the offer carries one (a version
// handed to a generator that joins carries none: no trace of its own).
func (a *generatorActor) take(c actor.Context, m *messages.WeightsOffer) {
	if len(m.GetMeta().GetTrace()) == 0 {
		a.weights.pull(c, a.id, m, a.install)
		return
	}
	_, span := a.tel.actorSpan(m.GetMeta(), spanWeights, a.id, attrVersion.Int64(m.GetVersion()))
	ahead, err := a.weights.pull(c, a.id, m, a.install)
	span.SetAttributes(attrAhead.Bool(ahead))
	endSpan(span, err)
}

// install samples with model from now on. nil (an offered version that
// could not be fetched) leaves the actor without weights: the parts asked
// for after it are skipped (errNoWeights) until the learner's chunks come
// instead, never sampled with older weights.
func (a *generatorActor) install(model *gpu.Model) {
	if model == nil {
		a.slot.set(nil) // a nil Sampler, not a nil *gpu.Model
		return
	}
	a.slot.set(model)
}

// generate samples pb in the actor's span and counts its tokens.
func (a *generatorActor) generate(pb *messages.PromptBatch) (*messages.Rollouts, error) {
	_, span := a.tel.actorSpan(pb.GetMeta(), spanGenerate+".part", a.id, attrPrompts.Int(len(pb.GetPrompts())))
	start := time.Now()
	p := a.slot.get()
	var ro *messages.Rollouts
	err := errNoWeights
	if p != nil {
		ro, err = generate(p, a.settings, a.id, pb)
	}
	if err == nil {
		tokens := 0
		for _, r := range ro.GetRollouts() {
			tokens += len(r.GetTokenIds())
		}
		took := time.Since(start).Seconds()
		span.SetAttributes(attrSamples.Int(len(ro.GetRollouts())), attrTokens.Int(tokens),
			attrTokensPS.Float64(float64(tokens)/took), attrVersion.Int64(ro.GetMeta().GetPolicyVersion()))
		a.tel.meter.Generated(a.id, tokens, took)
	}
	endSpan(span, err)
	return ro, err
}

// chain generates m's prompts and hands the Rollouts, as a Relay from the
// chain's sender, to the reward evaluator it names; rollouts with a group
// left incomplete (which its step re-samples before any reward) and
// failures answer the chain.
func (a *generatorActor) chain(c actor.Context, m *messages.Chain) {
	ro, err := a.generate(m.GetPrompts())
	if err != nil || len(incompleteGroups(ro)) > 0 {
		respond(c, a.tel.meter, m.GetMeta(), a.id, messages.Stage_GENERATE, ro, err)
		return
	}
	a.tel.meter.Part("generate", false)
	c.RequestWithCustomSender(actor.NewPID(m.GetAddress(), m.GetReward()),
		&messages.Relay{Meta: ro.GetMeta(), Rollouts: ro, Next: m.GetReference()}, c.Sender())
}

// respond answers the request with msg, or with a SkipNotice for err,
// and counts the part in the node's metrics (nil: off).
func respond(c actor.Context, m *meter.Instruments, meta *messages.StepMeta, id string, stage messages.Stage, msg any, err error) {
	respondTo(c, c.Sender(), m, meta, id, stage, msg, err)
}

// respondTo is respond to a request of sender's, which may be one held
// for later.
func respondTo(c actor.Context, sender *actor.PID, m *meter.Instruments, meta *messages.StepMeta, id string, stage messages.Stage, msg any, err error) {
	m.Part(strings.ToLower(stage.String()), err != nil)
	if err != nil {
		msg = notice(meta, id, skip(stage, err))
	}
	if sender == nil {
		c.Respond(msg) // to the dead letters, as an answer to no one goes
		return
	}
	c.Send(sender, msg)
}
