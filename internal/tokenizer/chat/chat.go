// Package chat turns a task's prompt into the chat format an instruction
// model was trained on: a built-in template (Llama 3's header format or
// ChatML) or the chat_template a checkpoint's tokenizer_config.json
// carries, rendered by a Jinja subset, and a Prompter that encodes the
// result as Hugging Face's apply_chat_template(..., tokenize=True) does.
//
// The Jinja subset covers what chat templates use: {{ }}, {% if/elif/else
// %}, {% for x in xs [if c] %} with loop.*, break and continue, {% set %}
// (namespace attributes too), {% generation %}, whitespace control with
// transformers' trim_blocks and lstrip_blocks, literals, lists and dicts,
// attribute, item and slice access, + - * / // % ** ~, comparisons, in,
// and/or/not, conditional expressions, "is" tests (defined, none, string,
// mapping, ...), the filters trim, upper, lower, length, first, last,
// join, default, tojson, items, int, replace, string, capitalize, the
// string methods strip, startswith, split, ... and the globals
// raise_exception, range, namespace and strftime_now. Anything else is an
// error naming it when the template is parsed or rendered, never silently
// different output (TestLongMatchesJinja2 compares with Python's jinja2).
package chat

import (
	"fmt"
	"strings"

	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

// Template is a parsed chat template; it is immutable and safe for
// concurrent use.
type Template struct {
	nodes []node
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
}

// Vars are the template variables besides the messages.
type Vars struct {
	// BOS and EOS are the text of the tokenizer's special tokens
	// (bos_token, eos_token).
	BOS, EOS string
	// AddGenerationPrompt ends the text with the assistant's header, so
	// that the model writes the answer next.
	AddGenerationPrompt bool
}

// Parse reads a Jinja chat template.
func Parse(src string) (*Template, error) {
	segs, err := split(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	b := &builder{segs: segs}
	nodes, _, _, err := b.parseBody()
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return &Template{nodes: nodes}, nil
}

// Render returns the text of the conversation.
func (t *Template) Render(messages []Message, v Vars) (string, error) {
	msgs := make([]any, len(messages))
	for i, m := range messages {
		d := newDict()
		d.set("role", m.Role)
		d.set("content", m.Content)
		msgs[i] = d
	}
	g := globals()
	g["messages"] = msgs
	g["bos_token"] = v.BOS
	g["eos_token"] = v.EOS
	g["add_generation_prompt"] = v.AddGenerationPrompt
	e := &env{scopes: []map[string]any{g}}
	e.push()
	var out strings.Builder
	if err := renderAll(t.nodes, e, &out); err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out.String(), nil
}

// Built-in templates (task.prompt_template).
const (
	// Llama3 is Llama 3 Instruct's header format.
	Llama3 = "llama3"
	// ChatML is <|im_start|>role ... <|im_end|> (Qwen, SmolLM2, ...).
	ChatML = "chatml"
	// FromTokenizer is the tokenizer's own chat_template.
	FromTokenizer = "tokenizer"
)

var builtins = map[string]string{
	Llama3: "{{ bos_token }}{% for message in messages %}" +
		"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}" +
		"{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
	ChatML: "{% for message in messages %}" +
		"{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}" +
		"{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
}

// Prompter encodes a task's prompts as the policy reads them: wrapped by
// a chat template as one user turn (after an optional system turn), or as
// plain text with the tokenizer's special tokens (EncodePrompt) when
// there is no template. It is immutable and safe for concurrent use.
type Prompter struct {
	tok    tokenizer.Tokenizer
	tmpl   *Template
	system string
	vars   Vars
}

// NewPrompter returns the Prompter of tok for the template name: "" for
// none, Llama3, ChatML, or FromTokenizer (the tokenizer's chat_template).
// A system prompt needs a template. The template's special tokens must be
// tokens of tok.
func NewPrompter(tok tokenizer.Tokenizer, name, system string) (*Prompter, error) {
	p := &Prompter{tok: tok, system: system}
	if name == "" {
		if system != "" {
			return nil, fmt.Errorf("a system prompt needs a prompt template")
		}
		return p, nil
	}
	texts, ok := tok.(interface {
		Token(id int) string
	})
	if !ok || tok.Name() == tokenizer.CharName {
		return nil, fmt.Errorf("prompt template %q needs a Hugging Face tokenizer (the %s tokenizer has no chat format)", name, tok.Name())
	}
	src, ok := builtins[name]
	if name == FromTokenizer {
		ct, _ := tok.(interface{ ChatTemplate() string })
		if ct == nil || ct.ChatTemplate() == "" {
			return nil, fmt.Errorf("prompt template %q: the tokenizer has no chat_template (in tokenizer_config.json or chat_template.jinja)", name)
		}
		src, ok = ct.ChatTemplate(), true
	}
	if !ok {
		return nil, fmt.Errorf("prompt template %q: want %q, %q or %q", name, Llama3, ChatML, FromTokenizer)
	}
	tmpl, err := Parse(src)
	if err != nil {
		return nil, fmt.Errorf("prompt template %q: %w", name, err)
	}
	p.tmpl = tmpl
	p.vars = Vars{EOS: texts.Token(tok.EOS()), AddGenerationPrompt: true}
	if tok.BOS() >= 0 {
		p.vars.BOS = texts.Token(tok.BOS())
	}
	if _, err := p.Encode("1+1="); err != nil { // a template that cannot render fails now
		return nil, fmt.Errorf("prompt template %q: %w", name, err)
	}
	return p, nil
}

// Text returns the prompt as the template renders it (the prompt itself
// without a template).
func (p *Prompter) Text(prompt string) (string, error) {
	if p.tmpl == nil {
		return prompt, nil
	}
	var msgs []Message
	if p.system != "" {
		msgs = append(msgs, Message{Role: "system", Content: p.system})
	}
	msgs = append(msgs, Message{Role: "user", Content: prompt})
	return p.tmpl.Render(msgs, p.vars)
}

// Encode returns the ids of the prompt as the policy reads it. With a
// template the rendered text is encoded without adding special tokens
// (the template writes them, BOS included), as apply_chat_template does.
func (p *Prompter) Encode(prompt string) ([]int, error) {
	if p.tmpl == nil {
		return p.tok.EncodePrompt(prompt)
	}
	text, err := p.Text(prompt)
	if err != nil {
		return nil, err
	}
	return p.tok.Encode(text)
}
