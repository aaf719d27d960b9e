package hfconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// RopeLlama3 is the rope_type of Llama 3.x's frequency scaling, the one
// scaled RoPE read here.
const RopeLlama3 = "llama3"

// RopeScaling is a rope_scaling of rope_type "llama3" (Llama 3.1, 3.2,
// 3.3): transformers' rope_utils scale every RoPE frequency whose
// wavelength exceeds OriginalMaxPositionEmbeddings/LowFreqFactor by
// 1/Factor, keep those under OriginalMaxPositionEmbeddings/HighFreqFactor,
// and interpolate between.
type RopeScaling struct {
	// RopeType is RopeLlama3 (older configs call the key "type").
	RopeType string `json:"rope_type"`
	// Factor divides the low frequencies; at least 1.
	Factor float64 `json:"factor"`
	// LowFreqFactor: frequencies of wavelength above
	// OriginalMaxPositionEmbeddings/LowFreqFactor are divided by Factor.
	LowFreqFactor float64 `json:"low_freq_factor"`
	// HighFreqFactor (above LowFreqFactor): frequencies of wavelength
	// under OriginalMaxPositionEmbeddings/HighFreqFactor are kept.
	HighFreqFactor float64 `json:"high_freq_factor"`
	// OriginalMaxPositionEmbeddings is the context the model was
	// pre-trained with before its context was extended.
	OriginalMaxPositionEmbeddings int `json:"original_max_position_embeddings"`
}

// MarshalJSON writes the factors as Python floats (32.0, not 32), as
// transformers writes them and its validation expects.
func (s RopeScaling) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		RopeType       string          `json:"rope_type"`
		Factor         json.RawMessage `json:"factor"`
		LowFreqFactor  json.RawMessage `json:"low_freq_factor"`
		HighFreqFactor json.RawMessage `json:"high_freq_factor"`
		Original       int             `json:"original_max_position_embeddings"`
	}{s.RopeType, pyFloat(s.Factor), pyFloat(s.LowFreqFactor), pyFloat(s.HighFreqFactor), s.OriginalMaxPositionEmbeddings})
}

// pyFloat writes x as JSON with a decimal point when it is integral.
func pyFloat(x float64) json.RawMessage {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if x == math.Trunc(x) && !math.IsInf(x, 0) && math.Abs(x) < 1e21 {
		s = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return json.RawMessage(s)
}

// parseRopeScaling reads the RoPE settings object under key (rope_scaling,
// or transformers 5's rope_parameters): nil for null, an absent key or
// rope_type "default"; a RopeScaling for rope_type "llama3" with all four
// of its fields; an error naming the key for anything else.
func parseRopeScaling(key string, raw json.RawMessage) (*RopeScaling, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: %s = %s: want an object or null", ErrInvalid, key, compact(raw))
	}
	typ, err := ropeType(key, m)
	if err != nil || typ == "default" {
		return nil, err
	}
	if typ != RopeLlama3 {
		return nil, fmt.Errorf("%w: %s.rope_type = %q: only %q scaling is supported", ErrInvalid, key, typ, RopeLlama3)
	}
	s := &RopeScaling{RopeType: typ}
	var orig float64
	for _, f := range []struct {
		name string
		dst  *float64
	}{{"factor", &s.Factor}, {"low_freq_factor", &s.LowFreqFactor}, {"high_freq_factor", &s.HighFreqFactor},
		{"original_max_position_embeddings", &orig}} {
		v, ok := m[f.name]
		if !ok || string(v) == "null" {
			return nil, fmt.Errorf("%w: %s.%s is missing (rope_type %q needs it)", ErrInvalid, key, f.name, typ)
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return nil, fmt.Errorf("%w: %s.%s = %s: want a number", ErrInvalid, key, f.name, compact(v))
		}
	}
	if orig != math.Trunc(orig) || math.Abs(orig) > float64(MaxPositions) {
		return nil, fmt.Errorf("%w: %s.original_max_position_embeddings = %g: want an integer of at most %d", ErrInvalid, key, orig, MaxPositions)
	}
	s.OriginalMaxPositionEmbeddings = int(orig)
	return s, nil
}

// ropeType returns the rope_type of a RoPE settings object, read from
// "rope_type" or (older configs) "type"; "default" when neither is there
// in rope_parameters. Both present and different is refused: transformers
// versions disagree on which wins.
func ropeType(key string, m map[string]json.RawMessage) (string, error) {
	var names [2]string
	for i, k := range []string{"rope_type", "type"} {
		v, ok := m[k]
		if !ok {
			continue
		}
		if err := json.Unmarshal(v, &names[i]); err != nil {
			return "", fmt.Errorf("%w: %s.%s = %s: want a string", ErrInvalid, key, k, compact(v))
		}
	}
	switch {
	case names[0] != "" && names[1] != "" && names[0] != names[1]:
		return "", fmt.Errorf("%w: %s.rope_type = %q but %s.type = %q", ErrInvalid, key, names[0], key, names[1])
	case names[0] != "":
		return names[0], nil
	case names[1] != "":
		return names[1], nil
	case key == "rope_parameters":
		return "default", nil
	}
	return "", fmt.Errorf("%w: %s.rope_type is missing", ErrInvalid, key)
}

// validate checks what the llama3 rule divides by and compares with.
func (s RopeScaling) validate(key string) error {
	bad := func(field string, val any, why string) error {
		return fmt.Errorf("%w: %s.%s = %v: %s", ErrInvalid, key, field, val, why)
	}
	switch {
	case s.RopeType != RopeLlama3:
		return bad("rope_type", strconv.Quote(s.RopeType), fmt.Sprintf("only %q scaling is supported", RopeLlama3))
	case !(s.Factor >= 1) || math.IsInf(s.Factor, 0):
		return bad("factor", s.Factor, "must be at least 1")
	case !(s.LowFreqFactor > 0) || math.IsInf(s.LowFreqFactor, 0):
		return bad("low_freq_factor", s.LowFreqFactor, "must be positive")
	case !(s.HighFreqFactor > s.LowFreqFactor) || math.IsInf(s.HighFreqFactor, 0):
		return bad("high_freq_factor", s.HighFreqFactor, fmt.Sprintf("must be above low_freq_factor %g", s.LowFreqFactor))
	case s.OriginalMaxPositionEmbeddings < 1:
		return bad("original_max_position_embeddings", s.OriginalMaxPositionEmbeddings, "must be positive")
	}
	return nil
}
