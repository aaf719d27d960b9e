// Package atomicfile writes files so that a reader, or a crash, sees either
// the old file or the complete new one, never a part of it.
//
// It is internal to gpu: the checkpoint files (config.json,
// model.safetensors, tokenizer.json, optimizer state) all go through it.
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
	return syncDir(dir)
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

// syncDir fsyncs a directory so a rename inside it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
