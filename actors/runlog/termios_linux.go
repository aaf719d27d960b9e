package runlog

import "golang.org/x/sys/unix"

// isTerminal reports whether fd answers the termios ioctl, as only a
// terminal does.
func isTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}
