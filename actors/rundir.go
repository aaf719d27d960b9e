package actors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// runName is the run's name: output.name, the resumed run's directory, or
// task-preset-objective-time.
func runName(cfg *config.Config) string {
	switch {
	case cfg.Train.Resume != "":
		return filepath.Base(filepath.Clean(cfg.Train.Resume))
	case cfg.Output.Name != "":
		return cfg.Output.Name
	}
	return fmt.Sprintf("%s-%s-%s-%s", cfg.Task.Name, cfg.Model.Preset, cfg.MaxEnt.Objective, time.Now().UTC().Format("20060102-150405"))
}

// openRun creates the run directory, or opens the one to resume and
// returns its latest complete checkpoint ("" when starting fresh); with
// output.tensorboard its metrics lines are TensorBoard events too. A
// generated name already taken (two runs in one second) gets a -2, -3, …
// suffix; a name the user chose is never reused. For a directory it
// created, discard undoes the creation (see createRun); it is nil for a
// resumed run.
func openRun(cfg *config.Config, name string) (dir *runlog.Dir, ckpt string, discard func() error, err error) {
	if cfg.Train.Resume != "" {
		dir, ckpt, err := resumeRun(cfg.Train.Resume)
		if err == nil && cfg.Output.TensorBoard {
			dir.WriteTensorBoard()
		}
		return dir, ckpt, nil, err
	}
	dir, discard, err = createRun(cfg.Output.Dir, name)
	for n := 2; errors.Is(err, runlog.ErrRunExists) && cfg.Output.Name == "" && n <= 100; n++ {
		dir, discard, err = createRun(cfg.Output.Dir, fmt.Sprintf("%s-%d", name, n))
	}
	if err != nil {
		return nil, "", nil, err
	}
	if text, err := cfg.YAML(); err == nil {
		if err := dir.WriteConfig(text); err != nil {
			dir.Close()
			discard()
			return nil, "", nil, err
		}
	}
	if cfg.Output.TensorBoard {
		dir.WriteTensorBoard()
	}
	return dir, "", discard, nil
}

// resumeRun opens the run directory path and prepares it to continue
// from its latest complete checkpoint.
func resumeRun(path string) (*runlog.Dir, string, error) {
	dir, err := runlog.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("resume: %w", err)
	}
	ckpt, st, err := dir.LatestCheckpoint()
	if err != nil {
		dir.Close()
		return nil, "", fmt.Errorf("resume %s: %w", path, err)
	}
	if err := dir.Resume(st.Step); err != nil {
		dir.Close()
		return nil, "", fmt.Errorf("resume %s: %w", path, err)
	}
	return dir, ckpt, nil
}

// createRun creates the run directory root/name and returns with it the
// function that undoes that: it removes the directory, or, when an empty
// directory of that name existed before, only what the run put in it.
func createRun(root, name string) (*runlog.Dir, func() error, error) {
	path := filepath.Join(root, name)
	dir, err := runlog.Create(root, name)
	if err != nil {
		return nil, nil, err
	}
	discard := func() error {
		if dir.Created() {
			return os.RemoveAll(path)
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	return dir, discard, nil
}
