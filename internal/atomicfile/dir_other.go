//go:build !linux && !darwin

package atomicfile

import "errors"

// exchange is missing here: ReplaceDir renames the old directory aside
// first.
func exchange(a, b string) error {
	return errors.New("no atomic exchange of directories on this system")
}
