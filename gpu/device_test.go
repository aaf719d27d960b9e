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
