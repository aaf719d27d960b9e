package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkHFEncode encodes the reference corpus with the real tokenizer
// files cached by TestLongReferenceTokenizers (skipped until that test
// has installed them); b.SetBytes makes -bench report MB/s.
func BenchmarkHFEncode(b *testing.B) {
	for _, name := range []string{"llama2", "llama3", "qwen3"} {
		b.Run(name, func(b *testing.B) {
			tok := cachedTokenizer(b, name)
			corpus := referenceCorpus(2000)
			n := 0
			for _, s := range corpus {
				n += len(s)
			}
			b.SetBytes(int64(n))
			b.ResetTimer()
			for range b.N {
				for _, s := range corpus {
					if _, err := tok.Encode(s); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkHFDecode decodes the encoded reference corpus.
func BenchmarkHFDecode(b *testing.B) {
	tok := cachedTokenizer(b, "llama3")
	var ids [][]int
	n := 0
	for _, s := range referenceCorpus(2000) {
		e, _ := tok.Encode(s)
		ids = append(ids, e)
		n += len(s)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for range b.N {
		for _, e := range ids {
			tok.Decode(e)
		}
	}
}

// cachedTokenizer loads one of the reference files from .tools.
func cachedTokenizer(b *testing.B, name string) *HF {
	b.Helper()
	wd, _ := os.Getwd()
	dir := filepath.Join(wd, "..", "..", ".tools", "npm-tokenizers", "node_modules", referenceFiles[name])
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		b.Skipf("%s: run the long reference test first (go test -run TestLongReferenceTokenizers ./gpu/tokenizer)", name)
	}
	tok, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	return tok.(*HF)
}
