// Package buildinfo names the running mgrpo-node build: its version, and
// an identity that tells apart any two builds whose code differs.
//
// The version is what the Makefile stamps at link time (git describe:
// -ldflags "-X github.com/mgrpo/mgrpo/internal/buildinfo.version=..."),
// else the module version and VCS revision Go records, else "dev". Go
// records no revision with -buildvcs=false (GOFLAGS on some machines), so
// the version alone may name two commits alike. The identity adds the
// SHA-256 of the executable itself: two builds that could compute
// different numbers (another commit, another toolchain, OpenBLAS or not)
// are different files. The one exception is a GPU build made beside a
// plain one (make build-cuda): mgrpo-node-cuda is stamped with the hash of
// the mgrpo-node built with it from the same tree (twin) and takes that
// identity, since its CPU code is that binary's; so a GPU node and a CPU
// node of one build form a cluster.
//
//	buildinfo.Version() // "v0.3.0-12-gabc1234" or "dev"
//	buildinfo.ID()      // "v0.3.0-12-gabc1234 sha256:4f1c2a9be07d"
package buildinfo

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// version is stamped by the Makefile at link time; empty otherwise.
var version string

// twin is stamped by make build-cuda into mgrpo-node-cuda: the first
// hashLen hex digits of the SHA-256 of the mgrpo-node built beside it
// (empty otherwise).
var twin string

// hashLen is how many hex digits of the executable's SHA-256 an identity
// carries (48 bits: no two builds a cluster meets share them by chance).
const hashLen = 12

// Version is the stamped version, else the module version and VCS
// revision (with "+dirty" for a modified tree), else "dev".
func Version() string {
	if version != "" {
		return version
	}
	v, rev := "dev", ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if m := info.Main.Version; m != "" && m != "(devel)" {
			v = m
		}
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision":
				rev = " " + s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				rev += "+dirty"
			}
		}
	}
	return v + rev
}

// ID is Version and the start of the executable's SHA-256 ("sha256:?"
// when the executable cannot be read), or of its twin's for a GPU build
// stamped with one. Nodes of different IDs refuse each other.
func ID() string {
	if twin != "" {
		return Version() + " sha256:" + twin
	}
	return Version() + " sha256:" + executableHash()
}

// Executable is the start of the running executable's own SHA-256 (ID's,
// but for a GPU build that takes its twin's identity).
func Executable() string { return "sha256:" + executableHash() }

// executableHash is computed once per process, from the running program
// itself: on Linux /proc/self/exe, which stays the file the process was
// started from even when a new build replaced it on disk.
var executableHash = sync.OnceValue(func() string {
	for _, path := range []func() (string, error){selfExe, os.Executable} {
		if h, err := hashFile(path); err == nil {
			return h
		}
	}
	return "?"
})

// selfExe is Linux's name of the running program's file.
func selfExe() (string, error) { return "/proc/self/exe", nil }

// hashFile returns the first hashLen hex digits of the SHA-256 of the file
// path names.
func hashFile(path func() (string, error)) (string, error) {
	p, err := path()
	if err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLen], nil
}
