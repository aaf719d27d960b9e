package runlog

import "errors"

// Sentinel errors. Every error returned by this package that is not a plain
// file-system error wraps one of them.
var (
	// ErrRunExists reports that Create found a non-empty run directory
	// (resume it with Open instead).
	ErrRunExists = errors.New("runlog: run directory already exists and is not empty")
	// ErrInUse reports a run directory that a running process has open.
	ErrInUse = errors.New("runlog: run directory is in use by a running process")
	// ErrNotRun reports that Open was given a path that is not a run directory.
	ErrNotRun = errors.New("runlog: not a run directory")
	// ErrBadName reports an empty run name or one that is not a single path element.
	ErrBadName = errors.New("runlog: invalid run name")
	// ErrNoCheckpoint reports that no complete checkpoint was found.
	ErrNoCheckpoint = errors.New("runlog: no complete checkpoint")
	// ErrBadCheckpoint reports an unreadable or incompatible checkpoint.
	ErrBadCheckpoint = errors.New("runlog: invalid checkpoint")
	// ErrDamaged reports a checkpoint file that is missing or does not
	// match the SHA-256 its manifest records.
	ErrDamaged = errors.New("runlog: checkpoint damaged")
	// ErrBadTable reports a sample table whose rows do not match its columns.
	ErrBadTable = errors.New("runlog: invalid sample table")
	// ErrBadMetrics reports an unreadable metrics.jsonl line.
	ErrBadMetrics = errors.New("runlog: invalid metrics line")
	// ErrClosed reports a write to a closed Dir.
	ErrClosed = errors.New("runlog: run directory is closed")
)
