package actors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/mgrpo/mgrpo/actors/runlog"
	"github.com/mgrpo/mgrpo/config"
)

// runName is the run's name: output.name, the resumed run's directory, or
// task-model-objective-time (the model: modelLabel).
func runName(cfg *config.Config) string {
	switch {
	case cfg.Train.Resume != "":
		return filepath.Base(filepath.Clean(cfg.Train.Resume))
	case cfg.Output.Name != "":
		return cfg.Output.Name
	}
	return fmt.Sprintf("%s-%s-%s-%s", cfg.Task.Name, modelLabel(cfg.Model), cfg.MaxEnt.Objective, time.Now().UTC().Format("20060102-150405"))
}

// modelLabel names the model in a generated run name: its preset, or for
// a model.checkpoint the checkpoint's directory name (SmolLM2-135M-Instruct),
// with a run's reference/ or checkpoints/step-N named by their run
// (NAME, NAME-step-N). Characters other than letters, digits, '.', '_'
// and '-' become '-'.
func modelLabel(m config.Model) string {
	if m.Checkpoint == "" {
		return m.Preset
	}
	dir := filepath.Clean(m.Checkpoint)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	label := filepath.Base(dir)
	switch parent := filepath.Dir(dir); {
	case label == runlog.ReferenceDir:
		label = filepath.Base(parent)
	case filepath.Base(parent) == runlog.CheckpointsDir:
		label = filepath.Base(filepath.Dir(parent)) + "-" + label
	}
	return strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-", r)) {
			return r
		}
		return '-'
	}, label)
}

// openRun creates the run directory, or opens the one to resume and
// returns its latest complete checkpoint ("" when starting fresh). A
// generated name already taken or in use (two runs started in one second)
// gets a -2, -3, … suffix; a name the user chose is never reused. For a
// directory it created, discard undoes the creation (see createRun); it is
// nil for a resumed run. A new run's config.yaml is text (the recorded
// configuration). What a resume does to the metrics goes to out.
func openRun(cfg *config.Config, name string, text []byte, out io.Writer) (dir *runlog.Dir, ckpt string, discard func() error, err error) {
	if cfg.Train.Resume != "" {
		dir, ckpt, err := resumeRun(cfg.Train.Resume, out)
		if err == nil && cfg.Output.TensorBoard {
			dir.WriteTensorBoard()
		}
		return dir, ckpt, nil, err
	}
	dir, discard, err = createRun(cfg.Output.Dir, name)
	taken := func(err error) bool { return errors.Is(err, runlog.ErrRunExists) || errors.Is(err, runlog.ErrInUse) }
	for n := 2; taken(err) && cfg.Output.Name == "" && n <= maxNameSuffix; n++ {
		dir, discard, err = createRun(cfg.Output.Dir, fmt.Sprintf("%s-%d", name, n))
	}
	if err != nil {
		return nil, "", nil, err
	}
	if err := dir.WriteConfig(text); err != nil {
		dir.Close()
		discard()
		return nil, "", nil, err
	}
	if cfg.Output.TensorBoard {
		dir.WriteTensorBoard()
	}
	return dir, "", discard, nil
}

// maxNameSuffix is the largest -N suffix a generated run name is given.
const maxNameSuffix = 1000

// resumeRun opens the run directory path and prepares it to continue
// from its latest complete checkpoint, verified against its manifest.
func resumeRun(path string, out io.Writer) (*runlog.Dir, string, error) {
	dir, err := runlog.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("resume: %w", err)
	}
	ckpt, st, err := dir.LatestCheckpoint()
	if errors.Is(err, runlog.ErrDamaged) {
		dir.Close()
		return nil, "", fmt.Errorf("resume %s: %w (move that checkpoint away to resume from the one before it)", path, err)
	}
	if err != nil {
		dir.Close()
		return nil, "", fmt.Errorf("resume %s: %w", path, err)
	}
	aside, err := dir.Resume(st.Step)
	if err != nil {
		dir.Close()
		return nil, "", fmt.Errorf("resume %s: %w", path, err)
	}
	if aside > 0 {
		fmt.Fprintf(out, "%s: %d unreadable or out-of-order lines moved to %s; every other line kept\n",
			dir.MetricsPath(), aside, runlog.MetricsAsideFile)
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

// finished returns the one line of a resume with nothing left to do: the
// run's newest complete checkpoint is of its last step (train.steps) and
// the final evaluation of that step is recorded (runlog.FinalEvalFile).
// ok is false for a new run, for a run with anything left to do, the
// final evaluation included (a run killed or interrupted during it runs
// it on resume), and for a run that cannot be read (the resume says why).
func finished(cfg *config.Config, s *settings) (line string, ok bool) {
	run := cfg.Train.Resume
	if run == "" {
		return "", false
	}
	_, step, err := runlog.LatestComplete(filepath.Join(run, runlog.CheckpointsDir))
	if err != nil || step != cfg.Train.Steps {
		return "", false
	}
	final, err := runlog.ReadFinalEval(run)
	if err != nil || final.Step != step {
		return "", false
	}
	result := "greedy accuracy not measured"
	if a := final.GreedyAccuracy; a != nil {
		result = fmt.Sprintf("greedy accuracy %.1f%% on %s", 100**a, heldOut(final.Problems, s.eval.prompts))
	}
	return fmt.Sprintf("already done at step %d of %d (%s): nothing was run; outputs in %s (a larger --train.steps extends it)",
		step, step, result, filepath.Clean(run)), true
}
