package actors

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/messages"
	"github.com/mgrpo/mgrpo/rewards"
)

// Sentinel errors of the stages; a stage error wrapping one of them skips
// the batch with the matching messages.SkipReason.
var (
	// ErrNoCompletions: generation left no usable group.
	ErrNoCompletions = errors.New("actors: no usable completions")
	// ErrNonFiniteReward: a reward is ±Inf, or a completion has no finite reward.
	ErrNonFiniteReward = errors.New("actors: non-finite reward")
	// ErrZeroVariance: dynamic sampling found no group with distinct utilities.
	ErrZeroVariance = errors.New("actors: every group has equal utilities")
	// ErrTimeout: a stage did not answer within its retries.
	ErrTimeout = errors.New("actors: stage timed out")
	// ErrActorFailed: the actor a part was sent to is gone (stopped after
	// repeated failures, or its node died), on every try.
	ErrActorFailed = errors.New("actors: stage actor gone")
	// ErrNoAnswer: the learner or the controller did not answer in time.
	// Unlike other stages they change state on every request and the
	// request may still run, so this is not a skip: the run stops, and a
	// resume continues from the last checkpoint.
	ErrNoAnswer = errors.New("actors: learner or controller did not answer")
)

// SkipError is a batch skipped at a stage, as the original's _SkipBatch:
// the step records it and the run goes on.
type SkipError struct {
	Stage  messages.Stage
	Reason messages.SkipReason
	Err    error
	// Waited is how long the part that timed out waited for an answer
	// (Reason TIMEOUT): its stage's timeout, or with the part relayed
	// through later stages, theirs too; 0 when unknown.
	Waited time.Duration
}

// Error implements error.
func (e *SkipError) Error() string {
	return fmt.Sprintf("skip at %s (%s): %v", e.Stage, e.Reason, e.Err)
}

// Unwrap returns the cause.
func (e *SkipError) Unwrap() error { return e.Err }

// stateErr is skip for the stages with state (learn, control), except that
// ErrNoAnswer passes through to end the run.
func stateErr(stage messages.Stage, err error) error {
	if errors.Is(err, ErrNoAnswer) {
		return err
	}
	return skip(stage, err)
}

// skip wraps err as a SkipError at stage, classifying its reason.
func skip(stage messages.Stage, err error) *SkipError {
	var s *SkipError
	if errors.As(err, &s) {
		return s
	}
	return &SkipError{Stage: stage, Reason: reasonOf(err), Err: err}
}

// reasonOf maps a stage error to its skip reason.
func reasonOf(err error) messages.SkipReason {
	switch {
	case errors.Is(err, ErrNoCompletions):
		return messages.SkipReason_NO_COMPLETIONS
	case errors.Is(err, ErrNonFiniteReward), errors.Is(err, rewards.ErrNonFinite):
		return messages.SkipReason_NON_FINITE_REWARD
	case errors.Is(err, ErrZeroVariance):
		return messages.SkipReason_ZERO_VARIANCE
	case errors.Is(err, messages.ErrShape), errors.Is(err, rewards.ErrShape):
		return messages.SkipReason_SHAPE_MISMATCH
	case errors.Is(err, gpu.ErrNonFinite):
		return messages.SkipReason_NON_FINITE_LOSS
	case errors.Is(err, gpu.ErrBadUpdate):
		return messages.SkipReason_BAD_UPDATE
	case errors.Is(err, ErrTimeout):
		return messages.SkipReason_TIMEOUT
	case errors.Is(err, ErrActorFailed):
		return messages.SkipReason_ACTOR_FAILED
	}
	return messages.SkipReason_INTERNAL
}

// notice turns a skip into the message an actor answers with.
func notice(meta *messages.StepMeta, actorID string, s *SkipError) *messages.SkipNotice {
	return &messages.SkipNotice{Meta: messages.DeriveMeta(meta), Stage: s.Stage, Reason: s.Reason, Detail: s.Err.Error(), Actor: actorID}
}

// fromNotice turns a received notice back into a SkipError.
func fromNotice(n *messages.SkipNotice) *SkipError {
	return &SkipError{Stage: n.GetStage(), Reason: n.GetReason(), Err: fmt.Errorf("%s: %s", n.GetActor(), n.GetDetail())}
}

// maxSkipDetail is the longest error detail the final line repeats per
// kind of skip.
const maxSkipDetail = 160

// skipTally counts the steps a run skipped, by stage and reason, with the
// first error of each kind: the final line says what happened.
type skipTally struct {
	total int
	kinds []skipKind // in the order first seen
}

// skipKind is the skips of one stage and reason.
type skipKind struct {
	stage  messages.Stage
	reason messages.SkipReason
	n      int
	first  string // the first one's error
}

// add counts skip s.
func (t *skipTally) add(s *SkipError) {
	t.total++
	for i := range t.kinds {
		if k := &t.kinds[i]; k.stage == s.Stage && k.reason == s.Reason {
			k.n++
			return
		}
	}
	t.kinds = append(t.kinds, skipKind{stage: s.Stage, reason: s.Reason, n: 1, first: fmt.Sprint(s.Err)})
}

// String is the tally for the final line: "3 skipped (2 at LEARN,
// INTERNAL: the first's error; 1 at GENERATE, TIMEOUT: ...)", or "" for
// none.
func (t skipTally) String() string {
	if t.total == 0 {
		return ""
	}
	parts := make([]string, len(t.kinds))
	for i, k := range t.kinds {
		parts[i] = fmt.Sprintf("%d at %s, %s: %s", k.n, k.stage, k.reason, clipTo(k.first, maxSkipDetail))
	}
	return fmt.Sprintf("%d skipped (%s)", t.total, strings.Join(parts, "; "))
}
