package runlog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// modelPart writes a stand-in for gpu's model files.
func modelPart(content string) Part {
	return Part{Name: "model", Write: func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte(content), 0o644)
	}}
}

func TestSaveCheckpointLayoutAndState(t *testing.T) {
	d, err := Create(t.TempDir(), "ck")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st := TrainerState{Step: 12, PolicyVersion: 12, Seed: 7, Tokens: 1234}
	ctrl := FilePart("controller_state.json", func(p string) error {
		return os.WriteFile(p, []byte(`{"tau":0.5,"beta":0}`), 0o644)
	})
	path, err := d.SaveCheckpoint(st, 0, modelPart("weights"), ctrl, bytesPart("optimizer.safetensors", []byte("adam")))
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(d.CheckpointsPath(), "step-12") {
		t.Errorf("path = %s", path)
	}
	for _, f := range []string{"model.safetensors", "controller_state.json", "optimizer.safetensors", TrainerStateFile, CompleteFile} {
		if _, err := os.Stat(filepath.Join(path, f)); err != nil {
			t.Errorf("checkpoint file: %v", err)
		}
	}
	got, err := LoadTrainerState(path)
	if err != nil {
		t.Fatal(err)
	}
	want := st
	want.FormatVersion, want.Run = TrainerStateVersion, "ck"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("trainer state = %+v, want %+v", got, want)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), ReportFile)); err != nil {
		t.Errorf("report not written with the checkpoint: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.CheckpointsPath(), ".tmp-step-12")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".tmp-step-12 left behind: %v", err)
	}
}

func TestLatestCompleteIgnoresPartial(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []int{5, 10} {
		if _, err := SaveCheckpoint(dir, TrainerState{Step: s}, 0, modelPart("m")); err != nil {
			t.Fatal(err)
		}
	}
	// A newer directory without the marker, a crashed temporary and an
	// unrelated name must all be ignored.
	os.MkdirAll(filepath.Join(dir, "step-20"), 0o755)
	os.WriteFile(filepath.Join(dir, "step-20", TrainerStateFile), []byte("{}"), 0o644)
	os.MkdirAll(filepath.Join(dir, ".tmp-step-30"), 0o755)
	os.WriteFile(filepath.Join(dir, ".tmp-step-30", CompleteFile), nil, 0o644)
	os.MkdirAll(filepath.Join(dir, "step-040"), 0o755)
	os.WriteFile(filepath.Join(dir, "step-040", CompleteFile), nil, 0o644)

	path, step, err := LatestComplete(dir)
	if err != nil || step != 10 || path != filepath.Join(dir, "step-10") {
		t.Errorf("LatestComplete = %s, %d, %v; want step-10, 10", path, step, err)
	}
	if _, _, err := LatestComplete(t.TempDir()); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("empty dir: err = %v, want ErrNoCheckpoint", err)
	}
	if _, _, err := LatestComplete(filepath.Join(dir, "missing")); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("missing dir: err = %v, want ErrNoCheckpoint", err)
	}
}

func TestSaveCheckpointKeepLast(t *testing.T) {
	tests := []struct {
		keep int
		want []int
	}{
		{0, []int{1, 2, 3, 4, 5}},
		{1, []int{5}},
		{2, []int{4, 5}},
		{9, []int{1, 2, 3, 4, 5}},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		for s := 1; s <= 5; s++ {
			if _, err := SaveCheckpoint(dir, TrainerState{Step: s}, tc.keep); err != nil {
				t.Fatal(err)
			}
		}
		got, err := CompleteSteps(dir)
		if err != nil || !equalInts(got, tc.want) {
			t.Errorf("keep %d: steps %v (%v), want %v", tc.keep, got, err, tc.want)
		}
	}
}

func TestSaveCheckpointReplacesSameStep(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"old", "new"} {
		if _, err := SaveCheckpoint(dir, TrainerState{Step: 3}, 0, modelPart(content)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, "step-3", "model.safetensors"))
	if err != nil || string(got) != "new" {
		t.Errorf("replaced checkpoint holds %q (%v), want new", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("checkpoints dir has %d entries, want 1 (no .old-/.tmp- leftovers)", len(entries))
	}
}

