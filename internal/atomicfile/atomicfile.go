// Package atomicfile writes files so that a reader, or a crash, sees either
// the old file or the complete new one, never a part of it.
//
// It is the project's one atomic writer: checkpoint files (config.json,
// model.safetensors, tokenizer.json, optimizer state, trainer and
// controller state), config.yaml, sample tables and the report all go
// through it, and ReplaceDir does the same for a whole directory (the
// model of `mgrpo-node init`, the certificates of `mgrpo-node certs`).
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Mode is the permission of every file written, as os.WriteFile would give
// with the usual umask (os.CreateTemp alone would leave 0600).
const Mode = 0o644

// Write writes path from write: into a temporary file in the same
// directory, buffered, then flushed, fsynced, renamed over path, and the
// directory fsynced. On any error path is untouched and the temporary
// file removed.
func Write(path string, write func(w io.Writer) error) error {
	if err := write1(path, write); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func write1(path string, write func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := fill(f, write); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// WriteBytes is Write for data already in memory.
func WriteBytes(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// fill writes, flushes, sets the mode and fsyncs f.
func fill(f *os.File, write func(w io.Writer) error) error {
	w := bufio.NewWriterSize(f, 1<<20)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Chmod(Mode); err != nil {
		return fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	return f.Sync()
}

// SyncDir fsyncs a directory so that entries created or renamed in it are
// durable.
func SyncDir(dir string) error {
	return SyncFile(dir)
}

// SyncFile fsyncs an existing file or directory.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}
