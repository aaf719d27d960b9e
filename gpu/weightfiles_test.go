package gpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/safetensors"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// shardCheckpoint rewrites the checkpoint in dir the way Hugging Face
// saves a large model: its tensors (and extra ones) dealt in name order
// over n files model-0000i-of-0000n.safetensors, an index naming the file
// of each, and no model.safetensors. It returns the index's weight_map.
func shardCheckpoint(t *testing.T, dir string, n int, extra ...safetensors.Tensor) map[string]string {
	t.Helper()
	path := filepath.Join(dir, WeightsFileName)
	f, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	shards := make([][]safetensors.Tensor, n)
	for i, name := range f.Tensors() {
		v, shape, _ := f.Float32(name)
		shards[i%n] = append(shards[i%n], safetensors.Tensor{Name: name, Shape: shape, F32: v})
	}
	for i, x := range extra {
		shards[(i+1)%n] = append(shards[(i+1)%n], x)
	}
	weightMap := map[string]string{}
	for i, ts := range shards {
		file := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		if err := safetensors.Write(filepath.Join(dir, file), ts, f.Metadata()); err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			weightMap[x.Name] = file
		}
	}
	writeIndex(t, dir, weightMap)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	return weightMap
}

// writeIndex writes dir's index with weightMap, and the metadata Hugging
// Face writes beside it.
func writeIndex(t *testing.T, dir string, weightMap map[string]string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1234}, "weight_map": weightMap})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadShardedCheckpoint: a checkpoint in shards with an index loads
// the same model as the one file it was cut from, for untied and tied
// models (a tied model's lm_head, in another shard than the embeddings,
// equal to them), and WeightFiles lists the shards.
func TestLoadShardedCheckpoint(t *testing.T) {
	tiny, _ := Preset("tiny")
	for _, cfg := range []Config{tiny, contractArch(ArchQwen2), contractArch(ArchQwen3)} {
		m := steppedModel(t, cfg)
		dir := t.TempDir()
		if err := SaveCheckpoint(dir, m, tokenizer.NewChar()); err != nil {
			t.Fatal(err)
		}
		var extra []safetensors.Tensor
		if cfg.TieEmbeddings {
			embed := newLayout(cfg).specs[0]
			extra = append(extra, safetensors.Tensor{Name: "lm_head.weight", Shape: embed.Shape,
				F32: modelWeights(m)[embed.Offset : embed.Offset+embed.Size()]})
		}
		weightMap := shardCheckpoint(t, dir, 3, extra...)
		if cfg.TieEmbeddings && weightMap["lm_head.weight"] == weightMap["model.embed_tokens.weight"] {
			t.Fatalf("%s: lm_head and the embeddings in one shard: the test checks them apart", contractName(cfg))
		}
		got, err := LoadModel(dir)
		if err != nil {
			t.Fatalf("%s: %v", contractName(cfg), err)
		}
		if got.Config() != cfg || got.Version() != m.Version() || !reflect.DeepEqual(got.Weights(), m.Weights()) {
			t.Errorf("%s: sharded checkpoint loads config %+v version %d (want %d), weights equal %t",
				contractName(cfg), got.Config(), got.Version(), m.Version(), reflect.DeepEqual(got.Weights(), m.Weights()))
		}
		files, err := WeightFiles(dir)
		want := []string{filepath.Join(dir, "model-00001-of-00003.safetensors"), filepath.Join(dir, "model-00002-of-00003.safetensors"),
			filepath.Join(dir, "model-00003-of-00003.safetensors")}
		if err != nil || !reflect.DeepEqual(files, want) {
			t.Errorf("%s: WeightFiles = %v, %v; want %v", contractName(cfg), files, err, want)
		}
	}
}

