package tokenizer

import (
	"slices"
	"testing"

	"github.com/dlclark/regexp2"
)

// splitPatterns are the split regexes of the reference files (GPT-2's
// ByteLevel, Llama 3, Qwen3, GPT-4o, DeepSeek-V3's three).
var splitPatterns = []string{
	gpt2Pattern,
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	`\p{N}{1,3}`,
	"[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
	`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

// TestFastRegexMatchesRegexp2: the real split patterns translate to Go's
// regexp and find the same spans as regexp2 (Oniguruma's semantics) on the
// reference corpus; patterns the translation cannot carry exactly stay
// with regexp2.
func TestFastRegexMatchesRegexp2(t *testing.T) {
	corpus := referenceCorpus(3000)
	for _, pat := range splitPatterns {
		fast, ok := translateRegex(pat)
		if !ok {
			t.Errorf("%q does not translate", pat)
			continue
		}
		re, err := regexp2.Compile(pat, regexp2.None)
		if err != nil {
			t.Fatal(err)
		}
		slow := pattern{re: re}
		for _, s := range corpus {
			s = validUTF8(s)
			if got, want := fast.find(s), slow.find(s); !slices.Equal(got, want) {
				t.Errorf("%q on %q:\n got  %v\n want %v", pat, s, got, want)
				break
			}
		}
	}
	for _, pat := range []string{`\d+`, `\w+`, `a(?=b)`, `[^\S]+`, `\s+(?!\S)|x|\s+`, `\bfoo`, `a++`, `\u00e9`} {
		if _, ok := translateRegex(pat); ok {
			t.Errorf("%q translated, want regexp2", pat)
		}
	}
}
