//go:build !unix

package runlog

import "os"

// lockFile does nothing where flock is missing: two processes may then use
// one run directory at once.
func lockFile(*os.File) error { return nil }
