//go:build !openblas

package gpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/mgrpo/mgrpo/gpu/internal/panel"
	"github.com/mgrpo/mgrpo/gpu/internal/vec"
)

// BLASName names the BLAS implementation this binary was built with.
const BLASName = "gonum (pure Go)"

var (
	blas32Impl blas.Float32 = gonum.Implementation{}
	blas64Impl blas.Float64 = gonum.Implementation{}
)

// BLASKernels is "": this build has no OpenBLAS whose kernel set another
// program's could be given.
func BLASKernels() string { return "" }

// BLASInfo describes the BLAS in use, the kernel of the packed weight
// products (packed.go) and the vector kernels of the element-wise work.
func BLASInfo() string {
	return BLASName + "; packed weight products " + panel.Info() + "; vector kernels " + vec.Info()
}
