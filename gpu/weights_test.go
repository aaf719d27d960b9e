package gpu

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestMarshalWeightsRoundTrip(t *testing.T) {
	tiny, _ := Preset("tiny")
	tiny.TieEmbeddings = true
	m, _ := NewModel(tiny, 3)
	m.version = 17
	for _, size := range []int{0, 1000, 4 << 20, 7} {
		chunks := m.MarshalWeights(size)
		for i, c := range chunks {
			if size > 0 && len(c) > size {
				t.Fatalf("chunk %d has %d bytes > %d", i, len(c), size)
			}
		}
		got, err := UnmarshalWeights(chunks)
		if err != nil {
			t.Fatalf("chunk size %d: %v", size, err)
		}
		if got.Version() != 17 || got.Config() != tiny || !reflect.DeepEqual(got.Weights(), m.Weights()) {
			t.Errorf("chunk size %d: round trip changed the model", size)
		}
	}
	if !bytes.Equal(bytes.Join(m.MarshalWeights(0), nil), bytes.Join(m.MarshalWeights(333), nil)) {
		t.Errorf("chunking changed the byte stream")
	}
}

func TestUnmarshalWeightsRejectsDamage(t *testing.T) {
	tiny, _ := Preset("tiny")
	m, _ := NewModel(tiny, 3)
	chunks := m.MarshalWeights(1000)
	flip := bytes.Join(chunks, nil)
	flip[500] ^= 1
	for name, c := range map[string][][]byte{
		"missing chunk":  append(append([][]byte{}, chunks[:3]...), chunks[4:]...),
		"swapped chunks": append([][]byte{chunks[1], chunks[0]}, chunks[2:]...),
		"flipped bit":    {flip},
		"empty":          nil,
		"wrong magic":    {[]byte("HELLOWORLD12345")},
	} {
		if _, err := UnmarshalWeights(c); !errors.Is(err, ErrBadWeights) {
			t.Errorf("%s: error %v, want ErrBadWeights", name, err)
		}
	}
}
