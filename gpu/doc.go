// Package gpu is the compute device: the policy model, sampling, scoring,
// losses, the optimiser and checkpoints.
package gpu
