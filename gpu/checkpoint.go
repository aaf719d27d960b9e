package gpu

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mgrpo/mgrpo/gpu/hfconfig"
	"github.com/mgrpo/mgrpo/gpu/safetensors"
	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// ErrCheckpoint is returned (wrapped) when a checkpoint directory lacks a
// tensor, holds one of the wrong shape, or disagrees with its config.
var ErrCheckpoint = errors.New("gpu: bad checkpoint")

// WeightsFileName is the weights file inside a checkpoint directory.
const WeightsFileName = "model.safetensors"

// metaVersion is the safetensors metadata key holding the policy version.
const metaVersion = "mgrpo_policy_version"

// HFConfig converts c to a Hugging Face config (config.json keys of its
// model type), float32 weights, with the given special token ids (-1 for
// none).
func (c Config) HFConfig(bos, eos, pad int) hfconfig.LlamaConfig {
	h := hfconfig.New(c.Vocab, c.Hidden, c.MLP, c.Layers, c.Heads, c.Context, c.TieEmbeddings)
	h.NumKeyValueHeads, h.RopeTheta, h.RMSNormEps = c.KVHeads, c.RopeTheta, c.NormEps
	h.BOSTokenID, h.EOSTokenID, h.PadTokenID = bos, eos, pad
	if c.Arch != "" {
		h.SetModelType(c.Arch)
	}
	h.HeadDim = c.HeadDim()
	if s := c.RopeScaling; s.enabled() {
		h.RopeScaling = &hfconfig.RopeScaling{RopeType: hfconfig.RopeLlama3, Factor: s.Factor,
			LowFreqFactor: s.LowFreqFactor, HighFreqFactor: s.HighFreqFactor, OriginalMaxPositionEmbeddings: s.OriginalContext}
	}
	return h
}

// ConfigFromHF converts a validated Hugging Face config to a Config. A
// Llama config gets the empty Arch and HeadWidth 0 (head_dim =
// hidden/heads), so that its Config is the same as before Arch existed.
func ConfigFromHF(h hfconfig.LlamaConfig) (Config, error) {
	if err := h.Validate(); err != nil {
		return Config{}, err
	}
	c := Config{Vocab: h.VocabSize, Hidden: h.HiddenSize, Layers: h.NumHiddenLayers, Heads: h.NumAttentionHeads,
		KVHeads: h.NumKeyValueHeads, MLP: h.IntermediateSize, Context: h.MaxPositionEmbeddings,
		RopeTheta: h.RopeTheta, NormEps: h.RMSNormEps, TieEmbeddings: h.TieWordEmbeddings}
	if h.ModelType != hfconfig.ModelLlama {
		c.Arch = h.ModelType
	}
	if h.HiddenSize%h.NumAttentionHeads != 0 || h.HeadDim != h.HiddenSize/h.NumAttentionHeads {
		c.HeadWidth = h.HeadDim
	}
	if s := h.RopeScaling; s != nil {
		c.RopeScaling = RopeScaling{Factor: s.Factor, LowFreqFactor: s.LowFreqFactor,
			HighFreqFactor: s.HighFreqFactor, OriginalContext: s.OriginalMaxPositionEmbeddings}
	}
	return c, c.Validate()
}

