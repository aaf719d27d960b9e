package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Files beside tokenizer.json that name the special tokens and the chat
// template; Load reads them and Save copies them.
const (
	TokenizerConfigFile  = "tokenizer_config.json"
	SpecialTokensMapFile = "special_tokens_map.json"
	GenerationConfigFile = "generation_config.json"
	ChatTemplateFile     = "chat_template.jinja"
	modelConfigFile      = "config.json"
	templateSequenceA    = "A"
	maxSpecialFileBytes  = 64 << 20
	errNoEOSExplanation  = "name eos_token in tokenizer_config.json or eos_token_id in generation_config.json"
)

// templateSpecial is an entry of TemplateProcessing's special_tokens.
type templateSpecial struct {
	ID  string `json:"id"`
	IDs []int  `json:"ids"`
}

// postProcessor reads the post_processor: the ids it puts before and after
// a single sequence.
func (t *HF) postProcessor(raw json.RawMessage, where string) (prefix, suffix []int, err error) {
	if isNull(raw) {
		return nil, nil, nil
	}
	c, err := decodeComponent(raw, where)
	if err != nil {
		return nil, nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return nil, nil, nil // offsets only
	case "Sequence":
		for i, r := range c.Processors {
			p, s, err := t.postProcessor(r, fmt.Sprintf("%s.processors[%d]", where, i))
			if err != nil {
				return nil, nil, err
			}
			prefix, suffix = append(p, prefix...), append(suffix, s...)
		}
		return prefix, suffix, nil
	case "TemplateProcessing":
		return templateIDs(c, where)
	}
	return nil, nil, fmt.Errorf("%s.type %q: post-processor %w (supported: TemplateProcessing, ByteLevel, Sequence of them)", where, c.Type, ErrNotSupported)
}

// templateIDs reads the "single" template: special tokens before and
// after sequence A.
func templateIDs(c componentJSON, where string) (prefix, suffix []int, err error) {
	seen := false
	for i, raw := range c.Single {
		var item struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
		}
		if err := json.Unmarshal(raw, &item); err != nil {
			return nil, nil, fmt.Errorf("%s.single[%d]: %v", where, i, err)
		}
		switch {
		case item.Sequence != nil:
			if item.Sequence.ID != templateSequenceA || seen {
				return nil, nil, fmt.Errorf("%s.single[%d]: sequence %q: want sequence A once", where, i, item.Sequence.ID)
			}
			seen = true
		case item.SpecialToken != nil:
			sp, ok := c.SpecialTokens[item.SpecialToken.ID]
			if !ok || len(sp.IDs) == 0 {
				return nil, nil, fmt.Errorf("%s.single[%d]: special token %q has no ids in special_tokens", where, i, item.SpecialToken.ID)
			}
			if seen {
				suffix = append(suffix, sp.IDs...)
			} else {
				prefix = append(prefix, sp.IDs...)
			}
		default:
			return nil, nil, fmt.Errorf("%s.single[%d] = %s: want SpecialToken or Sequence", where, i, raw)
		}
	}
	if !seen {
		return nil, nil, fmt.Errorf("%s.single: no sequence A", where)
	}
	return prefix, suffix, nil
}

