package gpu

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// vectorReg matches an SSE/AVX register operand (X0–X31, Y…, Z…).
var vectorReg = regexp.MustCompile(`\b[XYZ]([0-9]|[12][0-9]|3[01])\b`)

// TestAssemblyIsVEX reads the kernels' assembly and fails on any legacy
// SSE instruction touching a vector register (MOVQ CX, X8 rather than
// VMOVQ). Mixed into AVX code, such an instruction costs a state
// transition on Intel CPUs: on the Xeon of docs/BENCHMARKS.md one MOVQ in
// the tail mask made every call on a length not a multiple of 8 take
// ~160 ns instead of ~8, a quarter of a learner step.
func TestAssemblyIsVEX(t *testing.T) {
	for _, file := range []string{"internal/vec/vec_amd64.s", "internal/panel/kernel_amd64.s"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range legacySSE(string(src)) {
			t.Errorf("%s: legacy SSE instruction %q: use its VEX form (V…)", file, bad)
		}
	}
}

// legacySSE returns the instructions of src that name a vector register
// but whose mnemonic is neither VEX/EVEX (V…) nor one of src's macros.
func legacySSE(src string) []string {
	macros := map[string]bool{}
	var insns []string
	src = strings.ReplaceAll(src, "\\\n", " ") // join macro continuations
	for _, line := range strings.Split(src, "\n") {
		line, _, _ = strings.Cut(line, "//")
		if def, ok := strings.CutPrefix(strings.TrimSpace(line), "#define "); ok {
			end := strings.IndexAny(def, " \t(")
			if end < 0 {
				end = len(def)
			}
			macros[def[:end]] = true
			line = def[end:]
			if strings.HasPrefix(line, "(") { // parameters
				_, line, _ = strings.Cut(line, ")")
			}
		}
		insns = append(insns, strings.Split(line, ";")...)
	}
	var bad []string
	for _, in := range insns {
		in = strings.TrimSpace(in)
		if label, rest, ok := strings.Cut(in, ":"); ok && !strings.ContainsAny(label, " \t(") {
			in = strings.TrimSpace(rest)
		}
		fields := strings.Fields(in)
		if len(fields) == 0 || !vectorReg.MatchString(in) {
			continue
		}
		if op, _, _ := strings.Cut(fields[0], "("); strings.HasPrefix(op, "V") || macros[op] {
			continue
		}
		bad = append(bad, in)
	}
	return bad
}

// TestLegacySSE: the scan finds legacy SSE in macros, after labels and
// beside comments, and passes VEX, macro calls and integer instructions.
func TestLegacySSE(t *testing.T) {
	src := "#define M(a) VADDPS a, Y1, Y1; MOVQ CX, X8\n" +
		"TEXT ·f(SB), NOSPLIT, $0\n" +
		"loop:\tMOVSS X0, ret+8(FP) // a store\n" +
		"\tVMOVSS X0, ret+8(FP); M(Y2); ADDQ $4, DI\n" +
		"\tVZEROUPPER\n"
	got := legacySSE(src)
	want := []string{"MOVQ CX, X8", "MOVSS X0, ret+8(FP)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("legacySSE = %q, want %q", got, want)
	}
}
