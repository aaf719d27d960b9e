//go:build cuda

package gpu

import "fmt"

// openCUDA: the CUDA build links the driver (gpu/cuda), but the policy
// model's kernels are CPU-only so far, so the device is refused rather than
// silently running on the CPU.
func openCUDA() (Device, error) {
	return nil, fmt.Errorf("device cuda: the model has no CUDA kernels yet; use --device cpu: %w", ErrNoDevice)
}
