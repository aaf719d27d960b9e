//go:build !unix

package actors

import (
	"errors"
	"os"
)

// writable reports why path may not be written where the system has no
// access(2): a file or directory whose mode has no write bit (Windows'
// read-only attribute) is refused; an open or create says the rest.
func writable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o200 == 0 {
		return errors.New("read-only")
	}
	return nil
}
