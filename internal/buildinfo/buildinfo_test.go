package buildinfo

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHashFile: the digits are the start of the file's SHA-256, and two
// files that differ in one byte differ.
func TestHashFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("mgrpo-node build 1"), 0o600)
	os.WriteFile(b, []byte("mgrpo-node build 2"), 0o600)
	sum := sha256.Sum256([]byte("mgrpo-node build 1"))
	ha, err := hashFile(func() (string, error) { return a, nil })
	if err != nil || ha != hex.EncodeToString(sum[:])[:hashLen] {
		t.Errorf("hashFile(a) = %q, %v; want %q", ha, err, hex.EncodeToString(sum[:])[:hashLen])
	}
	if hb, _ := hashFile(func() (string, error) { return b, nil }); hb == ha {
		t.Errorf("two different files hash alike: %q", ha)
	}
	if _, err := hashFile(func() (string, error) { return filepath.Join(dir, "missing"), nil }); err == nil {
		t.Error("a missing file hashed")
	}
}

// TestID: the identity is the version and the running program's hash,
// the same on every call.
func TestID(t *testing.T) {
	id := ID()
	v, h, ok := strings.Cut(id, " sha256:")
	if !ok || v != Version() || len(h) != hashLen {
		t.Fatalf("ID() = %q: want %q sha256:<%d hex digits>", id, Version(), hashLen)
	}
	if ID() != id {
		t.Errorf("ID changed between calls")
	}
}

// TestIDTwin: a build stamped with its twin's hash (mgrpo-node-cuda) takes
// the twin's identity; Executable still names its own file.
func TestIDTwin(t *testing.T) {
	defer func(old string) { twin = old }(twin)
	twin = "0123456789ab"
	if id := ID(); id != Version()+" sha256:0123456789ab" {
		t.Errorf("ID() = %q, want the twin's hash", id)
	}
	if own := Executable(); own != "sha256:"+executableHash() || own == "sha256:"+twin {
		t.Errorf("Executable() = %q, want this file's hash", own)
	}
}
