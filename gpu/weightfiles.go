package gpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// IndexFileName is the index of a sharded checkpoint (Hugging Face's
// layout for models of more than a few GB): a JSON object whose
// "weight_map" names, for every tensor, the file of the directory that
// holds it (model-00001-of-00004.safetensors, ...).
const IndexFileName = "model.safetensors.index.json"

// maxIndexBytes bounds an index file: a 7B model's is about 25 KB.
const maxIndexBytes = 64 << 20

// weightFiles is where a checkpoint directory keeps its tensors: one
// model.safetensors, or the shards its index names.
type weightFiles struct {
	dir   string
	files []string          // base names, in the order they are read
	owner map[string]string // tensor name → the file holding it; nil for one file (every tensor of it)
}

// what names the weights in errors: model.safetensors, or the index.
func (s weightFiles) what() string {
	if s.owner == nil {
		return WeightsFileName
	}
	return IndexFileName
}

// WeightFiles lists the paths of the weight files of the checkpoint in
// dir: dir/model.safetensors when it exists, else the shards
// dir/model.safetensors.index.json names, in name order. A directory with
// neither, an index that is not one, or that names a file outside dir is
// an error naming it.
func WeightFiles(dir string) ([]string, error) {
	s, err := findWeights(dir)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(s.files))
	for i, f := range s.files {
		paths[i] = filepath.Join(dir, f)
	}
	return paths, nil
}

// findWeights finds the weight files of the checkpoint in dir.
func findWeights(dir string) (weightFiles, error) {
	single := filepath.Join(dir, WeightsFileName)
	if _, err := os.Stat(single); err == nil || !errors.Is(err, os.ErrNotExist) {
		return weightFiles{dir: dir, files: []string{WeightsFileName}}, nil // a file that is there but unreadable says so when read
	}
	b, err := readIndex(filepath.Join(dir, IndexFileName))
	if errors.Is(err, os.ErrNotExist) {
		return weightFiles{}, fmt.Errorf("%w: neither %s nor %s (a sharded checkpoint's index) in %s%s", ErrCheckpoint, WeightsFileName, IndexFileName, dir, pickleHint(dir))
	}
	if err != nil {
		return weightFiles{}, err
	}
	return parseIndex(dir, b)
}

// pickleHint is what to do with a checkpoint that holds its weights as
// PyTorch pickles (pytorch_model.bin, or its shards), which are not read:
// "" when it holds none.
func pickleHint(dir string) string {
	for _, name := range []string{"pytorch_model.bin", "pytorch_model.bin.index.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Sprintf("; it has %s, a PyTorch pickle, which is not read: save the model as safetensors (transformers: save_pretrained(out, safe_serialization=True))", name)
		}
	}
	return ""
}

// readIndex reads an index file, refusing one too large to be an index.
func readIndex(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndexBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", IndexFileName, err)
	case len(b) > maxIndexBytes:
		return nil, fmt.Errorf("%w: %s is over %d bytes: not an index", ErrCheckpoint, IndexFileName, maxIndexBytes)
	}
	return b, nil
}

// parseIndex reads an index's weight_map. Every file it names must be a
// plain .safetensors file name of dir (no directory, so that an index
// cannot point outside its checkpoint).
func parseIndex(dir string, b []byte) (weightFiles, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCheckpoint, IndexFileName, fmt.Sprintf(format, args...))
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return weightFiles{}, bad("not JSON of an index: %v", err)
	}
	if len(idx.WeightMap) == 0 {
		return weightFiles{}, bad("no weight_map, or an empty one")
	}
	s := weightFiles{dir: dir, owner: idx.WeightMap}
	for name, file := range idx.WeightMap {
		if file != filepath.Base(file) || strings.ContainsAny(file, `/\`) || !strings.HasSuffix(file, ".safetensors") || file == WeightsFileName {
			return weightFiles{}, bad("tensor %q is in %q: want the name of a .safetensors shard beside the index", name, file)
		}
		if !slices.Contains(s.files, file) {
			s.files = append(s.files, file)
		}
	}
	slices.Sort(s.files)
	return s, nil
}

// names lists every tensor of the checkpoint, sorted: the index's, or
// those of the one file (given, read).
func (s weightFiles) names(one []string) []string {
	if s.owner == nil {
		return one
	}
	out := make([]string, 0, len(s.owner))
	for name := range s.owner {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// checkShard checks that the shard file holds exactly the tensors the
// index puts in it.
func (s weightFiles) checkShard(file string, tensors []string) error {
	if s.owner == nil {
		return nil
	}
	for _, name := range tensors {
		if want, ok := s.owner[name]; !ok || want != file {
			where := "does not list it"
			if ok {
				where = fmt.Sprintf("puts it in %s", want)
			}
			return fmt.Errorf("%w: %s holds tensor %q, but %s %s", ErrCheckpoint, file, name, IndexFileName, where)
		}
	}
	n := 0
	for _, f := range s.owner {
		if f == file {
			n++
		}
	}
	if n != len(tensors) {
		for name, f := range s.owner {
			if f == file && !slices.Contains(tensors, name) {
				return fmt.Errorf("%w: %s puts tensor %q in %s, which lacks it", ErrCheckpoint, IndexFileName, name, file)
			}
		}
	}
	return nil
}

// largest is the size in bytes of the largest weight file (0 when none
// can be read: reading it says why).
func (s weightFiles) largest() int64 {
	var n int64
	for _, f := range s.files {
		if fi, err := os.Stat(filepath.Join(s.dir, f)); err == nil {
			n = max(n, fi.Size())
		}
	}
	return n
}