func TestSaveCheckpointFailingPart(t *testing.T) {
	dir := t.TempDir()
	boom := errors.New("disk full")
	bad := Part{Name: "model", Write: func(string) error { return boom }}
	if _, err := SaveCheckpoint(dir, TrainerState{Step: 1}, 0, bad); !errors.Is(err, boom) {
		t.Errorf("err = %v, want the part's error", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed save left %d entries", len(entries))
	}
}

func TestSaveCheckpointBadParts(t *testing.T) {
	tests := []struct {
		name  string
		parts []Part
	}{
		{"unnamed", []Part{{Write: func(string) error { return nil }}}},
		{"nil writer", []Part{{Name: "m"}}},
		{"duplicate", []Part{modelPart("a"), modelPart("b")}},
		{"reserved", []Part{bytesPart(TrainerStateFile, nil)}},
	}
	for _, tc := range tests {
		if _, err := SaveCheckpoint(t.TempDir(), TrainerState{Step: 1}, 0, tc.parts...); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: err = %v, want ErrBadCheckpoint", tc.name, err)
		}
	}
}

func TestResolve(t *testing.T) {
	root := t.TempDir()
	d, err := Create(root, "run")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := Resolve(d.Path()); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("no checkpoint yet: err = %v", err)
	}
	ck, err := d.SaveCheckpoint(TrainerState{Step: 4}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, st, err := d.LatestCheckpoint(); err != nil || got != ck || st.Step != 4 || st.Run != "run" {
		t.Errorf("LatestCheckpoint = %s, %+v, %v; want %s at step 4", got, st, err, ck)
	}
	for _, in := range []string{d.Path(), d.CheckpointsPath(), ck} {
		if got, err := Resolve(in); err != nil || got != ck {
			t.Errorf("Resolve(%s) = %s, %v; want %s", in, got, err, ck)
		}
	}
	os.Remove(filepath.Join(ck, CompleteFile))
	if _, err := Resolve(ck); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("checkpoint without marker: err = %v, want ErrNoCheckpoint", err)
	}
}

func TestLoadTrainerStateErrors(t *testing.T) {
	tests := []struct{ name, content string }{
		{"not json", "{"},
		{"future version", `{"format_version": 2, "step": 1}`},
		{"no version", `{"step": 1}`},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, TrainerStateFile), []byte(tc.content), 0o644)
		if _, err := LoadTrainerState(dir); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("%s: err = %v, want ErrBadCheckpoint", tc.name, err)
		}
	}
	if _, err := LoadTrainerState(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: err = %v, want not exist", err)
	}
}

func TestLoadTrainerStateRefusesImpossibleValues(t *testing.T) {
	for _, tc := range []struct{ name, dirName, content, want string }{
		{"negative step", "step-3", `{"format_version": 1, "step": -5}`, `trainer_state.json: step = -5: must be ≥ 0`},
		{"negative version", "step-3", `{"format_version": 1, "step": 3, "policy_version": -1}`, `trainer_state.json: policy_version = -1: must be ≥ 0`},
		{"negative tokens", "step-3", `{"format_version": 1, "step": 3, "num_tokens": -1}`, `trainer_state.json: num_tokens = -1: must be ≥ 0`},
		{"step not the dir's", "step-3", `{"format_version": 1, "step": 7}`, `trainer_state.json: step = 7 but the checkpoint directory is step-3`},
		{"consistent", "step-3", `{"format_version": 1, "step": 3, "policy_version": 3}`, ""},
		{"other dir name", "best", `{"format_version": 1, "step": 7}`, ""},
	} {
		dir := filepath.Join(t.TempDir(), tc.dirName)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, TrainerStateFile), []byte(tc.content), 0o644)
		_, err := LoadTrainerState(dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it to load", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want ErrBadCheckpoint containing %q", tc.name, err, tc.want)
		}
	}
}

// bytesPart is a Part writing data to the file name.
func bytesPart(name string, data []byte) Part {
	return FilePart(name, func(path string) error { return os.WriteFile(path, data, 0o644) })
}
