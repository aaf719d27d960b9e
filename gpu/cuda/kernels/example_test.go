//go:build cudaemu && !cuda

package kernels_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/gpu/cuda"
	"github.com/mgrpo/mgrpo/gpu/cuda/emu"
	"github.com/mgrpo/mgrpo/gpu/cuda/kernels"
)

// RMSNorm of the row [3, 4] (root mean square √12.5) with weights [1, 2],
// on the emulator.
func ExampleRMSNorm() {
	rt := emu.New(0)
	defer rt.Close()
	x, _ := cuda.UploadSlice(rt, []float32{3, 4})
	w, _ := cuda.UploadSlice(rt, []float32{1, 2})
	y, _ := rt.Alloc(2 * 4)
	inv, _ := rt.Alloc(4)
	if err := kernels.RMSNorm(rt, y, 0, inv, x, w, 1, 2, 0); err != nil {
		fmt.Println(err)
	}
	out := make([]float32, 2)
	cuda.DownloadSlice(rt, out, y)
	fmt.Printf("%.4f\n", out)
	// Output: [0.8485 2.2627]
}
