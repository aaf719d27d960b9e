// Package optim updates model parameters from their gradients: AdamW with
// decoupled weight decay (as PyTorch's torch.optim.AdamW), global-norm
// gradient clipping, learning-rate schedules, and optimiser state that is
// saved to and restored from a safetensors file (optimizer.safetensors).
//
// Parameters are flat float32 slices named as in model.safetensors; the
// optimiser never sees shapes. It imports the standard library and
// gpu/safetensors only; it never imports the model, actors or messages.
//
// # Invariants
//
// Step and ClipGlobalNorm modify Param.W and Param.G in place (they are the
// outputs) and nothing else; Step allocates only on its first call.
// SaveState followed by LoadState gives bit-identical subsequent steps, and
// so does State followed by SetState. WriteState and ReadState read and
// write the same file for an optimiser kept elsewhere (a GPU engine's
// moments), given as a State.
//
// Example:
//
//	opt, err := optim.NewAdamW(3e-4, 0.9, 0.999, 1e-8, 0.01)
//	sched := optim.Schedule{Kind: optim.Cosine, Warmup: 10, Total: 200, Base: 3e-4, Min: 3e-5}
//	gradNorm := optim.ClipGlobalNorm(params, 1.0, runtime.GOMAXPROCS(0))
//	opt.Step(params, sched.LR(step))
package optim
