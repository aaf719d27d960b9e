//go:build !cuda

package gpu

func openCUDA(DeviceOptions) (Device, error) {
	return nil, &noDevice{name: "cuda", why: "this binary was built without CUDA support (build one with make build-cuda, i.e. -tags cuda)"}
}