// SaveCheckpoint writes dir/config.json (Hugging Face LlamaConfig keys),
// dir/model.safetensors (F32, Hugging Face names and [out, in] layout, the
// policy version in the metadata) and dir/tokenizer.json, each atomically,
// creating dir if needed. tok may be nil (no tokenizer.json is written);
// otherwise it must implement Save(dir) and have no more ids than the
// model's vocabulary.
func SaveCheckpoint(dir string, m *Model, tok tokenizer.Tokenizer) error {
	wrap := func(err error) error { return fmt.Errorf("save checkpoint %s: %w", dir, err) }
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return wrap(err)
	}
	bos, eos, pad := -1, -1, -1
	if tok != nil {
		if tok.VocabSize() > m.cfg.Vocab { // a hub model's vocab_size may pad the tokenizer's
			return wrap(fmt.Errorf("%w: tokenizer has %d ids, model %d", ErrCheckpoint, tok.VocabSize(), m.cfg.Vocab))
		}
		bos, eos, pad = tok.BOS(), tok.EOS(), tok.PAD()
	}
	if err := hfconfig.Write(dir, m.cfg.HFConfig(bos, eos, pad)); err != nil {
		return wrap(err)
	}
	var tensors []safetensors.Tensor
	w := modelWeights(m)
	for _, s := range newLayout(m.cfg).specs {
		tensors = append(tensors, safetensors.Tensor{Name: s.Name, Shape: s.Shape,
			F32: w[s.Offset : s.Offset+s.Size()]})
	}
	meta := map[string]string{"format": "pt", metaVersion: strconv.FormatInt(m.version, 10)}
	if err := safetensors.Write(filepath.Join(dir, WeightsFileName), tensors, meta); err != nil {
		return wrap(err)
	}
	if tok != nil {
		saver, ok := tok.(interface{ Save(dir string) error })
		if !ok {
			return wrap(fmt.Errorf("tokenizer %s cannot be saved", tok.Name()))
		}
		if err := saver.Save(dir); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// LoadCheckpoint reads a checkpoint written by SaveCheckpoint or a Hugging
// Face Llama checkpoint (F32, F64, BF16 or F16 tensors, converted to
// float32) and its tokenizer (the built-in one when tokenizer.json is absent).
func LoadCheckpoint(dir string) (*Model, tokenizer.Tokenizer, error) {
	m, err := LoadModel(dir)
	if err != nil {
		return nil, nil, err
	}
	tok, err := LoadTokenizer(dir, m.cfg)
	if err != nil {
		return nil, nil, err
	}
	return m, tok, nil
}

// LoadTokenizer reads the tokenizer of the checkpoint in dir (the
// built-in one when tokenizer.json is absent) and checks that every id it
// makes is in the vocabulary of cfg, the checkpoint's model.
func LoadTokenizer(dir string, cfg Config) (tokenizer.Tokenizer, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", dir, err)
	}
	if tok.VocabSize() > cfg.Vocab {
		return nil, fmt.Errorf("load checkpoint %s: %w: tokenizer has %d ids, model vocabulary %d", dir, ErrCheckpoint, tok.VocabSize(), cfg.Vocab)
	}
	return tok, nil
}

// LoadModel reads config.json and the weights of a checkpoint: one
// model.safetensors, or the shards of a model.safetensors.index.json
// (Hugging Face's sharded layout), read one at a time. A missing tensor, a
// shape mismatch, a NaN or infinite weight, a tensor config.json does not
// describe (say a third layer when num_hidden_layers is 2), an index and
// shards that disagree, a corrupt file, or a model larger than the memory
// available gives one error naming it.
func LoadModel(dir string) (*Model, error) {
	wrap := func(err error) error { return fmt.Errorf("load checkpoint %s: %w", dir, err) }
	cfg, err := ReadCheckpointConfig(dir)
	if err != nil {
		return nil, err
	}
	src, err := findWeights(dir)
	if err != nil {
		return nil, wrap(err)
	}
	if n := src.largest(); n > 0 {
		if err := CheckMemory("loading "+src.what()+" and the model", toBytes(float64(n)+cfg.modelBytes())); err != nil {
			return nil, wrap(err)
		}
	}
	var first *safetensors.File // a single file is read before its names are known
	if src.owner == nil {
		if first, err = safetensors.Read(filepath.Join(dir, WeightsFileName)); err != nil {
			return nil, wrap(err)
		}
	}
	l := newLayout(cfg)
	if err := checkNames(src, l, cfg, first); err != nil {
		return nil, wrap(err)
	}
	w := make([]float32, cfg.NumParams())
	var version int64
	var head []float32 // a tied model's lm_head, which must equal the embeddings
	for _, file := range src.files {
		f := first
		if f == nil {
			if f, err = safetensors.Read(filepath.Join(dir, file)); err != nil {
				return nil, wrap(err)
			}
		}
		first = nil // each shard is let go before the next is read
		if err := src.checkShard(file, f.Tensors()); err != nil {
			return nil, wrap(err)
		}
		if head == nil && cfg.TieEmbeddings && slices.Contains(f.Tensors(), "lm_head.weight") {
			if head, _, err = f.Float32("lm_head.weight"); err != nil {
				return nil, wrap(err)
			}
		}
		if err := loadTensors(f, l, w); err != nil {
			return nil, wrap(err)
		}
		if v, ok := f.Metadata()[metaVersion]; ok {
			if version, err = strconv.ParseInt(v, 10, 64); err != nil {
				return nil, wrap(fmt.Errorf("%w: metadata %s = %q", ErrCheckpoint, metaVersion, v))
			}
		}
	}
	if e := l.specs[l.index["model.embed_tokens.weight"]]; head != nil && !slices.Equal(head, w[e.Offset:e.Offset+e.Size()]) {
		return nil, wrap(extraTensor("lm_head.weight", src, cfg))
	}
	return newModel(cfg, w, version), nil
}

