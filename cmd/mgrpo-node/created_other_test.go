//go:build !linux

package main

import "testing"

// created skips the test: it watches a directory with inotify (Linux).
func created(t *testing.T, dir, prefix string) bool {
	t.Helper()
	t.Skip("watches a directory with inotify: Linux only")
	return false
}
