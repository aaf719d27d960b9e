package messages

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestCheckGenerated: rollouts that answer their prompt batch pass; each
// malformation is an error naming it.
func TestCheckGenerated(t *testing.T) {
	sent := &PromptBatch{Meta: meta(), Prompts: rollouts().Prompts, NumGenerations: 2}
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for _, tc := range []struct {
		name   string
		change func(ro *Rollouts)
		err    error  // nil: passes
		detail string // in the error
	}{
		{"as sent", func(*Rollouts) {}, nil, ""},
		{"a token without a log-prob", func(ro *Rollouts) { ro.Rollouts[1].Logp = ro.Rollouts[1].Logp[:2] },
			ErrShape, "rollout 1 has 3 tokens and 2 log-probs"},
		{"a rollout missing", func(ro *Rollouts) { ro.Rollouts = ro.Rollouts[:1] }, ErrShape, "1 rollouts for 1 prompts × 2 generations"},
		{"another K", func(ro *Rollouts) { ro.NumGenerations, ro.Rollouts = 1, ro.Rollouts[:1] }, ErrShape, "1 groups of 1 for 1 prompts sent, 2 completions each"},
		{"a prompt left out", func(ro *Rollouts) { ro.Prompts, ro.Rollouts = nil, nil }, ErrShape, "0 groups of 2 for 1 prompts sent"},
		{"other prompt tokens", func(ro *Rollouts) { ro.Prompts[0].TokenIds = []int32{1, 4} }, ErrMismatch, "prompt 0 is not the prompt sent"},
		{"another gold answer", func(ro *Rollouts) { ro.Prompts[0].Answer = "47" }, ErrMismatch, "prompt 0 is not the prompt sent"},
		{"a NaN log-prob", func(ro *Rollouts) { ro.Rollouts[1].Logp[2] = nan }, ErrNonFinite, "rollout 1 log-prob 2 is NaN"},
		{"an infinite log-prob", func(ro *Rollouts) { ro.Rollouts[0].Logp[0] = inf }, ErrNonFinite, "rollout 0 log-prob 0 is -Inf"},
		{"a NaN entropy", func(ro *Rollouts) { ro.Rollouts[0].Entropy = []float32{0.1, nan, 0} }, ErrNonFinite, "rollout 0 entropy 1 is NaN"},
		{"an empty completion", func(ro *Rollouts) { ro.Rollouts[0].TokenIds, ro.Rollouts[0].Logp = nil, nil }, nil, ""},
	} {
		ro := rollouts()
		ro.Prompts = []*Prompt{proto.CloneOf(ro.Prompts[0])} // not sent's
		tc.change(ro)
		checkErr(t, tc.name, CheckGenerated(sent, ro), tc.err, tc.detail)
	}
}

// TestCheckRewards: rewards that are finite, or NaN beside a finite one,
// pass; ±Inf, a rollout with none but NaN, and a shape mismatch are
// errors naming them.
func TestCheckRewards(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rewards []float64 // [2 rollouts][2 rewards]
		err     error
		detail  string
	}{
		{"finite", []float64{1, 1, 0.1, 0}, nil, ""},
		{"no opinion beside a reward", []float64{math.NaN(), 1, 0, math.NaN()}, nil, ""},
		{"+Inf", []float64{1, 1, 0, math.Inf(1)}, ErrNonFinite, "rollout 1 reward 1 is +Inf"},
		{"-Inf", []float64{math.Inf(-1), 1, 0, 0}, ErrNonFinite, "rollout 0 reward 0 is -Inf"},
		{"no reward at all", []float64{1, 0, math.NaN(), math.NaN()}, ErrNonFinite, "rollout 1 has no reward that is not NaN"},
		{"a reward missing", []float64{1, 1, 0}, ErrShape, "scored fields disagree with 2 rollouts × 2 rewards"},
	} {
		sc := scored(t)
		sc.Rewards = tc.rewards
		checkErr(t, tc.name, CheckRewards(sc), tc.err, tc.detail)
	}
}

// TestCheckRefLogps: finite reference log-probs pass; a non-finite one or
// sum, and a row of the wrong length, are errors naming them.
func TestCheckRefLogps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(rs *RefScored)
		err    error
		detail string
	}{
		{"finite", func(*RefScored) {}, nil, ""},
		{"a NaN log-prob", func(rs *RefScored) { rs.Ref[1].Logp[0] = float32(math.NaN()) }, ErrNonFinite, "rollout 1 reference log-prob 0 is NaN"},
		{"an infinite sum", func(rs *RefScored) { rs.RefLogpSum[0] = math.Inf(-1) }, ErrNonFinite, "rollout 0 reference log-prob sum is -Inf"},
		{"a row too short", func(rs *RefScored) { rs.Ref[0].Logp = rs.Ref[0].Logp[:1] }, ErrShape, "rollout 0 has 3 tokens and 1 reference log-probs"},
		{"a sum missing", func(rs *RefScored) { rs.RefLogpSum = rs.RefLogpSum[:1] }, ErrShape, "2 reference rows and 1 sums for 2 rollouts"},
		{"bad rollouts inside", func(rs *RefScored) { rs.Scored.Rollouts.Rollouts[0].Logp = nil }, ErrShape, "rollout 0 has 3 tokens and 0 log-probs"},
	} {
		rs := refScored(t)
		tc.change(rs)
		checkErr(t, tc.name, CheckRefLogps(rs), tc.err, tc.detail)
	}
}

// TestSameRollouts: rollouts and scores carried on unchanged (the same
// message, or a copy of it, a NaN reward included) pass; changed ones are
// ErrMismatch.
func TestSameRollouts(t *testing.T) {
	sent := scored(t)
	sent.Rewards[1] = math.NaN() // no opinion: equal to itself here
	for _, tc := range []struct {
		name   string
		change func(sc *Scored)
		detail string // "": the same
	}{
		{"a copy", func(*Scored) {}, ""},
		{"a token changed", func(sc *Scored) { sc.Rollouts.Rollouts[1].TokenIds[0] = 3 }, "rollout 1 is not the rollout sent"},
		{"a log-prob changed", func(sc *Scored) { sc.Rollouts.Rollouts[0].Logp[2] = -2 }, "rollout 0 is not the rollout sent"},
		{"a rollout dropped", func(sc *Scored) { sc.Rollouts.Rollouts = sc.Rollouts.Rollouts[:1] }, "1 rollouts, 2 sent"},
		{"a gold answer changed", func(sc *Scored) { sc.Rollouts.Prompts[0].Answer = "1" }, "the prompts are not the prompts sent"},
		{"a reward changed", func(sc *Scored) { sc.Rewards[3] = 1 }, "the rewards are not the rewards sent"},
		{"a truncation flag changed", func(sc *Scored) { sc.Truncated[0] = true }, "the rewards are not the rewards sent"},
	} {
		s := proto.CloneOf(sent)
		tc.change(s)
		var want error
		if tc.detail != "" {
			want = ErrMismatch
		}
		checkErr(t, tc.name, SameScored(s, sent), want, tc.detail)
	}
	if err := SameScored(sent, sent); err != nil {
		t.Errorf("the same message: %v", err)
	}
}

// checkErr fails t unless err is nil when want is, and otherwise wraps
// want and holds detail.
func checkErr(t *testing.T, name string, err, want error, detail string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("%s: %v, want no error", name, err)
	case want != nil && !errors.Is(err, want):
		t.Errorf("%s: %v, want %v", name, err, want)
	case want != nil && !strings.Contains(err.Error(), detail):
		t.Errorf("%s: %q does not say %q", name, err, detail)
	}
}
