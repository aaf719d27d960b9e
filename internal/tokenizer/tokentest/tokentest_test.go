package tokentest_test

import (
	"testing"

	"github.com/mgrpo/mgrpo/internal/tokenizer"
	"github.com/mgrpo/mgrpo/internal/tokenizer/chat"
	"github.com/mgrpo/mgrpo/internal/tokenizer/tokentest"
)

// TestWriteLoads: the written tokenizer loads with its special tokens and
// chat template, encodes any text (bytes included) and decodes it back.
func TestWriteLoads(t *testing.T) {
	dir := t.TempDir()
	n, err := tokentest.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name() != tokenizer.HFName || tok.VocabSize() != n || tok.EOS() != n-1 || tok.PAD() != n-3 || tok.BOS() >= 0 {
		t.Fatalf("loaded %s of %d ids (want %d), BOS %d EOS %d PAD %d", tok.Name(), tok.VocabSize(), n, tok.BOS(), tok.EOS(), tok.PAD())
	}
	for _, s := range []string{"the ann has 3 pens #### 5", "café ☕ \x01\tend"} {
		ids, err := tok.Encode(s)
		if err != nil || tok.Decode(ids) != s {
			t.Errorf("%q: ids %v, decoded %q, err %v", s, ids, tok.Decode(ids), err)
		}
	}
	p, err := chat.NewPrompter(tok, "tokenizer", "Be brief.")
	if err != nil {
		t.Fatal(err)
	}
	text, err := p.Text("1+1=")
	if want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n1+1=<|im_end|>\n<|im_start|>assistant\n"; err != nil || text != want {
		t.Errorf("templated prompt %q, %v; want %q", text, err, want)
	}
}
