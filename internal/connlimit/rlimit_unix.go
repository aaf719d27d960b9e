//go:build unix

package connlimit

import "syscall"

// fileLimit is the process's soft limit on open descriptors
// (RLIMIT_NOFILE), or 0 where it cannot be read.
func fileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur <= 0 {
		return 0
	}
	return uint64(r.Cur) // Cur is int64 on some BSDs
}
