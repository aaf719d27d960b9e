//go:build unix

package actors

import "golang.org/x/sys/unix"

// writable reports why this process may not write path (a file or a
// directory), asking the system as an open or a create would.
func writable(path string) error { return unix.Access(path, unix.W_OK) }
