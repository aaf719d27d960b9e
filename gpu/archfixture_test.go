package gpu

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mgrpo/mgrpo/gpu/hfconfig"
	"github.com/mgrpo/mgrpo/gpu/safetensors"
)

// archFixtureDir holds the peer's Qwen2, Qwen3 and llama3-RoPE checkpoints
// and scores (testdata/qwen/README.md).
const archFixtureDir = "testdata/qwen"

// archFixture is a fixture's scores.json.
type archFixture struct {
	InvFreq []float64 `json:"inv_freq"`
	Runs    []struct {
		Temperature float64 `json:"temperature"`
		Sequences   []struct {
			Prompt     []int     `json:"prompt"`
			Completion []int     `json:"completion"`
			LogProbs   []float64 `json:"logprobs"`
			Entropy    []float64 `json:"entropy"`
		} `json:"sequences"`
	} `json:"runs"`
}

func readArchFixture(t *testing.T, name string) archFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(archFixtureDir, name, "scores.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx archFixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return fx
}

// archFixtures lists the fixtures and the Config each config.json must
// give.
var archFixtures = []struct {
	name string
	want Config
}{
	{"qwen2-tied", Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, MLP: 32, Context: 64,
		RopeTheta: 1e6, NormEps: 1e-6, TieEmbeddings: true, Arch: ArchQwen2}},
	{"qwen2-untied", Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 32, Context: 64,
		RopeTheta: 10000, NormEps: 1e-6, Arch: ArchQwen2}},
	{"qwen3", Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, MLP: 32, Context: 64,
		RopeTheta: 1e6, NormEps: 1e-6, TieEmbeddings: true, Arch: ArchQwen3, HeadWidth: 12}},
	{"llama3-rope", Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 2, KVHeads: 2, MLP: 32, Context: 64,
		RopeTheta: 100, NormEps: 1e-6, RopeScaling: RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 32}}},
	// head widths the CUDA engine's attention takes (TestCUDAArchFixtureParity)
	{"qwen2-e16", Config{Vocab: 32, Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1, MLP: 32, Context: 64,
		RopeTheta: 1e6, NormEps: 1e-6, TieEmbeddings: true, Arch: ArchQwen2}},
	{"qwen3-e32", Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, MLP: 32, Context: 64,
		RopeTheta: 1e6, NormEps: 1e-6, Arch: ArchQwen3, HeadWidth: 32}},
	{"llama3-rope-e16", Config{Vocab: 32, Hidden: 32, Layers: 2, Heads: 2, KVHeads: 1, MLP: 32, Context: 64,
		RopeTheta: 100, NormEps: 1e-6, RopeScaling: RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 32}}},
}

// TestArchFixtures reads each fixture's config.json through hfconfig into
// a Config, checks that the layout names and shapes exactly the tensors
// the peer wrote, that ropeFreqs gives the frequencies the peer scored
// with, and that scores.json is complete.
func TestArchFixtures(t *testing.T) {
	for _, tc := range archFixtures {
		dir := filepath.Join(archFixtureDir, tc.name)
		h, err := hfconfig.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := tc.want.Arch; want != "" && (h.ModelType != want || !slices.Equal(h.Architectures, []string{hfconfig.CausalLM(want)})) {
			t.Errorf("%s: model_type %q, architectures %v", tc.name, h.ModelType, h.Architectures)
		}
		c, err := ConfigFromHF(h)
		if err != nil || c != tc.want {
			t.Errorf("%s: Config %+v, %v\nwant %+v", tc.name, c, err, tc.want)
			continue
		}
		checkFixtureTensors(t, dir, c)
		fx := readArchFixture(t, tc.name)
		freqs := ropeFreqs(c.HeadDim(), c.RopeTheta, c.RopeScaling)
		if len(freqs) != len(fx.InvFreq) {
			t.Fatalf("%s: %d frequencies, the peer's %d", tc.name, len(freqs), len(fx.InvFreq))
		}
		for i, f := range freqs {
			if math.Abs(f-fx.InvFreq[i]) > 1e-12*f {
				t.Errorf("%s: frequency %d = %.17g, the peer's %.17g", tc.name, i, f, fx.InvFreq[i])
			}
		}
		checkFixtureScores(t, tc.name, c, fx)
	}
}

