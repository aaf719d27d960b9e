package main

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// checkResumeSteps refuses a resume whose train.steps is below the step
// its newest complete checkpoint is at: the run cannot go back, and it
// would only say "done" (exit 0) with the run where it was. Nothing to
// resume is for the run to report; nil then, and for a new run.
func checkResumeSteps(cfg *config.Config) error {
	if cfg.Train.Resume == "" {
		return nil
	}
	ckpt, step, err := runlog.LatestComplete(filepath.Join(cfg.Train.Resume, runlog.CheckpointsDir))
	if err != nil || step <= cfg.Train.Steps {
		return nil
	}
	return &config.Error{Key: "train.steps", Value: strconv.Itoa(cfg.Train.Steps), Err: config.ErrConflict,
		Reason: fmt.Sprintf("the run is already at step %d (%s); nothing was run (more than %d extends it)", step, ckpt, step)}
}
