package runlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// Names of the files runlog itself writes into a checkpoint.
const (
	TrainerStateFile = "trainer_state.json"
	CompleteFile     = "COMPLETE"
)

// TrainerStateVersion is the format version written into trainer_state.json.
// LoadTrainerState refuses other versions.
const TrainerStateVersion = 1

// TrainerState is what the trainer needs, besides model, optimiser and
// controller files, to continue a run exactly: trainer_state.json.
type TrainerState struct {
	// FormatVersion is TrainerStateVersion; SaveCheckpoint sets it.
	FormatVersion int `json:"format_version"`
	// Run is the run's name; Dir.SaveCheckpoint fills it when empty.
	Run string `json:"run"`
	// Step is the number of completed optimiser steps.
	Step int `json:"step"`
	// PolicyVersion is the version of the policy weights saved.
	PolicyVersion int64 `json:"policy_version"`
	// Seed is the run's base seed.
	Seed uint64 `json:"seed"`
	// Tokens is the number of completion tokens trained on so far
	// (train/num_tokens); 0 in checkpoints written before it was kept.
	Tokens float64 `json:"num_tokens,omitempty"`
	// GreedyAccuracy is the greedy accuracy measured at this step, when
	// one was (eval/greedy_accuracy); Prune keeps the checkpoint with the
	// highest.
	GreedyAccuracy *float64 `json:"eval_greedy_accuracy,omitempty"`
}

// Part is one piece of a checkpoint written by its owner: Write receives
// the (temporary) checkpoint directory and creates its files in it. Name
// identifies the part in errors and must be unique within a checkpoint.
// Write need not fsync; SaveCheckpoint syncs every file before the rename.
type Part struct {
	Name  string
	Write func(dir string) error
}

// FilePart is a Part writing the single file name through write, which gets
// the file's full path.
func FilePart(name string, write func(path string) error) Part {
	return Part{Name: name, Write: func(dir string) error { return write(filepath.Join(dir, name)) }}
}

// CheckpointName is the directory name of the checkpoint of step: "step-N".
func CheckpointName(step int) string { return "step-" + strconv.Itoa(step) }

// SaveCheckpoint writes a checkpoint of st.Step into the run's checkpoints
// directory (see the package function SaveCheckpoint), naming the run in st
// when st.Run is empty, and then rewrites report.html, so the report is
// current at every checkpoint. metrics.jsonl is fsynced first: a
// checkpoint never covers metrics lines a crash can still lose.
func (d *Dir) SaveCheckpoint(st TrainerState, keep int, parts ...Part) (string, error) {
	if st.Run == "" {
		st.Run = d.Name()
	}
	if err := d.syncMetrics(); err != nil {
		return "", fmt.Errorf("save checkpoint %s: %w", CheckpointName(st.Step), err)
	}
	path, err := SaveCheckpoint(d.CheckpointsPath(), st, keep, parts...)
	if err != nil {
		return path, err
	}
	if err := d.WriteReport(); err != nil {
		return path, fmt.Errorf("save checkpoint %s: %w", CheckpointName(st.Step), err)
	}
	return path, nil
}

