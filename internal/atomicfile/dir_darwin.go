package atomicfile

import "golang.org/x/sys/unix"

// exchange swaps the directories a and b in one step (renamex_np
// RENAME_SWAP); it fails where the file system lacks it.
func exchange(a, b string) error {
	return unix.RenamexNp(a, b, unix.RENAME_SWAP)
}
