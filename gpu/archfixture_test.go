package gpu

import (
	"encoding/json"
	"math"
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
		fx := readArchFixture(t, tc.name)
		worst := compareFixtureScores(t, tc.name+" model", fx, m.Score)
		worst = max(worst, compareFixtureScores(t, tc.name+" learner", fx, l.Score))
		t.Logf("%s: worst difference from the peer %.3g", tc.name, worst)
	}
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
