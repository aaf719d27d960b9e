//go:build cudaemu

package kernels

import (
	"slices"
	"sort"
	"testing"
)

func TestEveryKernelIsEmulated(t *testing.T) {
	var emulated []string
	for name := range Emulated() {
		emulated = append(emulated, name)
	}
	sort.Strings(emulated)
	if !slices.Equal(emulated, Names()) {
		t.Errorf("emulated kernels %v, defined kernels %v: an EMU_REGISTER is missing or stale", emulated, Names())
	}
}

func TestMainIncludesEveryFile(t *testing.T) {
	p := Program()
	for name := range p.Headers {
		if !slices.Contains(Included(), name) {
			t.Errorf("%s is embedded but mgrpo.cu does not include it", name)
		}
	}
}
