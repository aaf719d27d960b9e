// Package gpu is the compute device of mgrpo: the Llama policy model
// (exactly Hugging Face LlamaForCausalLM's math, DESIGN §4) and its Qwen2
// and Qwen3 variants (Config.Arch: q/k/v biases; RMSNorm of each query and
// key head, a head width of its own; qkv.go), with Llama 3's RoPE scaling
// (rope.go), sampling with a key/value cache, per-token log-prob and
// entropy scoring, the learner that ties a loss to backward, clipping and
// AdamW, weight snapshots and their wire format, and Hugging
// Face-compatible checkpoints (config.json keeps the model type).
//
// The model is written llm.c-style: hand-written, fused forward and
// backward kernels over contiguous buffers (model.go reads top-down like
// nanoGPT's forward). The weight products of a float32 model whose
// matrices fit in a core's L2 cache (the presets' do) run an AVX-512 or
// AVX2+FMA kernel over weights packed once into panels (internal/panel,
// packed.go: a Model packs at creation, a Learner after every update);
// every other product goes through BLAS — pure-Go gonum by default,
// OpenBLAS when built with -tags openblas (see blas_openblas.go).
// The kernels are generic over float32 and float64: the model runs in
// float32, and the gradient checks run the very same code in float64. In
// float32 the element-wise work (exponentials, SwiGLU, RMSNorm, RoPE,
// cached attention) runs vector kernels, AVX2+FMA assembly on amd64
// (internal/vec, with portable Go twins elsewhere). A batch runs in shards
// of sequences, one goroutine per core each with single-threaded kernels
// and products (shard.go); sampling likewise decodes one group of
// sequences per core. A batch's rows are packed: no padding, and adjacent
// sequences with the same prompt (a GRPO group) compute that prompt once,
// the later ones reading its keys and values from the first's rows
// (planRows in plan.go, attention.go). The last layer (final norm,
// lm_head, log-softmax, entropy; tail.go) runs on the scored rows only,
// in blocks of rows whose logits are reduced to four numbers per row and
// dropped (backward computes them again): no buffer is rows × vocabulary,
// so memory grows with rows × hidden, at Qwen3's 151,936 tokens too.
//
// # The engine seam
//
// Where the weights live and the passes run is an engine's business
// (engine.go, docs/ENGINE.md): a Device makes an Engine for a Learner
// (forward to per-token log-probs and entropies, backward from per-token
// upstream gradients, zeroing, clipping and AdamW over its own gradient
// buffer, weights and optimiser state in and out, snapshots) and a
// ModelEngine for a Model (Score, Sample, weights out). The CPU engine
// (cpu.go, cpu_model.go) is the code described above; its packing,
// shards, workspaces and decoders are invisible outside it. Everything
// else is host code shared by every engine: input checks, the row plan
// that lays out a batch's rows (plan.go), the Batch layout of per-token
// arrays, the loss (gpu/loss), the schedule, micro-batching
// (LearnerConfig.MicroBatch), checkpoints. Per step only token ids,
// per-token arrays and scalars cross the seam; the weights cross only on
// request, as one flat float32 buffer. Every engine passes one contract
// suite (engine_test.go: runEngineContract). On "cuda" (OpenDevice in a
// -tags cuda build) the CUDA engine (cuda_engine.go, cuda_model.go,
// cuda_pass.go) keeps the weights, gradients, AdamW moments and
// activations on the GPU: the kernels of cuda/kernels and cuBLAS products
// (TF32, or bf16 with DeviceOptions.DType), only the row plan, per-token
// arrays and scalars crossing per step; its models score and sample there
// too (a key/value cache, cuda_sample.go). It runs Llama, Qwen2 and Qwen3
// layers with head widths 16, 32, 64 or 128. A -tags cudaemu build runs the
// same engine on the CPU emulator of the GPU (cuda/emu) in the tests.
//
// # What it provides
//
//	NewModel(cfg, seed), Preset("tiny"|...), PresetNames()  a model and its dimensions (Preset("qwen3-base"): that shape as a Qwen3)
//	(*Model).Sample(prompts, n, SampleOptions)              completions + behaviour log-probs
//	(*Model).Score(seqs, temperature)                       per-token log-probs and entropies
//	NewLearner(model, LearnerConfig)                        training state (AdamW, schedule, clip)
//	(*Learner).Step(batch, temperature, lossFn)             one update with any loss (gpu/loss)
//	(*Learner).SupervisedStep(seqs)                         warm start on gold completions
//	(*Learner).Snapshot()                                   immutable *Model with the policy version
//	SaveCheckpoint(dir, model, tok) / LoadCheckpoint(dir)   config.json + model.safetensors + tokenizer.json
//	OpenDevice("cpu"|"cuda"), OpenDeviceWith(name, opts)    the learner's device (LearnerConfig.Device) and its precision: it makes the engines
//	Bench(preset, opts)                                     `mgrpo-node bench` figures
//
// Sub-packages: safetensors, hfconfig, optim (AdamW, schedules),
// loss (the GRPO-family and MaxEnt objectives as pure slice functions),
// cuda (the device runtime behind the cuda build tag, its kernels and their
// CPU emulator: docs/CUDA.md). The tokenizer and chat templates it saves
// with a checkpoint live in internal/tokenizer.
//
// It never imports actors, rewards, messages or config: callers hand it
// token ids and loss closures, and get slices back.
//
// # Invariants
//
//   - A Model is immutable: Sample and Score only read its weights, so one
//     Model may serve many goroutines; training mutates only the Learner's
//     engine's private copy (and repacks it), published as a new Model by
//     Snapshot on the same device.
//   - A step is exact in micro-batches: the loss sees the whole batch's
//     log-probs and entropies at once, and the gradients are summed over
//     micro-batches before one clip and one update (equal to the whole
//     batch's to rounding; bit-identical to today's single pass when
//     MicroBatch is 0 or at least the batch).
//   - Same seed, same weights (NewModel); same model, inputs and options,
//     same samples (Sample). With the packed kernel or the pure-Go BLAS a
//     prompt's samples do not depend on the rest of the batch either;
//     OpenBLAS may round a row differently when the batch size changes.
//   - Sample's log-probs are log_softmax(logits / T) of the drawn token over
//     the full vocabulary, so they equal Score at the same temperature
//     (tested to 1e-5 in float64, 1e-4 in float32); top-k/top-p restrict
//     only which tokens are drawn, as Hugging Face generate and vLLM do:
//     top-k keeps the tokens tied with the k-th, then top-p measures mass
//     renormalised over the top-k set. A float32 model's draw takes the
//     exponentials of its row in float32 (the learner's kernel), summed
//     and normalised in float64; the candidates are found by sorting only
//     the tokens they can be (candidates.go).
//   - The CPU engine allocates its activations once per batch shape
//     (B, T), and runs a batch of B sequences in the workspace of a longer
//     one when it has it (the same results); the heap stays flat across
//     steps.
//   - Parallel work is split by rows, sequences or elements only, so
//     results do not depend on goroutine scheduling; the number of workers
//     (GOMAXPROCS) enters only through the order of a few sums (the
//     shards' gradients, the gradient norm) and, with OpenBLAS, the
//     rounding of a sampled row. Whether a sequence's neighbours share its
//     prompt changes the order of its attention sums, so its scores may
//     differ in the last bits from those it gets alone.
//
// Config.Validate bounds every size (hfconfig.MaxDim and friends, at most
// MaxParams weights). Models, learners, samplers and scoring workspaces
// estimate their memory (WeightBytes, LearnerBytes, SampleBytes,
// ScoreBytes) and refuse with ErrMemory, before allocating, what exceeds
// MemAvailable of /proc/meminfo; the CUDA engine sizes its device buffers
// and refuses likewise what exceeds the GPU's free memory. LoadModel also
// refuses a weights file
// holding tensors config.json does not describe.
//
// Example:
//
//	cfg, _ := gpu.Preset("small")
//	m, _ := gpu.NewModel(cfg, 1)
//	l, _ := gpu.NewLearner(m, gpu.DefaultLearnerConfig())
//	st, _ := l.SupervisedStep([]gpu.Sequence{{Prompt: []int{1, 20, 14, 21, 32}, Completion: []int{22, 2}}})
//	out, _ := l.Snapshot().Sample([][]int{{1, 20, 14, 21, 32}}, 8, gpu.SampleOptions{Temperature: 1, MaxNewTokens: 4, EOS: 2})
package gpu