// SaveCheckpoint writes checkpoints/step-N (N = st.Step) atomically and
// returns its path. The parts and then trainer_state.json are written into
// checkpoints/.tmp-step-N and sealed (Seal: every file fsynced, then
// MANIFEST.sha256 with each file's SHA-256, then the COMPLETE marker),
// the directory is renamed to step-N, and the parent is fsynced. An
// existing step-N is replaced. Afterwards Prune keeps the newest keep
// complete checkpoints and the best by greedy accuracy (keep = 0 keeps
// all).
// Only one goroutine or process may save into a checkpoints directory.
func SaveCheckpoint(checkpointsDir string, st TrainerState, keep int, parts ...Part) (string, error) {
	name := CheckpointName(st.Step)
	if err := checkParts(parts); err != nil {
		return "", fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	if st.Step < 0 || keep < 0 {
		return "", fmt.Errorf("save checkpoint %s: step %d, keep %d: %w", name, st.Step, keep, ErrBadCheckpoint)
	}
	st.FormatVersion = TrainerStateVersion
	if err := os.MkdirAll(checkpointsDir, 0o755); err != nil {
		return "", fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	tmp := filepath.Join(checkpointsDir, ".tmp-"+name)
	if err := os.RemoveAll(tmp); err != nil { // left by a crash
		return "", fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	if err := assemble(tmp, st, parts); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	final := filepath.Join(checkpointsDir, name)
	if err := replaceDir(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	if err := atomicfile.SyncDir(checkpointsDir); err != nil {
		return "", fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	if err := Prune(checkpointsDir, keep); err != nil {
		return final, fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	return final, nil
}

// checkParts refuses unnamed, nil, duplicate or reserved parts.
func checkParts(parts []Part) error {
	seen := make(map[string]bool, len(parts))
	for _, p := range parts {
		switch {
		case p.Name == "" || p.Write == nil:
			return fmt.Errorf("part %q without name or writer: %w", p.Name, ErrBadCheckpoint)
		case p.Name == TrainerStateFile || p.Name == CompleteFile || p.Name == ManifestFile:
			return fmt.Errorf("part name %q is reserved: %w", p.Name, ErrBadCheckpoint)
		case seen[p.Name]:
			return fmt.Errorf("duplicate part %q: %w", p.Name, ErrBadCheckpoint)
		}
		seen[p.Name] = true
	}
	return nil
}

// assemble writes the parts and trainer_state.json into tmp and seals it.
func assemble(tmp string, st TrainerState, parts []Part) error {
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	for _, p := range parts {
		if err := p.Write(tmp); err != nil {
			return fmt.Errorf("part %s: %w", p.Name, err)
		}
	}
	state, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode trainer state: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(tmp, TrainerStateFile), append(state, '\n')); err != nil {
		return err
	}
	return Seal(tmp)
}

// syncTree fsyncs every regular file and directory under root.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return atomicfile.SyncDir(path)
		}
		if e.Type().IsRegular() {
			return atomicfile.SyncFile(path)
		}
		return nil
	})
}

// replaceDir renames the directory tmp to final, moving an existing final
// out of the way first (rename cannot replace a non-empty directory).
func replaceDir(tmp, final string) error {
	if _, err := os.Stat(final); err == nil {
		old := filepath.Join(filepath.Dir(final), ".old-"+filepath.Base(final))
		if err := os.RemoveAll(old); err != nil {
			return err
		}
		if err := os.Rename(final, old); err != nil {
			return err
		}
		defer os.RemoveAll(old)
	}
	return os.Rename(tmp, final)
}

// CompleteSteps returns the steps of the complete checkpoints (step-N
// directories holding the COMPLETE marker) in checkpointsDir, ascending.
// A missing directory has none.
func CompleteSteps(checkpointsDir string) ([]int, error) {
	entries, err := os.ReadDir(checkpointsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints %s: %w", checkpointsDir, err)
	}
	var steps []int
	for _, e := range entries {
		step, ok := parseCheckpointName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(checkpointsDir, e.Name(), CompleteFile)); err == nil {
			steps = append(steps, step)
		}
	}
	sort.Ints(steps)
	return steps, nil
}

