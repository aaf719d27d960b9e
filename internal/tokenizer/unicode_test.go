package tokenizer

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// marks is n copies of the combining mark m.
func marks(m string, n int) string { return strings.Repeat(m, n) }

// TestNormalizeLongMarkRuns: runs of more than 30 combining marks are
// normalized by the plain UAX #15 algorithm, as Hugging Face's tokenizers
// does, without the U+034F that the Stream-Safe Text Format inserts
// (golang.org/x/text does). The expected values are JavaScript's
// String.prototype.normalize (ICU) on the same inputs.
func TestNormalizeLongMarkRuns(t *testing.T) {
	const acute, graveBelow, dotBelow, dotAbove = "\u0301", "\u0316", "\u0323", "\u0307"
	for _, tc := range []struct {
		name                 string
		in                   string
		nfc, nfd, nfkc, nfkd string
	}{
		{"a + 31 acute", "a" + marks(acute, 31),
			"á" + marks(acute, 30), "a" + marks(acute, 31), "á" + marks(acute, 30), "a" + marks(acute, 31)},
		{"a + 16 (grave below, acute)", "a" + marks(graveBelow+acute, 16),
			"á" + marks(graveBelow, 16) + marks(acute, 15), "a" + marks(graveBelow, 16) + marks(acute, 16),
			"á" + marks(graveBelow, 16) + marks(acute, 15), "a" + marks(graveBelow, 16) + marks(acute, 16)},
		{"á + 31 acute", "á" + marks(acute, 31),
			"á" + marks(acute, 31), "a" + marks(acute, 32), "á" + marks(acute, 31), "a" + marks(acute, 32)},
		{"fi ligature + 20 (dot below, dot above)", "\ufb01" + marks(dotBelow+dotAbove, 20) + "x",
			"\ufb01" + marks(dotBelow, 20) + marks(dotAbove, 20) + "x", "\ufb01" + marks(dotBelow, 20) + marks(dotAbove, 20) + "x",
			"f\u1ecb" + marks(dotBelow, 19) + marks(dotAbove, 20) + "x", "fi" + marks(dotBelow, 20) + marks(dotAbove, 20) + "x"},
		{"hangul jamo + 35 acute", "\u1100\u1161" + marks(acute, 35),
			"\uac00" + marks(acute, 35), "\u1100\u1161" + marks(acute, 35), "\uac00" + marks(acute, 35), "\u1100\u1161" + marks(acute, 35)},
		{"33 acute, then e", marks(acute, 33) + "e",
			marks(acute, 33) + "e", marks(acute, 33) + "e", marks(acute, 33) + "e", marks(acute, 33) + "e"},
		{"a CGJ of the input stays", "a\u034f" + acute, "a\u034f" + acute, "a\u034f" + acute, "a\u034f" + acute, "a\u034f" + acute},
	} {
		for _, f := range []struct {
			name string
			form norm.Form
			want string
		}{{"NFC", norm.NFC, tc.nfc}, {"NFD", norm.NFD, tc.nfd}, {"NFKC", norm.NFKC, tc.nfkc}, {"NFKD", norm.NFKD, tc.nfkd}} {
			if got := normalize(f.form)(tc.in); got != f.want {
				t.Errorf("%s: %s = %s, want %s", tc.name, f.name, codePoints(got), codePoints(f.want))
			}
		}
	}
}

// codePoints lists s's code points in hex.
func codePoints(s string) string {
	var parts []string
	for _, r := range s {
		parts = append(parts, fmt.Sprintf("%04X", r))
	}
	return strings.Join(parts, " ")
}
