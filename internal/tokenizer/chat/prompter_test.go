package chat

import (
	"slices"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/internal/tokenizer"
)

func TestPrompterChar(t *testing.T) {
	tok := tokenizer.NewChar()
	p, err := NewPrompter(tok, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Encode("1+2=")
	want, _ := tok.EncodePrompt("1+2=")
	if err != nil || !slices.Equal(got, want) || got[0] != tok.BOS() {
		t.Errorf("Encode = %v, %v; want %v (BOS first)", got, err, want)
	}
	for _, c := range []struct{ name, system, wantSub string }{
		{ChatML, "", "needs a Hugging Face tokenizer"},
		{"", "be brief", "needs a prompt template"},
		{"alpaca", "", "needs a Hugging Face tokenizer"},
	} {
		if _, err := NewPrompter(tok, c.name, c.system); err == nil || !strings.Contains(err.Error(), c.wantSub) {
			t.Errorf("NewPrompter(%q, %q) error = %v, want %q", c.name, c.system, err, c.wantSub)
		}
	}
}

func TestBuiltinTemplates(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: " 12+7= "}}
	cases := map[string]string{
		Llama3: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n12+7=<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
		ChatML: "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n 12+7= <|im_end|>\n<|im_start|>assistant\n",
	}
	for name, want := range cases {
		tmpl, err := Parse(builtins[name])
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Render(msgs, Vars{BOS: "<|begin_of_text|>", EOS: "<|eot_id|>", AddGenerationPrompt: true})
		if err != nil || got != want {
			t.Errorf("%s:\n got  %q, %v\n want %q", name, got, err, want)
		}
	}
}