// checkFixtureTensors compares the layout of c with the tensors of the
// fixture's model.safetensors: the same names, shapes and total size.
func checkFixtureTensors(t *testing.T, dir string, c Config) {
	t.Helper()
	f, err := safetensors.Read(filepath.Join(dir, WeightsFileName))
	if err != nil {
		t.Fatal(err)
	}
	l := newLayout(c)
	names := f.Tensors()
	if len(names) != len(l.specs) {
		t.Errorf("%s: %d tensors in the file, %d in the layout", dir, len(names), len(l.specs))
	}
	total := 0
	for _, name := range names {
		info, _ := f.Info(name)
		i, ok := l.index[name]
		if !ok || !slices.Equal(info.Shape, l.specs[i].Shape) {
			t.Errorf("%s: tensor %s %v is not in the layout as such", dir, name, info.Shape)
			continue
		}
		total += l.specs[i].Size()
	}
	if total != c.NumParams() || float64(total) != c.params() {
		t.Errorf("%s: the file holds %d weights, NumParams %d, params %g", dir, total, c.NumParams(), c.params())
	}
}

// checkFixtureScores checks that scores.json holds both temperatures, a
// log-prob and an entropy per completion token, each in range.
func checkFixtureScores(t *testing.T, name string, c Config, fx archFixture) {
	t.Helper()
	if len(fx.Runs) != 2 || fx.Runs[0].Temperature != 1 || fx.Runs[1].Temperature != 0.7 {
		t.Fatalf("%s: %d runs, want temperatures 1 and 0.7", name, len(fx.Runs))
	}
	for _, run := range fx.Runs {
		if len(run.Sequences) != 3 {
			t.Errorf("%s: %d sequences at T = %g, want 3", name, len(run.Sequences), run.Temperature)
		}
		for _, s := range run.Sequences {
			n := len(s.Completion)
			if len(s.LogProbs) != n || len(s.Entropy) != n || len(s.Prompt)+n > c.Context {
				t.Errorf("%s: %d prompt and %d completion tokens, %d log-probs, %d entropies", name, len(s.Prompt), n, len(s.LogProbs), len(s.Entropy))
			}
			for j := range min(n, len(s.LogProbs), len(s.Entropy)) {
				if lp, h := s.LogProbs[j], s.Entropy[j]; !(lp <= 0) || !(h >= 0 && h <= math.Log(float64(c.Vocab))+1e-5) {
					t.Errorf("%s: token %d: log-prob %g, entropy %g", name, j, lp, h)
				}
			}
		}
	}
}

// TestArchFixtureParity scores each fixture's sequences with the model
// loaded from its checkpoint, and with a learner made from it (the
// training pass's forward), and compares with the peer's log-probs and
// entropies, within 1e-4 per token.
func TestArchFixtureParity(t *testing.T) {
	for _, tc := range archFixtures {
		m, err := LoadModel(filepath.Join(archFixtureDir, tc.name))
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewLearner(m, DefaultLearnerConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: worst difference from the peer %.3g", tc.name, fixtureParity(t, tc.name, m, l))
	}
}

// fixtureParity compares model m's and learner l's scores of fixture
// name's sequences with the peer's (compareFixtureScores) and returns the
// largest difference.
func fixtureParity(t *testing.T, name string, m *Model, l *Learner) float64 {
	t.Helper()
	fx := readArchFixture(t, name)
	worst := compareFixtureScores(t, name+" model", fx, m.Score)
	return max(worst, compareFixtureScores(t, name+" learner", fx, l.Score))
}

// compareFixtureScores scores every run of fx with score and fails the
// test where a token's log-prob or entropy is more than 1e-4 from the
// fixture's; it returns the largest difference.
func compareFixtureScores(t *testing.T, name string, fx archFixture, score func([]Sequence, float64) ([]TokenScores, error)) float64 {
	t.Helper()
	worst := 0.0
	for _, run := range fx.Runs {
		seqs := make([]Sequence, len(run.Sequences))
		for i, s := range run.Sequences {
			seqs[i] = Sequence{Prompt: s.Prompt, Completion: s.Completion}
		}
		got, err := score(seqs, run.Temperature)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range run.Sequences {
			if len(got[i].LogProbs) != len(s.LogProbs) {
				t.Fatalf("%s: sequence %d: %d scores, the fixture has %d", name, i, len(got[i].LogProbs), len(s.LogProbs))
			}
			for j := range s.LogProbs {
				d := max(math.Abs(got[i].LogProbs[j]-s.LogProbs[j]), math.Abs(got[i].Entropies[j]-s.Entropy[j]))
				worst = max(worst, d)
				if d > 1e-4 {
					t.Errorf("%s T=%g sequence %d token %d: log-prob %g entropy %g, the peer's %g %g", name, run.Temperature, i, j,
						got[i].LogProbs[j], got[i].Entropies[j], s.LogProbs[j], s.Entropy[j])
				}
			}
		}
	}
	return worst
}

// mgrpoFixtures are checkpoints that SaveCheckpoint writes and the peer
// scores (make-fixtures.sh: TestWriteMgrpoFixtures writes them, the
// peer's scores.json goes beside them): the other direction of the
// parity, which tests the files mgrpo writes as much as its model.
var mgrpoFixtures = []struct {
	name string
	cfg  Config
	seed uint64
}{
	{"mgrpo-qwen2", Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 32, Context: 64,
		RopeTheta: 1e6, NormEps: 1e-6, Arch: ArchQwen2}, 11},
	{"mgrpo-qwen3", Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 4, KVHeads: 2, MLP: 32, Context: 64,
		RopeTheta: 1e6, NormEps: 1e-6, TieEmbeddings: true, Arch: ArchQwen3, HeadWidth: 8}, 12},
	{"mgrpo-llama3-rope", Config{Vocab: 32, Hidden: 16, Layers: 2, Heads: 2, KVHeads: 1, MLP: 32, Context: 64,
		RopeTheta: 100, NormEps: 1e-6, RopeScaling: RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 32}}, 13},
}

