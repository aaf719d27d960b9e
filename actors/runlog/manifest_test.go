package runlog

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sealedCheckpoint saves a checkpoint of step 3 with a model part and a
// file in a sub-directory, and returns its path.
func sealedCheckpoint(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	path, err := SaveCheckpoint(dir, TrainerState{Step: 3}, 0, modelPart("weights"),
		Part{Name: "nested", Write: func(d string) error {
			if err := os.Mkdir(filepath.Join(d, "behaviour"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(d, "behaviour", "w"), []byte("old"), 0o644)
		}})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVerifyNamesTheDamagedFile: every file of a checkpoint is listed in
// MANIFEST.sha256 and checked on load; a flipped bit, a truncated or a
// missing file, a damaged manifest or marker is refused naming the file.
func TestVerifyNamesTheDamagedFile(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		damage     func(dir string) error
	}{
		{"intact", "", func(string) error { return nil }},
		{"flipped bit", "model.safetensors does not match its SHA-256 in MANIFEST.sha256", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("weightt"[:7]), 0o644)
		}},
		{"truncated", "trainer_state.json does not match", func(dir string) error {
			return os.Truncate(filepath.Join(dir, TrainerStateFile), 5)
		}},
		{"missing", "behaviour/w is missing (listed in MANIFEST.sha256)", func(dir string) error {
			return os.Remove(filepath.Join(dir, "behaviour", "w"))
		}},
		{"manifest edited", "MANIFEST.sha256 does not match its SHA-256 in COMPLETE", func(dir string) error {
			f, err := os.OpenFile(filepath.Join(dir, ManifestFile), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString("x")
			return err
		}},
		{"manifest gone", "MANIFEST.sha256 is missing", func(dir string) error { return os.Remove(filepath.Join(dir, ManifestFile)) }},
		{"marker damaged", "COMPLETE is not a marker this program writes", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, CompleteFile), []byte("complete sha256:zz\n"), 0o644)
		}},
	} {
		dir := sealedCheckpoint(t)
		if err := tc.damage(dir); err != nil {
			t.Fatal(err)
		}
		err := Verify(dir)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: Verify = %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Verify = %v, want ErrDamaged naming %q", tc.name, err, tc.want)
		}
		if _, rerr := Resolve(dir); !errors.Is(rerr, ErrDamaged) {
			t.Errorf("%s: Resolve = %v, want ErrDamaged", tc.name, rerr)
		}
	}
}

// TestVerifyLegacyCheckpoint: a checkpoint sealed before manifests (its
// COMPLETE reads "complete") loads as before, unverified.
func TestVerifyLegacyCheckpoint(t *testing.T) {
	dir := sealedCheckpoint(t)
	os.Remove(filepath.Join(dir, ManifestFile))
	if err := os.WriteFile(filepath.Join(dir, CompleteFile), []byte("complete\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir); err != nil || sealed(dir) {
		t.Errorf("legacy checkpoint: Verify = %v, Sealed = %v; want nil, false", err, sealed(dir))
	}
}

// TestManifestIsSha256sum: the manifest is what sha256sum -c reads.
func TestManifestIsSha256sum(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	dir := sealedCheckpoint(t)
	cmd := exec.Command("sha256sum", "--quiet", "-c", ManifestFile)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}
}

// TestPruneKeepsNewestAndBest: keep N keeps the newest N checkpoints and
// the one with the highest greedy accuracy (the newest of a tie).
func TestPruneKeepsNewestAndBest(t *testing.T) {
	dir := t.TempDir()
	acc := map[int]float64{2: 0.3, 4: 0.7, 6: 0.7, 8: 0.1}
	for step := 1; step <= 10; step++ {
		st := TrainerState{Step: step}
		if a, ok := acc[step]; ok {
			st.GreedyAccuracy = &a
		}
		if _, err := SaveCheckpoint(dir, st, 3, modelPart("w")); err != nil {
			t.Fatal(err)
		}
	}
	steps, err := CompleteSteps(dir)
	if err != nil || !equalInts(steps, []int{6, 8, 9, 10}) {
		t.Errorf("kept %v (%v), want [6 8 9 10]: the newest 3 and the best (6, tied with 4)", steps, err)
	}
}

// TestSavedConfig: a resume's configuration is the newest checkpoint's
// config.yaml, checked against its manifest; the run's own config.yaml
// serves checkpoints that hold none; a run without a checkpoint says what
// to do.
func TestSavedConfig(t *testing.T) {
	d, err := Create(t.TempDir(), "r")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteConfig([]byte("run: config\n")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := SavedConfig(d.Path()); !errors.Is(err, ErrNoCheckpoint) || !strings.Contains(err.Error(), "start it again") {
		t.Errorf("no checkpoint: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(d.Path(), ReferenceDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Seal(filepath.Join(d.Path(), ReferenceDir)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := SavedConfig(d.Path()); err == nil || !strings.Contains(err.Error(), "--model.checkpoint "+filepath.Join(d.Path(), ReferenceDir)) {
		t.Errorf("warm start only: %v, want the --model.checkpoint advice", err)
	}
	if _, err := d.SaveCheckpoint(TrainerState{Step: 1}, 0, modelPart("w")); err != nil {
		t.Fatal(err)
	}
	if data, src, err := SavedConfig(d.Path()); err != nil || string(data) != "run: config\n" || src != "file "+filepath.Join(d.Path(), ConfigFile) {
		t.Errorf("checkpoint without config: %q from %s (%v), want the run's", data, src, err)
	}
	path, err := d.SaveCheckpoint(TrainerState{Step: 2}, 0, modelPart("w"), bytesPart(ConfigFile, []byte("steps: 9\n")))
	if err != nil {
		t.Fatal(err)
	}
	if data, src, err := SavedConfig(d.Path()); err != nil || string(data) != "steps: 9\n" || src != "file "+filepath.Join(path, ConfigFile) {
		t.Errorf("checkpoint config: %q from %s (%v)", data, src, err)
	}
	if err := os.WriteFile(filepath.Join(path, ConfigFile), []byte("steps: 9"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := SavedConfig(d.Path()); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "config.yaml does not match") {
		t.Errorf("damaged checkpoint config: %v, want ErrDamaged naming config.yaml", err)
	}
}
