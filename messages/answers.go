package messages

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
)

// The checks of an answer against the request it answers. A stage actor
// that works never answers so (it skips the part with a SkipNotice
// instead): an answer that fails one comes from a buggy or hostile node,
// or from failing hardware.
var (
	// ErrNonFinite: a value that must be finite is NaN or ±Inf.
	ErrNonFinite = errors.New("messages: non-finite value")
	// ErrMismatch: an answer holds other data than the request it
	// answers (other prompts, other completions, other rewards).
	ErrMismatch = errors.New("messages: answer does not match its request")
)

// CheckGenerated verifies that ro answers pb: the shape CheckRollouts
// checks, K completions of each prompt sent, each prompt the one sent,
// and finite log-probs and entropies.
func CheckGenerated(pb *PromptBatch, ro *Rollouts) error {
	if err := CheckRollouts(ro); err != nil {
		return err
	}
	sent, got := pb.GetPrompts(), ro.GetPrompts()
	if len(got) != len(sent) || ro.GetNumGenerations() != pb.GetNumGenerations() {
		return fmt.Errorf("%w: %d groups of %d for %d prompts sent, %d completions each", ErrShape,
			len(got), ro.GetNumGenerations(), len(sent), pb.GetNumGenerations())
	}
	for i, p := range got {
		if !proto.Equal(p, sent[i]) {
			return fmt.Errorf("%w: prompt %d is not the prompt sent", ErrMismatch, i)
		}
	}
	return checkRolloutValues(ro)
}

// checkRolloutValues rejects a log-prob or an entropy that is NaN or ±Inf.
func checkRolloutValues(ro *Rollouts) error {
	for i, r := range ro.GetRollouts() {
		if j := nonFinite32(r.GetLogp()); j >= 0 {
			return fmt.Errorf("%w: rollout %d log-prob %d is %v", ErrNonFinite, i, j, r.GetLogp()[j])
		}
		if j := nonFinite32(r.GetEntropy()); j >= 0 {
			return fmt.Errorf("%w: rollout %d entropy %d is %v", ErrNonFinite, i, j, r.GetEntropy()[j])
		}
	}
	return nil
}

// CheckRewards verifies sc's shape (CheckScored) and its rewards: none
// ±Inf, and each rollout with at least one that is not NaN (NaN alone is
// a reward function's "no opinion"; a reward evaluator skips a part with
// a rollout that has no reward at all).
func CheckRewards(sc *Scored) error {
	if err := CheckScored(sc); err != nil {
		return err
	}
	r := len(sc.GetRewardNames())
	if r == 0 {
		return nil
	}
	rewards := sc.GetRewards()
	for i := range len(rewards) / r {
		row := rewards[i*r : (i+1)*r]
		if j := slices.IndexFunc(row, func(v float64) bool { return math.IsInf(v, 0) }); j >= 0 {
			return fmt.Errorf("%w: rollout %d reward %d is %v", ErrNonFinite, i, j, row[j])
		}
		if !slices.ContainsFunc(row, func(v float64) bool { return !math.IsNaN(v) }) {
			return fmt.Errorf("%w: rollout %d has no reward that is not NaN", ErrNonFinite, i)
		}
	}
	return nil
}

// CheckRefLogps verifies rs's shape (CheckRefScored) and that its
// reference log-probs and their sums are finite.
func CheckRefLogps(rs *RefScored) error {
	if err := CheckRefScored(rs); err != nil {
		return err
	}
	for i, r := range rs.GetRef() {
		if j := nonFinite32(r.GetLogp()); j >= 0 {
			return fmt.Errorf("%w: rollout %d reference log-prob %d is %v", ErrNonFinite, i, j, r.GetLogp()[j])
		}
	}
	for i, v := range rs.GetRefLogpSum() {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: rollout %d reference log-prob sum is %v", ErrNonFinite, i, v)
		}
	}
	return nil
}

// SameRollouts reports where got, carried on in an answer, differs from
// sent, the rollouts of the request (nil: the same prompts and the same
// completions, token for token and log-prob for log-prob).
func SameRollouts(got, sent *Rollouts) error {
	if got == sent {
		return nil
	}
	if len(got.GetRollouts()) != len(sent.GetRollouts()) || got.GetNumGenerations() != sent.GetNumGenerations() {
		return fmt.Errorf("%w: %d rollouts, %d sent", ErrMismatch, len(got.GetRollouts()), len(sent.GetRollouts()))
	}
	if !slices.EqualFunc(got.GetPrompts(), sent.GetPrompts(), func(a, b *Prompt) bool { return proto.Equal(a, b) }) {
		return fmt.Errorf("%w: the prompts are not the prompts sent", ErrMismatch)
	}
	for i, r := range got.GetRollouts() {
		s := sent.GetRollouts()[i]
		if r.GetPromptIndex() != s.GetPromptIndex() || !slices.Equal(r.GetTokenIds(), s.GetTokenIds()) ||
			!sameBits32(r.GetLogp(), s.GetLogp()) {
			return fmt.Errorf("%w: rollout %d is not the rollout sent", ErrMismatch, i)
		}
	}
	return nil
}

// SameScored is SameRollouts for a Scored carried on in an answer: the
// same rollouts, reward names, weights, rewards and truncation flags.
func SameScored(got, sent *Scored) error {
	if got == sent {
		return nil
	}
	if err := SameRollouts(got.GetRollouts(), sent.GetRollouts()); err != nil {
		return err
	}
	if !slices.Equal(got.GetRewardNames(), sent.GetRewardNames()) || !sameBits64(got.GetRewardWeights(), sent.GetRewardWeights()) ||
		!sameBits64(got.GetRewards(), sent.GetRewards()) || !slices.Equal(got.GetTruncated(), sent.GetTruncated()) {
		return fmt.Errorf("%w: the rewards are not the rewards sent", ErrMismatch)
	}
	return nil
}

// nonFinite32 is the index of the first NaN or ±Inf of x, -1 for none.
func nonFinite32(x []float32) int {
	return slices.IndexFunc(x, func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) })
}

// sameBits32 reports whether a and b hold the same values, bit for bit
// (a NaN equal to itself).
func sameBits32(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// sameBits64 is sameBits32 for float64.
func sameBits64(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}
