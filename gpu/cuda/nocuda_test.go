//go:build !cuda

package cuda

import (
	"errors"
	"testing"
)

func TestWithoutCUDA(t *testing.T) {
	if Available() {
		t.Error("Available() = true without the cuda tag")
	}
	if _, err := Devices(); !errors.Is(err, ErrNoCUDA) || err.Error() != "mgrpo was built without CUDA support; rebuild with -tags cuda" {
		t.Errorf("Devices error = %v", err)
	}
	if _, err := NewBLAS(0); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("NewBLAS error = %v", err)
	}
	var b *BLAS
	if err := b.Sgemm(false, false, 1, 1, 1, 1, []float32{1}, 1, []float32{1}, 1, 0, []float32{0}, 1); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("Sgemm error = %v", err)
	}
}