// parseCheckpointName returns N of "step-N".
func parseCheckpointName(name string) (int, bool) {
	num, ok := strings.CutPrefix(name, "step-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == num
}

// LatestComplete returns the path and step of the newest complete
// checkpoint in checkpointsDir, ignoring partial step-N directories and
// .tmp-* leftovers. It returns ErrNoCheckpoint when there is none.
func LatestComplete(checkpointsDir string) (string, int, error) {
	steps, err := CompleteSteps(checkpointsDir)
	if err != nil {
		return "", 0, err
	}
	if len(steps) == 0 {
		return "", 0, fmt.Errorf("%s: %w", checkpointsDir, ErrNoCheckpoint)
	}
	last := steps[len(steps)-1]
	return filepath.Join(checkpointsDir, CheckpointName(last)), last, nil
}

// Resolve turns what a user passes as a checkpoint or run into a complete,
// verified checkpoint directory: a checkpoint directory with its COMPLETE
// marker is returned as is; a run directory or a checkpoints directory
// gives its newest complete checkpoint. Otherwise it returns
// ErrNoCheckpoint; a checkpoint whose files do not match its manifest
// gives an error wrapping ErrDamaged that names the file.
func Resolve(path string) (string, error) {
	if _, err := os.Stat(filepath.Join(path, CompleteFile)); err == nil {
		return path, Verify(path)
	}
	if _, err := os.Stat(filepath.Join(path, TrainerStateFile)); err == nil {
		return "", fmt.Errorf("%s: no %s marker: %w", path, CompleteFile, ErrNoCheckpoint)
	}
	dir := path
	if st, err := os.Stat(filepath.Join(path, CheckpointsDir)); err == nil && st.IsDir() {
		dir = filepath.Join(path, CheckpointsDir)
	}
	p, _, err := LatestComplete(dir)
	if err != nil {
		return "", err
	}
	return p, Verify(p)
}

// LoadTrainerState reads and validates trainer_state.json of the
// checkpoint dir: step, policy_version, data_cursor and num_tokens must be
// ≥ 0, and step must be N when dir is named step-N.
func LoadTrainerState(dir string) (TrainerState, error) {
	path := filepath.Join(dir, TrainerStateFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return TrainerState{}, fmt.Errorf("load trainer state: %w", err)
	}
	var st TrainerState
	if err := json.Unmarshal(data, &st); err != nil {
		return TrainerState{}, fmt.Errorf("load trainer state %s: %v: %w", path, err, ErrBadCheckpoint)
	}
	if st.FormatVersion != TrainerStateVersion {
		return TrainerState{}, fmt.Errorf("load trainer state %s: format_version %d, want %d: %w",
			path, st.FormatVersion, TrainerStateVersion, ErrBadCheckpoint)
	}
	if err := st.check(filepath.Base(filepath.Clean(dir))); err != nil {
		return TrainerState{}, fmt.Errorf("load trainer state %s: %w", path, err)
	}
	return st, nil
}

// check reports the first field of a loaded trainer state that no
// checkpoint of the checkpoint directory named dirName can hold.
func (st TrainerState) check(dirName string) error {
	switch {
	case st.Step < 0:
		return fmt.Errorf("step = %d: must be ≥ 0: %w", st.Step, ErrBadCheckpoint)
	case st.PolicyVersion < 0:
		return fmt.Errorf("policy_version = %d: must be ≥ 0: %w", st.PolicyVersion, ErrBadCheckpoint)
	case !(st.Tokens >= 0):
		return fmt.Errorf("num_tokens = %g: must be ≥ 0: %w", st.Tokens, ErrBadCheckpoint)
	case st.GreedyAccuracy != nil && !(*st.GreedyAccuracy >= 0 && *st.GreedyAccuracy <= 1):
		return fmt.Errorf("eval_greedy_accuracy = %g: must be in [0, 1]: %w", *st.GreedyAccuracy, ErrBadCheckpoint)
	}
	if n, ok := parseCheckpointName(dirName); ok && n != st.Step {
		return fmt.Errorf("step = %d but the checkpoint directory is %s: %w", st.Step, dirName, ErrBadCheckpoint)
	}
	return nil
}

// Prune removes all but the newest keep complete checkpoints of
// checkpointsDir and the one with the highest greedy accuracy in its
// trainer state (the newest of those tied; keep = 0 keeps all), and the
// .tmp-* and .old-* leftovers of interrupted saves.
func Prune(checkpointsDir string, keep int) error {
	entries, err := os.ReadDir(checkpointsDir)
	if err != nil {
		return fmt.Errorf("prune %s: %w", checkpointsDir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-step-") || strings.HasPrefix(e.Name(), ".old-step-") {
			if err := os.RemoveAll(filepath.Join(checkpointsDir, e.Name())); err != nil {
				return fmt.Errorf("prune %s: %w", checkpointsDir, err)
			}
		}
	}
	steps, err := CompleteSteps(checkpointsDir)
	if err != nil || keep == 0 || len(steps) <= keep {
		return err
	}
	best := bestStep(checkpointsDir, steps)
	for _, s := range steps[:len(steps)-keep] {
		if s == best {
			continue
		}
		if err := os.RemoveAll(filepath.Join(checkpointsDir, CheckpointName(s))); err != nil {
			return fmt.Errorf("prune %s: %w", checkpointsDir, err)
		}
	}
	return atomicfile.SyncDir(checkpointsDir)
}

// bestStep returns the step of the checkpoint with the highest greedy
// accuracy recorded in its trainer state (the newest on ties), or -1 when
// none has one. Checkpoints whose state cannot be read do not compete.
func bestStep(checkpointsDir string, steps []int) int {
	best, acc := -1, math.Inf(-1)
	for _, s := range steps {
		st, err := LoadTrainerState(filepath.Join(checkpointsDir, CheckpointName(s)))
		if err != nil || st.GreedyAccuracy == nil {
			continue
		}
		if a := *st.GreedyAccuracy; a >= acc {
			best, acc = s, a
		}
	}
	return best
}

// LatestCheckpoint returns the run's newest complete checkpoint, verified
// against its manifest, and its trainer state, or an error wrapping
// ErrNoCheckpoint (none) or ErrDamaged (a file that does not match, named).
// Resuming a run is
//
//	ck, st, err := d.LatestCheckpoint()
//	_, err = d.Resume(st.Step) // drop metrics and samples written after it
func (d *Dir) LatestCheckpoint() (string, TrainerState, error) {
	path, _, err := LatestComplete(d.CheckpointsPath())
	if err != nil {
		return "", TrainerState{}, err
	}
	if err := Verify(path); err != nil {
		return "", TrainerState{}, err
	}
	st, err := LoadTrainerState(path)
	if err != nil {
		return "", TrainerState{}, err
	}
	return path, st, nil
}

// SavedConfig returns the configuration a resume of the run at runDir
// continues with and where it came from: the config.yaml of the run's
// newest complete checkpoint, checked against the checkpoint's manifest,
// which holds the configuration that checkpoint was trained with
// (train.steps extended included); for a checkpoint written before
// checkpoints held one, the run's own config.yaml. A run without a
// complete checkpoint gives an error wrapping ErrNoCheckpoint that says
// what to do instead.
func SavedConfig(runDir string) (data []byte, source string, err error) {
	ckpt, _, err := LatestComplete(filepath.Join(runDir, CheckpointsDir))
	if errors.Is(err, ErrNoCheckpoint) {
		hint := "the run stopped before its first checkpoint: start it again under a new name"
		if sealed(filepath.Join(runDir, ReferenceDir)) {
			hint = fmt.Sprintf("its warm start is saved: start a new run from it with --model.checkpoint %s",
				filepath.Join(runDir, ReferenceDir))
		}
		return nil, "", fmt.Errorf("no complete checkpoint to resume (%s): %w", hint, ErrNoCheckpoint)
	}
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(ckpt, ConfigFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		path = filepath.Join(runDir, ConfigFile)
	} else if err := verifyFile(ckpt, ConfigFile); err != nil {
		return nil, "", fmt.Errorf("%w (move that checkpoint away to resume from the one before it)", err)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	return data, "file " + path, nil
}
