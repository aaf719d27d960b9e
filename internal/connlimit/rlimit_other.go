//go:build !unix

package connlimit

// fileLimit is 0 where the system has no descriptor limit to read
// (Windows: a process's handles are bounded by memory, not a soft limit),
// so the limits stand as given.
func fileLimit() uint64 { return 0 }
