// Package messagestest helps tests check the messages contract: a message
// is never modified after it is sent.
//
//	check := messagestest.Freeze(t, batch)
//	c.Send(pid, batch)
//	... wait for the pipeline ...
//	check() // fails the test if anyone modified batch
//
// It imports only messages and testing.
package messagestest

import (
	"testing"

	"github.com/mgrpo/mgrpo/messages"
	"google.golang.org/protobuf/proto"
)

// Freeze records m's hash and returns a function that fails t if m has
// changed since.
func Freeze(t testing.TB, m proto.Message) func() {
	t.Helper()
	before := messages.Hash(m)
	return func() {
		t.Helper()
		if err := messages.Unchanged(before, m); err != nil {
			t.Errorf("%v", err)
		}
	}
}
