//go:build cuda

package gpu

import "testing"

// TestLearnerOnCUDA needs a GPU (a cuda build does not start without one):
// `go test -tags cuda ./gpu/ -run CUDA`. OpenDevice("cuda") makes the CUDA
// engine with DTypeFloat32's TF32 products; the small preset trains a few
// steps on it and on the CPU from the same weights (learnerTracksCPU).
func TestLearnerOnCUDA(t *testing.T) {
	dev, err := OpenDevice("cuda")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	t.Log(dev.Info())
	learnerTracksCPU(t, dev)
}
