//go:build cuda || cudaemu

package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mgrpo/mgrpo/config"
	"github.com/mgrpo/mgrpo/gpu"
	"github.com/mgrpo/mgrpo/internal/bf16"
	"github.com/mgrpo/mgrpo/messages"
)

// cudaRunConfig is a tiny run of two warm-start and two RL steps with
// every model on the cuda device (the CPU emulator in a cudaemu build): no
// eval or samples, which would only make it slower.
func cudaRunConfig(t *testing.T, mutate func(*config.Config)) *config.Config {
	return runConfig(t, func(c *config.Config) {
		c.Model.Device = "cuda"
		c.Train.WarmStartSteps, c.Train.Steps, c.Train.EvalEvery, c.Train.CheckpointEvery = 2, 2, 0, 0
		c.Output.SampleEvery = 0
		if mutate != nil {
			mutate(c)
		}
	})
}

// TestRunAllOnCUDA runs the default recipe (tiny, a few steps) with
// model.device cuda in one process, twice from one seed: it completes,
// says its models are on the device, records the weight sync, and both
// runs end with the same final weights, byte for byte.
func TestRunAllOnCUDA(t *testing.T) {
	var final [2][]byte
	for i := range final {
		cfg := cudaRunConfig(t, nil)
		var out bytes.Buffer
		if err := Run(context.Background(), cfg, &out); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		if !strings.Contains(out.String(), "models on cuda") {
			t.Errorf("run %d does not say where its models are:\n%s", i, out.String())
		}
		run := filepath.Join(cfg.Output.Dir, "run")
		recs, err := rlRecords(filepath.Join(run, "metrics.jsonl"))
		if err != nil || len(recs) != 2 {
			t.Fatalf("run %d: %d records, err %v; want 2", i, len(recs), err)
		}
		for _, r := range recs {
			if _, ok := r.Values["time/weight_sync_s"]; !ok {
				t.Errorf("run %d step %d: no time/weight_sync_s in %v", i, r.Step, r.Values)
			}
		}
		if final[i], err = os.ReadFile(filepath.Join(run, "checkpoints/step-2/model.safetensors")); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(final[0], final[1]) {
		t.Error("two all-GPU runs of one seed end with different weights")
	}
}

// TestPipelineModelsOnCUDA runs two steps of the actor pipeline with
// every model on the cuda device, the generators' weights handed over in
// memory and as chunks: each model the generators and the reference
// scorer use stays on the device (Model.On returns the model itself),
// and both hand-overs give the same outcomes bit for bit.
func TestPipelineModelsOnCUDA(t *testing.T) {
	dev, err := gpu.OpenDevice("cuda")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	cfg := testConfig(t, func(c *config.Config) { c.Model.Device = "cuda" })
	s := testSettings(t, cfg)
	env := testEnv()
	env.device = dev
	var outs [2][]*Outcome
	for i, chunked := range []bool{false, true} {
		m := cudaModels(t, s, dev)
		opt := s.pipeline
		opt.Generators, opt.ChunkWeights = 2, chunked
		opt.Wrap = func(id string, smp Sampler) Sampler { return onDeviceSampler{t: t, dev: dev, Sampler: smp} }
		p := StartPipeline(s, env, m, testControl(s), opt, nil)
		for n := range int64(2) {
			outs[i] = append(outs[i], plainStep(t, p.Trainer, n))
			if pol := p.Trainer.policy; !isOn(pol, dev) {
				t.Errorf("chunked %v step %d: the learner's snapshot is not on the device", chunked, n)
			}
		}
		p.Stop()
	}
	for n := range outs[0] {
		sameOutcome(t, "chunked vs in memory", outs[1][n], outs[0][n])
	}
}

// cudaModels are testModels on dev: the learner, the policy and the
// reference.
func cudaModels(t *testing.T, s *settings, dev gpu.Device) Models {
	t.Helper()
	m := testModels(t, s)
	l, err := gpu.NewLearner(m.Policy.(*gpu.Model), s.optim.learnerConfig(s.optim.rl, dev))
	if err != nil {
		t.Fatal(err)
	}
	policy, ref, err := onDevice(dev, m.Policy.(*gpu.Model), m.Reference.(*gpu.Model))
	if err != nil {
		t.Fatal(err)
	}
	if !isOn(policy, dev) || !isOn(ref, dev) {
		t.Fatal("onDevice left a model on the host")
	}
	return Models{Learner: l, Policy: policy, Reference: ref}
}

// isOn reports whether m's weights live on dev.
func isOn(m Sampler, dev gpu.Device) bool {
	g, ok := m.(*gpu.Model)
	if !ok {
		return false
	}
	on, err := g.On(dev)
	return err == nil && on == g
}

// onDeviceSampler fails its test when a generator samples with a model
// that is not on dev.
type onDeviceSampler struct {
	Sampler
	t   *testing.T
	dev gpu.Device
}

func (s onDeviceSampler) Sample(prompts [][]int, n int, opt gpu.SampleOptions) ([]gpu.Sample, error) {
	if !isOn(s.Sampler, s.dev) {
		s.t.Errorf("a generator samples with a model off the device (%T)", s.Sampler)
	}
	return s.Sampler.Sample(prompts, n, opt)
}

// TestChunksAssembleOnCUDA: a receiver on the cuda device (a GPU worker
// node's generator or reference scorer) builds the model that chunks of a
// device model make on its device, with the sender's weights.
// The host buffer the weights were assembled in is uploaded and let go:
// the next version is assembled in it, and each model keeps its own
// weights.
func TestChunksAssembleOnCUDA(t *testing.T) {
	dev, host, _, chunks, got := chunkRoundTrip(t, gpu.DTypeFloat32)
	if !slices.Equal(got.Weights(), host.Weights()) {
		t.Fatal("assembled weights differ from the sender's")
	}
	a := messages.Assembler{MaxBytes: int64(4 * host.NumParams())}
	for _, c := range chunks {
		if _, err := addWeightChunk(&a, host.Config(), dev, c); err != nil {
			t.Fatal(err)
		}
	}
	buf := a.Buffer
	if len(buf) != host.NumParams() {
		t.Fatalf("after an upload the assembler holds a buffer of %d weights, want the version's %d", len(buf), host.NumParams())
	}
	next := negated(t, host)
	w2 := next.Weights()
	chunks2, err := chunkModel(messages.NewMeta("r", 2, "w", 2), next, 1<<12, &tensorLayout{})
	if err != nil {
		t.Fatal(err)
	}
	var got2 *gpu.Model
	for _, c := range chunks2 {
		if got2, err = addWeightChunk(&a, host.Config(), dev, c); err != nil {
			t.Fatal(err)
		}
	}
	if &a.Buffer[0] != &buf[0] {
		t.Error("the next version was assembled in a new buffer")
	}
	if !slices.Equal(got2.Weights(), w2) || !slices.Equal(got.Weights(), host.Weights()) {
		t.Error("assembling version 2 in version 1's host buffer changed a model's weights")
	}
}

// TestBF16ChunksRoundTrip: a model on a bf16 device (model.dtype bf16)
// sends its product weights as bf16, the rest as float32: the chunks
// hold that many bytes, assemble on a bf16 device into a model whose
// product weights are the sender's bf16 rounding exactly and whose other
// weights are the sender's, and which scores as the sender does, bit for
// bit.
func TestBF16ChunksRoundTrip(t *testing.T) {
	_, _, sender, chunks, got := chunkRoundTrip(t, gpu.DTypeBF16)
	want, bytes := bf16Expected(t, sender)
	if n := chunkBytes(chunks); n != bytes {
		t.Errorf("chunks hold %d bytes, want %d (of %d as float32)", n, bytes, 4*sender.NumParams())
	}
	if got.DType() != gpu.DTypeBF16 {
		t.Fatalf("assembled in %s, want bf16", got.DType())
	}
	if w := got.Weights(); !slices.Equal(w, want) {
		t.Fatal("assembled weights are not the sender's with its product weights rounded to bf16")
	}
	seqs := []gpu.Sequence{{Prompt: []int{1, 5, 9}, Completion: []int{4, 2, 7, 3}}, {Prompt: []int{2}, Completion: []int{8, 8}}}
	ws, err := sender.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := got.Score(seqs, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		if !slices.Equal(gs[i].LogProbs, ws[i].LogProbs) || !slices.Equal(gs[i].Entropies, ws[i].Entropies) {
			t.Fatalf("sequence %d scores %v, the sender %v", i, gs[i].LogProbs, ws[i].LogProbs)
		}
	}
}

// TestBF16ChunksOwnTheirData: a bf16 model on a device is read into the
// layout's one buffer at every cut, and the chunks of a version keep none
// of it: cutting the next version leaves them the first version's.
func TestBF16ChunksOwnTheirData(t *testing.T) {
	dev, host, sender, _, _ := chunkRoundTrip(t, gpu.DTypeBF16)
	var l tensorLayout
	first, err := chunkModel(messages.NewMeta("r", 1, "w", 1), sender, 1<<12, &l)
	if err != nil {
		t.Fatal(err)
	}
	staged := &l.staged[0]
	next, err := negated(t, host).On(dev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chunkModel(messages.NewMeta("r", 2, "w", 2), next, 1<<12, &l); err != nil {
		t.Fatal(err)
	}
	if &l.staged[0] != staged {
		t.Error("the second cut read the weights into a new buffer")
	}
	a := messages.Assembler{MaxBytes: host.Config().WeightBytes()}
	var got *gpu.Model
	for _, c := range first {
		if got, err = addWeightChunk(&a, host.Config(), dev, c); err != nil {
			t.Fatal(err)
		}
	}
	if want, _ := bf16Expected(t, sender); !slices.Equal(got.Weights(), want) {
		t.Fatal("cutting version 2 changed version 1's chunks")
	}
}

// negated is version 2 of host: its weights negated, on the CPU.
func negated(t *testing.T, host *gpu.Model) *gpu.Model {
	t.Helper()
	w := host.Weights()
	for i := range w {
		w[i] = -w[i]
	}
	m, err := gpu.NewModelFromWeights(host.Config(), w, 2)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// chunkRoundTrip makes a tiny model on the host and on a cuda device of
// dtype, cuts the device one into chunks and assembles them on that
// device, as a GPU worker node does: the device, the host model, the
// sender, its chunks and the model they make (checked to be on the
// device).
func chunkRoundTrip(t *testing.T, dtype string) (dev gpu.Device, host, sender *gpu.Model, chunks []*messages.PolicyWeights, got *gpu.Model) {
	t.Helper()
	dev, err := gpu.OpenDeviceWith("cuda", gpu.DeviceOptions{DType: dtype})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	s := testSettings(t, testConfig(t, nil))
	if host, err = gpu.NewModel(s.model, 3); err != nil {
		t.Fatal(err)
	}
	if sender, err = host.On(dev); err != nil {
		t.Fatal(err)
	}
	if chunks, err = chunkModel(messages.NewMeta("r", 1, "w", 1), sender, 1<<12, &tensorLayout{}); err != nil {
		t.Fatal(err)
	}
	a := messages.Assembler{MaxBytes: s.model.WeightBytes()}
	for _, c := range chunks {
		if got, err = addWeightChunk(&a, s.model, dev, c); err != nil {
			t.Fatal(err)
		}
	}
	if !isOn(got, dev) {
		t.Fatal("chunks assembled off the device")
	}
	return dev, host, sender, chunks, got
}

// bf16Expected is m's weights with its product weights rounded to bf16,
// and the bytes its chunks carry: 2 per product weight, 4 per other.
func bf16Expected(t *testing.T, m *gpu.Model) ([]float32, int64) {
	t.Helper()
	w, product := m.Weights(), m.ProductWeights()
	var bytes int64
	off := 0
	for i, name := range m.TensorNames() {
		x, _, err := m.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		for j := range x {
			if product[i] {
				w[off+j] = bf16.Float32(bf16.Round(x[j]))
			}
		}
		bytes += int64(len(x)) * map[bool]int64{true: 2, false: 4}[product[i]]
		off += len(x)
	}
	return w, bytes
}

// TestRunRefusesGPUBatchAtStart: a run whose learner step the device
// cannot hold is refused before its first step, with one line wrapping
// gpu.ErrMemory that names the settings lowering it, and leaves no run
// directory behind.
func TestRunRefusesGPUBatchAtStart(t *testing.T) {
	cfg := cudaRunConfig(t, func(c *config.Config) {
		c.Model.Preset, c.Model.Context = "base", 8192
		c.Train.WarmStartSteps, c.Train.PromptsPerStep, c.Train.PromptsPerPart = 0, 128, 8
		c.Generation.MaxCompletionLen = 8000
	})
	var out bytes.Buffer
	err := Run(context.Background(), cfg, &out)
	msg := fmt.Sprint(err)
	if !errors.Is(err, gpu.ErrMemory) || !strings.Contains(msg, "train.micro_batch") || strings.Contains(msg, "\n") {
		t.Fatalf("run: %q, want one line wrapping gpu.ErrMemory naming train.micro_batch\n%s", msg, out.String())
	}
	t.Log(msg)
	if strings.Contains(out.String(), "step 1") {
		t.Errorf("the run took a step before it was refused:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(cfg.Output.Dir, "run")); !os.IsNotExist(err) {
		t.Errorf("the refused run left its directory: %v", err)
	}
}

// BenchmarkCutDeviceModel times the learner cutting a bf16 device model's
// chunks, as every publication to another node does: reading its weights
// out of the device, rounding the product weights, copying the rest.
// MGRPO_SYNC_PRESETS picks the models (default base).
func BenchmarkCutDeviceModel(b *testing.B) {
	dev, err := gpu.OpenDeviceWith("cuda", gpu.DeviceOptions{DType: gpu.DTypeBF16})
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	for _, preset := range syncPresets() {
		b.Run("preset="+preset, func(b *testing.B) {
			cfg, err := gpu.Preset(preset)
			if err != nil {
				b.Fatal(err)
			}
			host, err := gpu.NewModel(cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			m, err := host.On(dev)
			if err != nil {
				b.Fatal(err)
			}
			var l tensorLayout
			b.SetBytes(cfg.WeightBytes())
			for i := range int64(b.N) {
				if _, err := chunkModel(messages.NewMeta("bench", i, "w", i), m, 1<<20, &l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
