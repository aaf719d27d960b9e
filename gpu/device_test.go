package gpu

import (
	"errors"
	"strings"
	"testing"
)

func TestOpenDevice(t *testing.T) {
	d, err := OpenDevice("cpu")
	if err != nil || d.Name() != "cpu" || !strings.Contains(d.Info(), BLASName) {
		t.Errorf("cpu: %v, %v", d, err)
	}
	t.Log(d.Info())
	_, err = OpenDevice("cuda")
	if !errors.Is(err, ErrNoDevice) || !strings.HasPrefix(err.Error(), "device cuda: ") {
		t.Errorf("cuda: error %v, want ErrNoDevice starting with \"device cuda: \"", err)
	}
	if _, err := OpenDevice("tpu"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("tpu: error %v", err)
	}
}
