package gpu

import (
	"errors"
	"strings"
	"testing"
)

func TestOpenDevice(t *testing.T) {
	d, err := OpenDevice("cpu")
	if err != nil || d.Name() != "cpu" || !strings.Contains(d.Info(), BLASName) || d.Close() != nil {
		t.Errorf("cpu: %v, %v", d, err)
	}
	t.Log(d.Info())
	if _, err := OpenDevice("tpu"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("tpu: error %v", err)
	}
}

// TestOpenDeviceAttention: an unknown attention choice is refused with one
// line, from the option or from MGRPO_CUDA_ATTENTION (cuda only: the CPU
// ignores the variable), before any GPU is touched.
func TestOpenDeviceAttention(t *testing.T) {
	if _, err := OpenDeviceWith("cpu", DeviceOptions{Attention: "flash"}); !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), `"flash"`) {
		t.Errorf("cpu, attention flash: error %v", err)
	}
	t.Setenv(AttentionEnv, "flash")
	if d, err := OpenDeviceWith("cpu", DeviceOptions{}); err != nil {
		t.Errorf("cpu with %s=flash: %v", AttentionEnv, err)
	} else {
		d.Close()
	}
	_, err := OpenDeviceWith("cuda", DeviceOptions{Attention: AttentionTensor})
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), AttentionEnv) || strings.Contains(err.Error(), "\n") {
		t.Errorf("cuda with %s=flash: error %v, want one line naming the variable", AttentionEnv, err)
	}
}
