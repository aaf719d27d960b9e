package node

import (
	"os"
	"syscall"
)

// fileID is a file's device, inode and status change time.
type fileID struct {
	dev, ino   uint64
	ctimeNanos int64
}

// identity is fi's fileID (zero when the system does not say).
func identity(fi os.FileInfo) fileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, ctimeNanos: st.Ctim.Nano()}
}
