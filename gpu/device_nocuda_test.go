//go:build !cuda && !cudaemu

package gpu

import (
	"errors"
	"strings"
	"testing"
)

func TestOpenDeviceWithoutCUDA(t *testing.T) {
	_, err := OpenDevice("cuda")
	if !errors.Is(err, ErrNoDevice) || !strings.HasPrefix(err.Error(), "device cuda: ") {
		t.Errorf("cuda: error %v, want ErrNoDevice starting with \"device cuda: \"", err)
	}
	if CUDABuilt {
		t.Error("CUDABuilt in a build without cuda")
	}
	if info, err := ProbeCUDA(); !errors.Is(err, ErrNoDevice) || info != "" {
		t.Errorf("ProbeCUDA() = %q, %v; want ErrNoDevice", info, err)
	}
}
