package atomicfile

import "golang.org/x/sys/unix"

// exchange swaps the directories a and b in one step (renameat2
// RENAME_EXCHANGE); it fails where the file system lacks it.
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
