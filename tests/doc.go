// Package tests holds the end-to-end tests of mgrpo: whole training runs
// through the actors, on the real model and tasks. The long ones are named
// TestLong* and skipped under -short; `make test-e2e` runs them without
// -race.
package tests
