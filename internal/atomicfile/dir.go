package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DirMode is the permission of a directory ReplaceDir creates (one that
// replaces another keeps the other's).
const DirMode = 0o755

// ReplaceDir makes dir what fill writes, in one rename: fill writes into
// a new directory beside dir (in the same parent, so on the same file
// system); the entries of an existing dir that keep accepts, and that
// fill did not write, are hard-linked into it (subdirectories entry by
// entry); every file and directory in it is fsynced; then it takes dir's
// place and the old directory is removed. Until that rename dir is as it
// was: a failed fill, a full disk or a kill leaves it untouched, and an
// error removes the new directory (what a kill leaves, the next
// ReplaceDir of dir removes). An existing dir holding the working
// directory is refused (ErrWorkingDir). keep nil keeps nothing. A symbolic
// link at dir is followed: its target is replaced.
func ReplaceDir(dir string, keep func(name string) bool, fill func(tmp string) error) error {
	if err := replaceDir(dir, keep, fill); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	return nil
}

func replaceDir(dir string, keep func(name string) bool, fill func(tmp string) error) error {
	target, old, err := existingDir(dir)
	if err != nil {
		return err
	}
	if old != nil && holdsWorkingDir(target) {
		return ErrWorkingDir
	}
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, DirMode); err != nil {
		return err
	}
	if removeLeftovers(parent, target) {
		if target, old, err = existingDir(dir); err != nil {
			return err
		}
		if holdsWorkingDir(target) {
			return ErrWorkingDir
		}
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(target)+".tmp*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // after the swap it holds the old directory
	if err := fill(tmp); err != nil {
		return err
	}
	mode := os.FileMode(DirMode)
	if old != nil {
		mode = old.Mode().Perm()
		if err := linkKept(target, tmp, keep); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	if err := swapIn(tmp, target, old != nil); err != nil {
		return err
	}
	return SyncDir(parent)
}

// ErrWorkingDir: ReplaceDir was asked to replace the working directory
// (or one holding it). It refuses: the process that started this one (a
// shell) would be left in the removed old directory, seeing none of the
// new files.
var ErrWorkingDir = errors.New("it holds the working directory: replacing it would leave the shell in the removed old directory; run from outside it")

// holdsWorkingDir reports whether target (resolved) is the working
// directory or holds it.
func holdsWorkingDir(target string) bool {
	wd, err := os.Getwd()
	if err != nil {
		return false
	}
	if resolved, err := filepath.EvalSymlinks(wd); err == nil {
		wd = resolved
	}
	rel, err := filepath.Rel(target, wd)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// removeLeftovers removes the directories an earlier ReplaceDir of target
// left beside it when it was killed (.NAME.tmp…), after putting back the
// old directory that a kill between renameAside's renames left aside with
// target missing; it reports whether it put one back.
func removeLeftovers(parent, target string) (restored bool) {
	left, _ := filepath.Glob(filepath.Join(parent, "."+escapeGlob(filepath.Base(target))+".tmp*"))
	for _, l := range left {
		if strings.HasSuffix(l, ".old") && !exists(target) && os.Rename(l, target) == nil {
			restored = true
			continue
		}
		os.RemoveAll(l)
	}
	return restored
}

// escapeGlob quotes the characters filepath.Match treats specially.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// existingDir resolves dir (following a symbolic link) and returns its
// info, nil when there is nothing there; a file that is not a directory
// is an error.
func existingDir(dir string) (string, fs.FileInfo, error) {
	target, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	if resolved, err := filepath.EvalSymlinks(target); err == nil {
		target = resolved
	}
	st, err := os.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return target, nil, nil
	case err != nil:
		return "", nil, err
	case !st.IsDir():
		return "", nil, fmt.Errorf("%s is not a directory", dir)
	}
	return target, st, nil
}

// swapIn puts tmp at target: a rename when target is new; when it exists,
// an atomic exchange where the system has one (tmp then holds the old
// directory), else the old directory is renamed aside first (a crash
// between the two renames leaves it whole, beside the new one).
func swapIn(tmp, target string, exists bool) error {
	if !exists {
		return os.Rename(tmp, target)
	}
	if err := exchange(tmp, target); err == nil {
		return nil
	}
	return renameAside(tmp, target)
}

// renameAside swaps tmp and target by renames: target aside, tmp to
// target, the old one to tmp.
func renameAside(tmp, target string) error {
	aside := tmp + ".old"
	if err := os.Rename(target, aside); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Rename(aside, target)
		return err
	}
	return os.Rename(aside, tmp) // removed with tmp
}

// linkKept hard-links into tmp each entry of old that keep accepts and
// tmp does not hold.
func linkKept(old, tmp string, keep func(name string) bool) error {
	if keep == nil {
		return nil
	}
	entries, err := os.ReadDir(old)
	if err != nil {
		return err
	}
	for _, e := range entries {
		dst := filepath.Join(tmp, e.Name())
		if !keep(e.Name()) || exists(dst) {
			continue
		}
		if err := linkTree(filepath.Join(old, e.Name()), dst); err != nil {
			return fmt.Errorf("keep %s: %w", e.Name(), err)
		}
	}
	return nil
}

// linkTree makes dst a copy of src made of hard links: directories are
// made anew, files linked, symbolic links made again.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case t.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.Mkdir(to, info.Mode().Perm())
		case t&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		case t.IsRegular():
			return os.Link(path, to)
		}
		return fmt.Errorf("%s is not a file, a directory or a symbolic link", path)
	})
}

// syncTree fsyncs every regular file and directory under root, root last.
func syncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			dirs = append(dirs, path)
		case d.Type().IsRegular():
			return SyncFile(path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := SyncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