// TestShardedCheckpointErrors: an index and shards that disagree, an
// index that is not one or points outside its directory, a tied lm_head
// unlike the embeddings, and a directory without weights are each one
// error naming the file and the tensor.
func TestShardedCheckpointErrors(t *testing.T) {
	tiny, _ := Preset("tiny")
	tied := tiny
	tied.TieEmbeddings = true
	const moved = "model.layers.1.mlp.up_proj.weight"
	for _, tc := range []struct {
		name string
		cfg  Config
		edit func(dir string, weightMap map[string]string)
		want string
	}{
		{"no weights", tiny, func(dir string, _ map[string]string) { os.Remove(filepath.Join(dir, IndexFileName)) },
			"neither model.safetensors nor model.safetensors.index.json"},
		{"weights as a pickle", tiny, func(dir string, _ map[string]string) {
			os.Remove(filepath.Join(dir, IndexFileName))
			os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("PK"), 0o644)
		}, "it has pytorch_model.bin, a PyTorch pickle, which is not read: save the model as safetensors"},
		{"a shard missing", tiny, func(dir string, _ map[string]string) {
			os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors"))
		}, "model-00002-of-00003.safetensors: no such file"},
		{"a tensor the index lacks", tiny, func(dir string, weightMap map[string]string) {
			delete(weightMap, moved)
			writeIndex(t, dir, weightMap)
		}, `tensor "` + moved + `" missing from model.safetensors.index.json`},
		{"a tensor in another shard than the index says", tiny, func(dir string, weightMap map[string]string) {
			if weightMap[moved] == "model-00001-of-00003.safetensors" {
				weightMap[moved] = "model-00002-of-00003.safetensors"
			} else {
				weightMap[moved] = "model-00001-of-00003.safetensors"
			}
			writeIndex(t, dir, weightMap)
		}, `tensor "` + moved + `"`},
		{"a file outside the directory", tiny, func(dir string, weightMap map[string]string) {
			weightMap[moved] = "../model-00001-of-00003.safetensors"
			writeIndex(t, dir, weightMap)
		}, `"../model-00001-of-00003.safetensors": want the name of a .safetensors shard beside the index`},
		{"not an index", tiny, func(dir string, _ map[string]string) {
			os.WriteFile(filepath.Join(dir, IndexFileName), []byte("{\"weight_map\": [1, 2]}"), 0o644)
		}, "model.safetensors.index.json: not JSON of an index"},
		{"an empty index", tiny, func(dir string, _ map[string]string) {
			os.WriteFile(filepath.Join(dir, IndexFileName), []byte("{}"), 0o644)
		}, "model.safetensors.index.json: no weight_map"},
		{"a corrupt shard", tiny, func(dir string, _ map[string]string) {
			os.WriteFile(filepath.Join(dir, "model-00003-of-00003.safetensors"), []byte("not safetensors"), 0o644)
		}, "safetensors " + "%DIR%/model-00003-of-00003.safetensors"},
		{"a tied lm_head unlike the embeddings", tied, nil, `tensor "lm_head.weight" in model.safetensors.index.json is not described by config.json`},
	} {
		m, _ := NewModel(tc.cfg, 4)
		dir := t.TempDir()
		if err := SaveCheckpoint(dir, m, tokenizer.NewChar()); err != nil {
			t.Fatal(err)
		}
		var extra []safetensors.Tensor
		if tc.cfg.TieEmbeddings {
			embed := newLayout(tc.cfg).specs[0]
			extra = append(extra, safetensors.Tensor{Name: "lm_head.weight", Shape: embed.Shape, F32: make([]float32, embed.Size())})
		}
		weightMap := shardCheckpoint(t, dir, 3, extra...)
		if tc.edit != nil {
			tc.edit(dir, weightMap)
		}
		_, err := LoadModel(dir)
		want := strings.ReplaceAll(tc.want, "%DIR%", dir)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, want)
			continue
		}
		if tc.name != "a shard missing" && tc.name != "a corrupt shard" && !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: error %v does not wrap ErrCheckpoint", tc.name, err)
		}
	}
}