// checkNames checks the checkpoint's tensor names (the index's, or those
// of first, its one file) against the layout before any weight is
// converted: a tensor the config does not describe, then one it needs
// that is missing.
func checkNames(src weightFiles, l layout, cfg Config, first *safetensors.File) error {
	var one []string
	if first != nil {
		one = first.Tensors()
	}
	names := src.names(one)
	if err := checkExtraTensors(names, l, src, cfg); err != nil {
		return err
	}
	for _, s := range l.specs {
		if _, ok := slices.BinarySearch(names, s.Name); !ok {
			return fmt.Errorf("%w: tensor %q missing from %s", ErrCheckpoint, s.Name, src.what())
		}
	}
	return nil
}

// loadTensors copies the tensors of f that the layout describes into w,
// checking each one's shape and that every weight is finite.
func loadTensors(f *safetensors.File, l layout, w []float32) error {
	for _, name := range f.Tensors() {
		i, ok := l.index[name]
		if !ok {
			continue // checked by checkNames: a RoPE buffer or a tied lm_head
		}
		s := l.specs[i]
		if info, _ := f.Info(name); !slices.Equal(info.Shape, s.Shape) {
			return fmt.Errorf("%w: tensor %q has shape %v, config.json needs %v", ErrCheckpoint, s.Name, info.Shape, s.Shape)
		}
		v, _, err := f.Float32(name)
		if err != nil {
			return err
		}
		for i, x := range v { // a NaN weight makes every output NaN: refuse it here, by name
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("%w: tensor %q holds %v at index %d", ErrCheckpoint, s.Name, x, i)
			}
		}
		copy(w[s.Offset:], v)
	}
	return nil
}

// ReadCheckpointConfig reads and validates the config.json of a
// checkpoint directory as a Config, without reading the weights.
func ReadCheckpointConfig(dir string) (Config, error) {
	h, err := hfconfig.Read(dir)
	if err != nil {
		return Config{}, fmt.Errorf("load checkpoint %s: %w", dir, err)
	}
	cfg, err := ConfigFromHF(h)
	if err != nil {
		return Config{}, fmt.Errorf("load checkpoint %s: %w", dir, err)
	}
	return cfg, nil
}

// checkExtraTensors refuses a checkpoint holding a tensor that the config
// does not describe (the first of names, sorted), so that a config.json
// with too few layers cannot load a model silently cut short. RoPE
// inverse-frequency buffers of older Hugging Face checkpoints are ignored,
// as is the lm_head of a tied model (LoadModel checks that it equals the
// embeddings).
func checkExtraTensors(names []string, l layout, src weightFiles, cfg Config) error {
	for _, name := range names {
		if _, ok := l.index[name]; ok || strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue
		}
		if name == "lm_head.weight" && cfg.TieEmbeddings {
			continue
		}
		return extraTensor(name, src, cfg)
	}
	return nil
}

// extraTensor is the error for a tensor name the config does not describe.
func extraTensor(name string, src weightFiles, cfg Config) error {
	return fmt.Errorf("%w: tensor %q in %s is not described by config.json (%d layers, tie_word_embeddings %t)",
		ErrCheckpoint, name, src.what(), cfg.Layers, cfg.TieEmbeddings)
}