// loadHF reads dir/tokenizer.json (data) and the files beside it that name
// the special tokens: BOS, EOS and PAD come from tokenizer_config.json,
// then special_tokens_map.json, then generation_config.json, then
// config.json, the first that names each; the chat template from
// tokenizer_config.json or chat_template.jinja. A tokenizer without an EOS
// is refused: generation could not stop.
func loadHF(dir string, data []byte) (*HF, error) {
	t, err := parseHF(data)
	if err != nil {
		return nil, err
	}
	t.files = map[string][]byte{FileName: data}
	var sources []specialSource
	for _, name := range []string{TokenizerConfigFile, SpecialTokensMapFile, GenerationConfigFile, modelConfigFile} {
		b, err := readOptional(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if b == nil {
			continue
		}
		if name != modelConfigFile {
			t.files[name] = b
		}
		src, err := parseSpecialSource(name, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		sources = append(sources, src)
		if name == TokenizerConfigFile {
			t.chat = src.chatTemplate
		}
	}
	if b, err := readOptional(filepath.Join(dir, ChatTemplateFile)); err != nil {
		return nil, err
	} else if b != nil {
		t.files[ChatTemplateFile] = b
		t.chat = string(b)
	}
	if err := t.resolveSpecials(sources); err != nil {
		return nil, err
	}
	return t, nil
}

// readOptional reads a file, nil when it does not exist.
func readOptional(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxSpecialFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", path, fi.Size(), maxSpecialFileBytes)
	}
	return os.ReadFile(path)
}

// specialSource is what one file says about the special tokens: their
// text (tokenizer_config.json, special_tokens_map.json) or ids
// (generation_config.json, config.json); -1 and "" where it says nothing.
type specialSource struct {
	file         string
	text         [3]string // bos, eos, pad
	id           [3]int
	chatTemplate string
}

var specialKeys = [3]string{"bos", "eos", "pad"}

// parseSpecialSource reads the special-token keys of one file.
func parseSpecialSource(name string, b []byte) (specialSource, error) {
	src := specialSource{file: name, id: [3]int{-1, -1, -1}}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return src, fmt.Errorf("not a JSON object: %w", err)
	}
	for i, k := range specialKeys {
		if raw, ok := obj[k+"_token"]; ok {
			s, err := tokenText(raw)
			if err != nil {
				return src, fmt.Errorf("%s_token: %w", k, err)
			}
			src.text[i] = s
		}
		if raw, ok := obj[k+"_token_id"]; ok && !isNull(raw) {
			var id int
			var ids []int
			if err := json.Unmarshal(raw, &id); err == nil {
				src.id[i] = id
			} else if err := json.Unmarshal(raw, &ids); err == nil && len(ids) > 0 {
				src.id[i] = ids[0]
			} else {
				return src, fmt.Errorf("%s_token_id = %s: want an integer or a list", k, raw)
			}
		}
	}
	if raw, ok := obj["chat_template"]; ok && !isNull(raw) {
		var err error
		if src.chatTemplate, err = chatTemplateText(raw); err != nil {
			return src, err
		}
	}
	return src, nil
}

// tokenText reads a special token written as a string, as an object with
// "content" (an AddedToken), or null ("").
func tokenText(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("%.80s: want a string or an object with \"content\"", raw)
	}
	return *obj.Content, nil
}

// chatTemplateText reads chat_template: a string, or a list of named
// templates of which "default" is taken.
func chatTemplateText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("chat_template: want a string or a list of {name, template}")
	}
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, nil
		}
	}
	return "", fmt.Errorf("chat_template: a list without a \"default\" template")
}

// resolveSpecials sets BOS, EOS and PAD from the first source that names
// each; a named token must exist.
func (t *HF) resolveSpecials(sources []specialSource) error {
	dst := [3]*int{&t.bos, &t.eos, &t.pad}
	for i, k := range specialKeys {
		for _, src := range sources {
			if src.text[i] != "" {
				id, ok := t.idOf(src.text[i])
				if !ok {
					return fmt.Errorf("%s: %s_token %q is not in tokenizer.json", src.file, k, src.text[i])
				}
				*dst[i] = id
				break
			}
			if src.id[i] >= 0 {
				if src.id[i] >= t.vocabSize {
					return fmt.Errorf("%s: %s_token_id %d is not below the vocabulary size %d", src.file, k, src.id[i], t.vocabSize)
				}
				*dst[i] = src.id[i]
				break
			}
		}
	}
	if t.eos < 0 {
		return fmt.Errorf("no end-of-sequence token: %s", errNoEOSExplanation)
	}
	return nil
}

// idOf is the id of a token's text: an added token or a vocabulary entry.
func (t *HF) idOf(text string) (int, bool) {
	for id, a := range t.added {
		if a.Content == text {
			return id, true
		}
	}
	id, ok := t.model.vocab[text]
	return id, ok
}
