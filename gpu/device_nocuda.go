//go:build !cuda

package gpu

import "fmt"

func openCUDA() (Device, error) {
	return nil, fmt.Errorf("device cuda: this binary was built without CUDA support (rebuild with -tags cuda): %w", ErrNoDevice)
}
