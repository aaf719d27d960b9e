package main

import (
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// created blocks until an entry whose name starts with prefix is created
// in dir (inotify), and reports whether one was; false once the watch
// ends (dir removed).
func created(t *testing.T, dir, prefix string) bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			return false
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			if strings.HasPrefix(name, prefix) {
				return true
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				return false
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}
