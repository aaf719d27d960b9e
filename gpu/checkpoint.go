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

// LoadModel reads config.json and model.safetensors of a checkpoint. A
// missing tensor, a shape mismatch, a NaN or infinite weight, a tensor config.json does not describe
// (say a third layer when num_hidden_layers is 2), a corrupt file, or a
// model larger than the memory available gives one error naming it.
func LoadModel(dir string) (*Model, error) {
	wrap := func(err error) error { return fmt.Errorf("load checkpoint %s: %w", dir, err) }
	cfg, err := ReadCheckpointConfig(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, WeightsFileName)
	if fi, err := os.Stat(path); err == nil {
		need := toBytes(float64(fi.Size()) + cfg.modelBytes())
		if err := CheckMemory("loading "+WeightsFileName+" and the model", need); err != nil {
			return nil, wrap(err)
		}
	}
	f, err := safetensors.Read(path)
	if err != nil {
		return nil, wrap(err)
	}
	if err := checkExtraTensors(f, cfg); err != nil {
		return nil, wrap(err)
	}
	w := make([]float32, cfg.NumParams())
	for _, s := range newLayout(cfg).specs {
		info, ok := f.Info(s.Name)
		if !ok {
			return nil, wrap(fmt.Errorf("%w: tensor %q missing from %s", ErrCheckpoint, s.Name, WeightsFileName))
		}
		if !slices.Equal(info.Shape, s.Shape) {
			return nil, wrap(fmt.Errorf("%w: tensor %q has shape %v, config.json needs %v", ErrCheckpoint, s.Name, info.Shape, s.Shape))
		}
		v, _, err := f.Float32(s.Name)
		if err != nil {
			return nil, wrap(err)
		}
		for i, x := range v { // a NaN weight makes every output NaN: refuse it here, by name
			if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, wrap(fmt.Errorf("%w: tensor %q holds %v at index %d", ErrCheckpoint, s.Name, x, i))
			}
		}
		copy(w[s.Offset:], v)
	}
	var version int64
	if v, ok := f.Metadata()[metaVersion]; ok {
		if version, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, wrap(fmt.Errorf("%w: metadata %s = %q", ErrCheckpoint, metaVersion, v))
		}
	}
	return newModel(cfg, w, version), nil
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

// checkExtraTensors refuses a weights file holding a tensor that the
// config does not describe (the first in name order), so that a config.json
// with too few layers cannot load a model silently cut short. RoPE
// inverse-frequency buffers of older Hugging Face checkpoints are ignored,
// as is an lm_head equal to the embeddings of a tied model.
func checkExtraTensors(f *safetensors.File, cfg Config) error {
	l := newLayout(cfg)
	names := f.Tensors()
	slices.Sort(names)
	for _, name := range names {
		if _, ok := l.index[name]; ok || strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue
		}
		if name == "lm_head.weight" && cfg.TieEmbeddings && sameTensor(f, name, "model.embed_tokens.weight") {
			continue
		}
		return fmt.Errorf("%w: tensor %q in %s is not described by config.json (%d layers, tie_word_embeddings %t)",
			ErrCheckpoint, name, WeightsFileName, cfg.Layers, cfg.TieEmbeddings)
	}
	return nil
}

// sameTensor reports whether tensors a and b of f have equal shapes and
// values.
func sameTensor(f *safetensors.File, a, b string) bool {
	va, sa, errA := f.Float32(a)
	vb, sb, errB := f.Float32(b)
	return errA == nil && errB == nil && slices.Equal(sa, sb) && slices.Equal(va, vb)
}