// writeMgrpoFixture writes, with SaveCheckpoint, a model of cfg whose
// weights are drawn as the peer's `init --std 0.2 --norm-jitter 0.1`
// draws them (every matrix and bias ~ N(0, 0.2²), norm weights 1 +
// N(0, 0.1²)) from a PCG stream seeded with seed.
func writeMgrpoFixture(t *testing.T, dir string, cfg Config, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x7065_6572))
	w := make([]float32, cfg.NumParams())
	for _, s := range newLayout(cfg).specs {
		for i := s.Offset; i < s.Offset+s.Size(); i++ {
			if s.Norm {
				w[i] = float32(1 + 0.1*rng.NormFloat64())
			} else {
				w[i] = float32(0.2 * rng.NormFloat64())
			}
		}
	}
	m, err := NewModelFromWeights(cfg, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := SaveCheckpoint(dir, m, nil); err != nil {
		t.Fatal(err)
	}
}

// TestWriteMgrpoFixtures writes the mgrpoFixtures checkpoints into the
// directory MGRPO_WRITE_FIXTURES names (make-fixtures.sh sets it); it is
// skipped otherwise.
func TestWriteMgrpoFixtures(t *testing.T) {
	dir := os.Getenv("MGRPO_WRITE_FIXTURES")
	if dir == "" {
		t.Skip("MGRPO_WRITE_FIXTURES is not set: nothing to write (make-fixtures.sh sets it)")
	}
	for _, fx := range mgrpoFixtures {
		writeMgrpoFixture(t, filepath.Join(dir, fx.name), fx.cfg, fx.seed)
	}
}

// TestMgrpoFixtureParity: each committed mgrpo checkpoint is byte for
// byte what SaveCheckpoint writes today (so that the peer's scores are of
// today's files; rerun make-fixtures.sh after changing the format), its
// config.json says the model type, and mgrpo's scores of it are the
// peer's within 1e-4 per token.
func TestMgrpoFixtureParity(t *testing.T) {
	for _, fx := range mgrpoFixtures {
		dir, now := filepath.Join(archFixtureDir, fx.name), t.TempDir()
		writeMgrpoFixture(t, now, fx.cfg, fx.seed)
		for _, file := range []string{hfconfig.FileName, WeightsFileName} {
			want, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(now, file)); !bytes.Equal(got, want) {
				t.Errorf("%s: SaveCheckpoint no longer writes the committed %s: rerun gpu/testdata/qwen/make-fixtures.sh", fx.name, file)
			}
		}
		checkHFFiles(t, dir, fx.cfg)
		m, err := LoadModel(dir)
		if err != nil {
			t.Fatal(err)
		}
		if m.Config() != fx.cfg {
			t.Errorf("%s: loads as %+v, want %+v", fx.name, m.Config(), fx.cfg)
		}
		worst := compareFixtureScores(t, fx.name, readArchFixture(t, fx.name), m.Score)
		t.Logf("%s: worst difference from the peer %.3g", fx.name, worst)
	}
}
