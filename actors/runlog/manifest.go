package runlog

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// ManifestFile lists every other file of a checkpoint with its SHA-256, in
// the format of sha256sum (`sha256sum -c MANIFEST.sha256` checks it by
// hand). The COMPLETE marker holds the SHA-256 of the manifest itself.
const ManifestFile = "MANIFEST.sha256"

// Contents of the COMPLETE marker: completeLegacy in checkpoints written
// before manifests (not verified), completePrefix + the manifest's digest
// in every checkpoint written since.
const (
	completeLegacy = "complete\n"
	completePrefix = "complete sha256:"
)

// Seal makes dir a verifiable checkpoint: it fsyncs every file under it,
// writes MANIFEST.sha256 listing each with its SHA-256, and then the
// COMPLETE marker holding the manifest's SHA-256, and fsyncs dir. A
// directory without COMPLETE is never loaded (LatestComplete), so a crash
// while sealing leaves no half-sealed checkpoint.
func Seal(dir string) error {
	if err := syncTree(dir); err != nil {
		return fmt.Errorf("seal %s: %w", dir, err)
	}
	files, err := listFiles(dir)
	if err != nil {
		return fmt.Errorf("seal %s: %w", dir, err)
	}
	var m bytes.Buffer
	for _, name := range files {
		sum, err := fileDigest(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Errorf("seal %s: %w", dir, err)
		}
		fmt.Fprintf(&m, "%s  %s\n", sum, name)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, ManifestFile), m.Bytes()); err != nil {
		return fmt.Errorf("seal %s: %w", dir, err)
	}
	sum := sha256.Sum256(m.Bytes())
	marker := completePrefix + hex.EncodeToString(sum[:]) + "\n"
	if err := atomicfile.WriteBytes(filepath.Join(dir, CompleteFile), []byte(marker)); err != nil {
		return fmt.Errorf("seal %s: %w", dir, err)
	}
	return atomicfile.SyncDir(dir)
}

// listFiles returns the regular files under dir, as slash-separated paths
// relative to it, sorted, without the manifest and the marker.
func listFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel != ManifestFile && rel != CompleteFile {
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// fileDigest is the hex SHA-256 of the file at path.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Verify checks a checkpoint written by Seal: the manifest against the
// digest in COMPLETE, then every file the manifest lists against its
// digest. The error names the first file that is missing or does not
// match, and wraps ErrDamaged. A checkpoint sealed before manifests
// existed (COMPLETE reads "complete") has nothing to verify and passes.
func Verify(dir string) error {
	m, err := readManifest(dir)
	if err != nil || m == nil {
		return err
	}
	for _, e := range m {
		if err := e.check(dir); err != nil {
			return err
		}
	}
	return nil
}

// verifyFile checks one file of a sealed checkpoint against its digest in
// the manifest (a file the manifest does not list is damage too); a legacy
// checkpoint passes.
func verifyFile(dir, name string) error {
	m, err := readManifest(dir)
	if err != nil || m == nil {
		return err
	}
	for _, e := range m {
		if e.name == name {
			return e.check(dir)
		}
	}
	return fmt.Errorf("checkpoint %s: %s is not in %s: %w", dir, name, ManifestFile, ErrDamaged)
}

// Legacy reports whether dir is a checkpoint sealed before manifests
// existed: its COMPLETE marker reads "complete" and nothing can be verified.
func Legacy(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, CompleteFile))
	return err == nil && string(b) == completeLegacy
}

// sealed reports whether dir holds a COMPLETE marker written by Seal (not a
// legacy one).
func sealed(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, CompleteFile))
	return err == nil && strings.HasPrefix(string(b), completePrefix)
}

// manifestEntry is one line of a manifest.
type manifestEntry struct{ sum, name string }

// check compares the file of e under dir with its digest.
func (e manifestEntry) check(dir string) error {
	sum, err := fileDigest(filepath.Join(dir, filepath.FromSlash(e.name)))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint %s: %s is missing (listed in %s): %w", dir, e.name, ManifestFile, ErrDamaged)
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	if sum != e.sum {
		return fmt.Errorf("checkpoint %s: %s does not match its SHA-256 in %s: %w", dir, e.name, ManifestFile, ErrDamaged)
	}
	return nil
}

// readManifest reads and checks dir's manifest against COMPLETE; nil
// without error for a legacy checkpoint.
func readManifest(dir string) ([]manifestEntry, error) {
	marker, err := os.ReadFile(filepath.Join(dir, CompleteFile))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	if string(marker) == completeLegacy {
		return nil, nil
	}
	want, ok := strings.CutPrefix(strings.TrimSuffix(string(marker), "\n"), completePrefix)
	if !ok || len(want) != 2*sha256.Size {
		return nil, fmt.Errorf("checkpoint %s: %s is not a marker this program writes: %w", dir, CompleteFile, ErrDamaged)
	}
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s: %s is missing: %w", dir, ManifestFile, ErrDamaged)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want {
		return nil, fmt.Errorf("checkpoint %s: %s does not match its SHA-256 in %s: %w", dir, ManifestFile, CompleteFile, ErrDamaged)
	}
	var m []manifestEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 2*sha256.Size || name == "" {
			return nil, fmt.Errorf("checkpoint %s: %s line %d is not \"<sha256>  <file>\": %w", dir, ManifestFile, len(m)+1, ErrDamaged)
		}
		m = append(m, manifestEntry{sum: sum, name: name})
	}
	return m, sc.Err()
}
