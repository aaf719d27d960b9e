package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// names lists dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range entries {
		n = append(n, e.Name())
	}
	return n
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func fillWith(files map[string]string) func(string) error {
	return func(tmp string) error {
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

func TestReplaceDirNew(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "sub", "out")
	if err := ReplaceDir(dir, nil, fillWith(map[string]string{"a": "1"})); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a")); string(got) != "1" {
		t.Errorf("a = %q, want 1", got)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != DirMode {
		t.Errorf("mode %v (%v), want %v", st.Mode().Perm(), err, os.FileMode(DirMode))
	}
	if n := names(t, filepath.Dir(dir)); !slices.Equal(n, []string{"out"}) {
		t.Errorf("beside it: %q, want only out", n)
	}
}

// TestReplaceDirKeeps: the new files win, kept entries (a file, a
// subdirectory, a symbolic link) come over, the others go.
func TestReplaceDirKeeps(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	writeFiles(t, dir, map[string]string{"a": "old", "stale": "x", "notes": "mine", "sub/deep": "d"})
	if err := os.Symlink("notes", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	keep := func(name string) bool { return name != "stale" }
	if err := ReplaceDir(dir, keep, fillWith(map[string]string{"a": "new"})); err != nil {
		t.Fatal(err)
	}
	if n := names(t, dir); !slices.Equal(n, []string{"a", "link", "notes", "sub"}) {
		t.Errorf("entries %q", n)
	}
	for name, want := range map[string]string{"a": "new", "notes": "mine", "sub/deep": "d", "link": "mine"} {
		if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o750 {
		t.Errorf("mode %v, want the old directory's 0750", st.Mode().Perm())
	}
	if n := names(t, parent); !slices.Equal(n, []string{"out"}) {
		t.Errorf("beside it: %q, want only out (the old copy removed)", n)
	}
}

// TestReplaceDirFailureLeavesOld: a fill that fails halfway leaves the
// old directory as it was and nothing beside it.
func TestReplaceDirFailureLeavesOld(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	writeFiles(t, dir, map[string]string{"a": "old", "b": "old"})
	boom := errors.New("disk full")
	err := ReplaceDir(dir, nil, func(tmp string) error {
		if err := fillWith(map[string]string{"a": "new"})(tmp); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	for _, name := range []string{"a", "b"} {
		if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != "old" {
			t.Errorf("%s = %q after a failed replace, want old", name, got)
		}
	}
	if n := names(t, parent); !slices.Equal(n, []string{"out"}) {
		t.Errorf("beside it: %q, want only out", n)
	}
}

func TestReplaceDirRefusesAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFiles(t, filepath.Dir(path), map[string]string{"f": "x"})
	if err := ReplaceDir(path, nil, fillWith(nil)); err == nil {
		t.Fatal("ReplaceDir over a file: no error")
	}
	if got, _ := os.ReadFile(path); string(got) != "x" {
		t.Errorf("the file = %q, want it untouched", got)
	}
}

// TestSwapInWithoutExchange: where the system has no atomic exchange,
// the old directory is renamed aside, the new one in, the old one left
// at tmp for removal.
func TestSwapInWithoutExchange(t *testing.T) {
	parent := t.TempDir()
	writeFiles(t, parent, map[string]string{"out/a": "old", "tmp/a": "new"})
	tmp, target := filepath.Join(parent, "tmp"), filepath.Join(parent, "out")
	if err := renameAside(tmp, target); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(target, "a")); string(got) != "new" {
		t.Errorf("out/a = %q, want new", got)
	}
	if got, _ := os.ReadFile(filepath.Join(tmp, "a")); string(got) != "old" {
		t.Errorf("tmp/a = %q, want old", got)
	}
}

// TestReplaceDirRemovesLeftovers: what a killed ReplaceDir left beside
// its target (.NAME.tmp…) goes with the next one; another name's stays.
func TestReplaceDirRemovesLeftovers(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "m[1]")
	writeFiles(t, parent, map[string]string{".m[1].tmp123/half": "x", ".m[1].tmp9.old/a": "x", ".other.tmp1/a": "x"})
	if err := ReplaceDir(dir, nil, fillWith(map[string]string{"a": "1"})); err != nil {
		t.Fatal(err)
	}
	if n := names(t, parent); !slices.Equal(n, []string{".other.tmp1", "m[1]"}) {
		t.Errorf("beside it: %q, want .other.tmp1 and m[1]", n)
	}
}

// TestReplaceDirRestoresAside: an old directory that a kill left renamed
// aside (.NAME.tmp….old, where the system has no atomic exchange) with
// NAME missing is put back by the next ReplaceDir, which a failed fill
// then leaves as it was (it was removed as a leftover).
func TestReplaceDirRestoresAside(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	writeFiles(t, parent, map[string]string{".out.tmp7.old/model": "old", ".out.tmp7/model": "half"})
	fail := errors.New("disk full")
	if err := ReplaceDir(dir, nil, func(string) error { return fail }); !errors.Is(err, fail) {
		t.Fatalf("ReplaceDir = %v, want the fill's error", err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "model")); err != nil || string(got) != "old" {
		t.Errorf("out/model = %q, %v; want the old directory back", got, err)
	}
	if n := names(t, parent); !slices.Equal(n, []string{"out"}) {
		t.Errorf("beside it: %q, want out alone", n)
	}
}

// TestReplaceDirRefusesTheWorkingDirectory: the working directory, or
// one holding it, is not replaced (the shell would sit in the removed
// old one); a new directory under it is fine.
func TestReplaceDirRefusesTheWorkingDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	writeFiles(t, dir, map[string]string{"sub/a": "old"})
	t.Chdir(filepath.Join(dir, "sub"))
	for _, d := range []string{".", "..", dir} {
		if err := ReplaceDir(d, nil, fillWith(map[string]string{"a": "new"})); !errors.Is(err, ErrWorkingDir) {
			t.Errorf("ReplaceDir(%q) = %v, want ErrWorkingDir", d, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "sub", "a")); string(got) != "old" {
		t.Errorf("sub/a = %q, want old", got)
	}
	if err := ReplaceDir("new", nil, fillWith(map[string]string{"a": "1"})); err != nil {
		t.Errorf("ReplaceDir of a new directory in the working directory: %v", err)
	}
}
