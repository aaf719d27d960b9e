package cuda

import (
	"fmt"
	"regexp"
	"strings"
)

// Program is CUDA C source for NVRTC: a main file and the files it
// includes, by the name it includes them with.
type Program struct {
	Name    string            // the main file's name, as messages cite it
	Main    string            // its text
	Headers map[string]string // #include "name" → text
}

// entryRE matches a kernel's PTX entry and its parameter list.
var entryRE = regexp.MustCompile(`\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)`)

// paramRE matches one parameter's type in a PTX parameter list.
var paramRE = regexp.MustCompile(`\.param\s+\.(\w+)`)

// PTXEntries lists the kernels of a PTX module with the PTX types of their
// parameters (u64, u32, f32, ...), in order.
func PTXEntries(ptx string) map[string][]string {
	out := map[string][]string{}
	for _, m := range entryRE.FindAllStringSubmatch(ptx, -1) {
		types := []string{}
		for _, p := range paramRE.FindAllStringSubmatch(m[2], -1) {
			types = append(types, p[1])
		}
		out[m[1]] = types
	}
	return out
}

// CheckArgs checks argument kinds against a kernel's PTX parameter types:
// the count, and for each the size and whether it is a float. (A pointer
// and a 64-bit integer look alike in PTX; the emulator tells them apart.)
func CheckArgs(name string, params []string, kinds []ArgKind) error {
	if len(params) != len(kinds) {
		return fmt.Errorf("%w: %s takes %d arguments, got %d", ErrLaunch, name, len(params), len(kinds))
	}
	for i, p := range params {
		if !kindMatches(p, kinds[i]) {
			return fmt.Errorf("%w: %s: argument %d is %s, the kernel takes .%s", ErrLaunch, name, i, kinds[i], p)
		}
	}
	return nil
}

// kindMatches reports whether an argument of kind k fills a PTX parameter
// of type p.
func kindMatches(p string, k ArgKind) bool {
	switch k {
	case 'p', 'l', 'L':
		return p == "u64" || p == "s64" || p == "b64"
	case 'i', 'u':
		return p == "u32" || p == "s32" || p == "b32"
	case 'f':
		return p == "f32"
	case 'd':
		return p == "f64"
	}
	return false
}

// String names the C type of a kind.
func (k ArgKind) String() string {
	switch k {
	case 'p':
		return "a pointer"
	case 'i':
		return "int"
	case 'u':
		return "unsigned int"
	case 'f':
		return "float"
	case 'd':
		return "double"
	case 'l':
		return "long long"
	case 'L':
		return "unsigned long long"
	}
	return fmt.Sprintf("kind %q", byte(k))
}

// KindsOf renders kinds as the letters of ArgKind ("ppif").
func KindsOf(kinds []ArgKind) string {
	var b strings.Builder
	for _, k := range kinds {
		b.WriteByte(byte(k))
	}
	return b.String()
}
