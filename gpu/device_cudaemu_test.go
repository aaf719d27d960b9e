//go:build cudaemu && !cuda

package gpu

import (
	"strings"
	"testing"
)

// TestOpenDeviceEmulated: in a cudaemu build OpenDevice("cuda") opens the
// CPU emulator with the precision asked for, and ProbeCUDA names it.
func TestOpenDeviceEmulated(t *testing.T) {
	if !CUDABuilt {
		t.Error("CUDABuilt is false in a cudaemu build")
	}
	for _, dtype := range []string{DTypeFloat32, DTypeBF16} {
		d, err := OpenDeviceWith("cuda", DeviceOptions{DType: dtype})
		if err != nil {
			t.Fatal(err)
		}
		if info := d.Info(); d.Name() != "cuda" || !strings.Contains(info, "emulator") || !strings.Contains(info, "("+dtype+")") {
			t.Errorf("%s: %s %q", dtype, d.Name(), info)
		}
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
	if info, err := ProbeCUDA(); err != nil || !strings.Contains(info, "emulator") {
		t.Errorf("ProbeCUDA() = %q, %v", info, err)
	}
}
