package actors

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
)

// modelConfig resolves the policy's dimensions for the built-in tokenizer:
// the preset's (gpu.Preset, the one preset table), overridden by every
// non-zero explicit dimension; model.kv_heads 0 means model.heads. A
// preset gpu does not know, dimensions no model can have, and a
// completion that leaves no room for the prompt in the context are
// refused as the configuration errors they are (config validates every
// other key without knowing the presets).
func modelConfig(m config.Model, completionLen int) (gpu.Config, error) {
	c := gpu.Config{Vocab: gpu.PresetVocab, NormEps: 1e-6}
	if m.Preset != "" {
		p, err := gpu.Preset(m.Preset)
		if err != nil {
			names := append(gpu.PresetNames(), "")
			for i, n := range names {
				names[i] = strconv.Quote(n)
			}
			return gpu.Config{}, &config.Error{Key: "model.preset", Value: strconv.Quote(m.Preset),
				Reason: "must be one of " + strings.Join(names, ", "), Err: config.ErrRange}
		}
		c = p
	}
	for _, o := range []struct {
		dst *int
		v   int
	}{{&c.Hidden, m.Hidden}, {&c.Layers, m.Layers}, {&c.Heads, m.Heads}, {&c.KVHeads, m.KVHeads}, {&c.MLP, m.MLP}, {&c.Context, m.Context}} {
		if o.v != 0 {
			*o.dst = o.v
		}
	}
	if m.KVHeads == 0 && (m.Preset == "" || m.Heads != 0) {
		c.KVHeads = c.Heads
	}
	c.RopeTheta, c.TieEmbeddings = m.RopeTheta, m.TieEmbeddings
	return c, checkModel(c, completionLen)
}

// checkModel refuses dimensions of a resolved model that no model can
// have, naming the key to change, and a completion length that leaves no
// room for the prompt.
func checkModel(c gpu.Config, completionLen int) error {
	conflict := func(key string, value int, reason string) error {
		return &config.Error{Key: key, Value: strconv.Itoa(value), Reason: reason, Err: config.ErrConflict}
	}
	switch {
	case c.Hidden%c.Heads != 0:
		return conflict("model.hidden", c.Hidden, fmt.Sprintf("must be a multiple of model.heads (%d)", c.Heads))
	case c.Heads%c.KVHeads != 0:
		return conflict("model.kv_heads", c.KVHeads, fmt.Sprintf("must divide model.heads (%d)", c.Heads))
	case (c.Hidden/c.Heads)%2 != 0:
		return conflict("model.hidden", c.Hidden, fmt.Sprintf("head size hidden/heads = %d must be even for RoPE", c.Hidden/c.Heads))
	case completionLen >= c.Context:
		return conflict("generation.max_completion_len", completionLen, fmt.Sprintf("must be below the model context (%d) to leave room for the prompt", c.Context))
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}
