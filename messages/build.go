package messages

import (
	"errors"
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"
	protoreflect "google.golang.org/protobuf/reflect/protoreflect"
)

// Sentinel errors.
var (
	// ErrShape: the lengths of a message's fields disagree.
	ErrShape = errors.New("messages: shape mismatch")
	// ErrChunk: a PolicyWeights chunk does not fit the snapshot being assembled.
	ErrChunk = errors.New("messages: bad weight chunk")
	// ErrMutated: a message changed after it was sent.
	ErrMutated = errors.New("messages: message modified after send")
)

// NewMeta returns a header with an empty, non-nil trace map ready for a
// propagator: otel.GetTextMapPropagator().Inject(ctx,
// propagation.MapCarrier(meta.Trace)). Inject before sending, never after.
func NewMeta(runID string, step int64, batchID string, policyVersion int64) *StepMeta {
	return &StepMeta{RunId: runID, Step: step, BatchId: batchID, PolicyVersion: policyVersion, Trace: map[string]string{}}
}

// DeriveMeta copies a received header for a derived message. The trace map
// is a fresh copy, so the sender may inject its own span context without
// touching the message it received.
func DeriveMeta(parent *StepMeta) *StepMeta {
	m := &StepMeta{Trace: map[string]string{}}
	if parent == nil {
		return m
	}
	m.RunId, m.Step, m.BatchId, m.PolicyVersion = parent.GetRunId(), parent.GetStep(), parent.GetBatchId(), parent.GetPolicyVersion()
	maps.Copy(m.Trace, parent.GetTrace())
	return m
}

// Float32s converts to float32 (the wire type of per-token log-probs).
func Float32s(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// Group returns the K completions of prompt p (a sub-slice that shares
// the message's storage: read it, do not modify it).
func (x *Rollouts) Group(p int) []*Rollout {
	k := int(x.GetNumGenerations())
	return x.GetRollouts()[p*k : (p+1)*k]
}

// CheckRollouts verifies len(rollouts) = P·K, prompt indices match the
// grouping, and every rollout has one log-prob per token.
func CheckRollouts(x *Rollouts) error {
	p, k, n := len(x.GetPrompts()), int(x.GetNumGenerations()), len(x.GetRollouts())
	if k < 1 || n != p*k {
		return fmt.Errorf("%w: %d rollouts for %d prompts × %d generations", ErrShape, n, p, k)
	}
	for i, r := range x.GetRollouts() {
		if int(r.GetPromptIndex()) != i/k {
			return fmt.Errorf("%w: rollout %d has prompt index %d, want %d", ErrShape, i, r.GetPromptIndex(), i/k)
		}
		if len(r.GetTokenIds()) != len(r.GetLogp()) {
			return fmt.Errorf("%w: rollout %d has %d tokens and %d log-probs", ErrShape, i, len(r.GetTokenIds()), len(r.GetLogp()))
		}
	}
	return nil
}

// NewScored builds a Scored from Go values: rewards[i][r] is the raw value
// of reward r for rollout i. Truncation flags come from the finish reasons.
// The slices are copied.
func NewScored(meta *StepMeta, ro *Rollouts, names []string, weights []float64, rewards [][]float64) (*Scored, error) {
	if err := CheckRollouts(ro); err != nil {
		return nil, err
	}
	n, r := len(ro.GetRollouts()), len(names)
	if len(weights) != r || len(rewards) != n {
		return nil, fmt.Errorf("%w: scored: %d rollouts, %d rewards (%d weights), %d rows", ErrShape, n, r, len(weights), len(rewards))
	}
	flat := make([]float64, 0, n*r)
	truncated := make([]bool, n)
	for i, row := range rewards {
		if len(row) != r {
			return nil, fmt.Errorf("%w: rollout %d has %d reward values, want %d", ErrShape, i, len(row), r)
		}
		flat = append(flat, row...)
		truncated[i] = ro.GetRollouts()[i].GetFinishReason() == FinishReason_LENGTH
	}
	return &Scored{
		Meta:          meta,
		Rollouts:      ro,
		RewardNames:   append([]string(nil), names...),
		RewardWeights: append([]float64(nil), weights...),
		Rewards:       flat,
		Truncated:     truncated,
	}, nil
}

// RewardMatrix returns the raw rewards as [rollouts][rewards], freshly
// allocated.
func (x *Scored) RewardMatrix() [][]float64 {
	r := len(x.GetRewardNames())
	if r == 0 {
		return nil
	}
	flat := x.GetRewards()
	out := make([][]float64, len(flat)/r)
	for i := range out {
		out[i] = append([]float64(nil), flat[i*r:(i+1)*r]...)
	}
	return out
}

// CheckScored verifies that every per-rollout field has one entry per
// rollout and the reward matrix is [rollouts][rewards].
func CheckScored(x *Scored) error {
	if err := CheckRollouts(x.GetRollouts()); err != nil {
		return err
	}
	n, r := len(x.GetRollouts().GetRollouts()), len(x.GetRewardNames())
	if len(x.GetRewardWeights()) != r || len(x.GetRewards()) != n*r || len(x.GetTruncated()) != n {
		return fmt.Errorf("%w: scored fields disagree with %d rollouts × %d rewards", ErrShape, n, r)
	}
	return nil
}

// CheckRefScored verifies one reference log-prob per completion token.
func CheckRefScored(x *RefScored) error {
	if err := CheckScored(x.GetScored()); err != nil {
		return err
	}
	ro := x.GetScored().GetRollouts().GetRollouts()
	if len(x.GetRef()) != len(ro) || len(x.GetRefLogpSum()) != len(ro) {
		return fmt.Errorf("%w: %d reference rows and %d sums for %d rollouts", ErrShape, len(x.GetRef()), len(x.GetRefLogpSum()), len(ro))
	}
	for i, r := range x.GetRef() {
		if len(r.GetLogp()) != len(ro[i].GetTokenIds()) {
			return fmt.Errorf("%w: rollout %d has %d tokens and %d reference log-probs", ErrShape, i, len(ro[i].GetTokenIds()), len(r.GetLogp()))
		}
	}
	return nil
}

// WithMeta returns a shallow copy of m whose header is meta: every other
// field is shared with m, read-only, as received messages are. A sender
// uses it to give one message a header of its own per send (a trace
// context, say) without writing into a message that may have been sent.
// m must have a StepMeta meta field.
func WithMeta[M proto.Message](m M, meta *StepMeta) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	dst.Set(src.Descriptor().Fields().ByName("meta"), protoreflect.ValueOfMessage(meta.ProtoReflect()))
	return dst.Interface().(M)
}

// Header is a message with a StepMeta header: every step message.
type Header interface {
	proto.Message
	GetMeta() *StepMeta
}
