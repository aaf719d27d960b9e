package rewards

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them, so
// callers can test with errors.Is and record a skip reason.
var (
	// ErrEmptyGroup reports a group size K < 1.
	ErrEmptyGroup = errors.New("rewards: group has no completions")
	// ErrEmptyBatch reports a batch with no completions at all.
	ErrEmptyBatch = errors.New("rewards: batch has no completions")
	// ErrShape reports slices whose lengths do not fit together.
	ErrShape = errors.New("rewards: shape mismatch")
	// ErrNonFinite reports a NaN or ±Inf where a finite value is required.
	ErrNonFinite = errors.New("rewards: non-finite value")
	// ErrParam reports an invalid setting (negative epsilon, tau <= 0, ...).
	ErrParam = errors.New("rewards: invalid parameter")
	// ErrState reports an unreadable or invalid controller state file.
	ErrState = errors.New("rewards: invalid controller state")
)
