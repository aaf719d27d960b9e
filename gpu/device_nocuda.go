//go:build !cuda && !cudaemu

package gpu

// CUDABuilt reports whether OpenDevice("cuda") can open a device in this
// binary: false, it was built without the cuda tag (mgrpo-node hands a
// cuda run to the binary built with it, mgrpo-node-cuda).
const CUDABuilt = false

func openCUDA(DeviceOptions) (Device, error) {
	return nil, &noDevice{name: "cuda", why: "this binary was built without CUDA support (build one with make build-cuda, i.e. -tags cuda)"}
}

func probeCUDA() (string, error) {
	_, err := openCUDA(DeviceOptions{})
	return "", err
}
