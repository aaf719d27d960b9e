package runlog

import "golang.org/x/sys/windows"

// isTerminal reports whether fd is a console, whose mode only a console
// has.
func isTerminal(fd uintptr) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(fd), &mode) == nil
}
