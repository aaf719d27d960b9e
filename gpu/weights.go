package gpu

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// ErrBadWeights is returned (wrapped) by UnmarshalWeights for bytes that are
// not a complete, intact weight message.
var ErrBadWeights = errors.New("gpu: bad weight bytes")

// weightsMagic opens every serialised weight stream (format version 1).
const weightsMagic = "MGRPOW1\n"

// weightsHeader is the JSON header of a weight stream.
type weightsHeader struct {
	Config  Config `json:"config"`
	Version int64  `json:"version"`
	Params  int    `json:"params"`
}

// MarshalWeights serialises the model for the network, split into chunks of
// at most chunkSize bytes (≤ 0: one chunk). The stream is
//
//	"MGRPOW1\n" | uint32 header length | JSON {config, version, params} |
//	params × float32 | uint32 CRC-32 (IEEE) of everything before it
//
// little-endian; the same model always gives the same bytes.
func (m *Model) MarshalWeights(chunkSize int) [][]byte {
	hdr, err := json.Marshal(weightsHeader{Config: m.cfg, Version: m.version, Params: m.NumParams()})
	if err != nil {
		panic(fmt.Sprintf("gpu: marshal weight header: %v", err)) // a Config always marshals
	}
	var buf bytes.Buffer
	buf.Grow(len(weightsMagic) + 8 + len(hdr) + 4*m.NumParams())
	buf.WriteString(weightsMagic)
	binary.Write(&buf, binary.LittleEndian, uint32(len(hdr)))
	buf.Write(hdr)
	var b [4]byte
	for _, w := range m.net.w.flat {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(w))
		buf.Write(b[:])
	}
	binary.LittleEndian.PutUint32(b[:], crc32.ChecksumIEEE(buf.Bytes()))
	buf.Write(b[:])
	all := buf.Bytes()
	if chunkSize <= 0 {
		chunkSize = len(all)
	}
	var chunks [][]byte
	for lo := 0; lo < len(all); lo += chunkSize {
		chunks = append(chunks, all[lo:min(lo+chunkSize, len(all))])
	}
	return chunks
}

// UnmarshalWeights rebuilds a Model from the chunks of MarshalWeights, in
// order. It checks the magic, the header, the length and the checksum.
func UnmarshalWeights(chunks [][]byte) (*Model, error) {
	all := bytes.Join(chunks, nil)
	bad := func(format string, a ...any) (*Model, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrBadWeights}, a...)...)
	}
	if len(all) < len(weightsMagic)+8 || string(all[:len(weightsMagic)]) != weightsMagic {
		return bad("no %q header", weightsMagic[:7])
	}
	body, sum := all[:len(all)-4], binary.LittleEndian.Uint32(all[len(all)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return bad("checksum mismatch (%d bytes; truncated, reordered or corrupt chunks)", len(all))
	}
	rest := body[len(weightsMagic):]
	n := int(binary.LittleEndian.Uint32(rest))
	if n > len(rest)-4 {
		return bad("header length %d exceeds the %d bytes left", n, len(rest)-4)
	}
	var h weightsHeader
	if err := json.Unmarshal(rest[4:4+n], &h); err != nil {
		return bad("header: %v", err)
	}
	if err := h.Config.Validate(); err != nil {
		return bad("header: %v", err)
	}
	data := rest[4+n:]
	if h.Params != h.Config.NumParams() || len(data) != 4*h.Params {
		return bad("%d weight bytes for %d params, config needs %d", len(data), h.Params, h.Config.NumParams())
	}
	w := make([]float32, h.Params)
	for i := range w {
		w[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return newModel(h.Config, w, h.Version), nil
}
