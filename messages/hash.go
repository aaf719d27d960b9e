package messages

import (
	"crypto/sha256"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// Hash is the SHA-256 of the deterministic marshal of m (map entries
// sorted), so two equal messages hash alike and any change to a field
// changes the hash. A nil message hashes as an empty one.
func Hash(m proto.Message) [32]byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		// Marshal fails only on invalid UTF-8 in strings or required
		// fields (none in proto3): a programmer error.
		panic(fmt.Sprintf("messages: hash %T: %v", m, err))
	}
	return sha256.Sum256(b)
}

// Unchanged returns ErrMutated if m no longer hashes to before, the
// Hash taken when it was sent.
func Unchanged(before [32]byte, m proto.Message) error {
	if Hash(m) != before {
		return fmt.Errorf("%w: %T", ErrMutated, m)
	}
	return nil
}
