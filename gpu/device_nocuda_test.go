//go:build !cuda

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
}
