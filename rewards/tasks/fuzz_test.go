package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Fuzz targets: the seed corpus runs in every `go test`; `make fuzz` runs
// each with -fuzztime. Every target checks that nothing panics plus
// invariants that hold for any input.

func FuzzCountdownVerify(f *testing.F) {
	for _, s := range [][2]string{
		{"7*3+9", "3,7,9>30"}, {" ( 9 - 7 ) * 3 * 5 ", "3,7,9,5>30"}, {"3*3+7", "3,3,7>16"},
		{"9/(7-7)", "7,7,9>1"}, {"7/3*9", "3,7,9>21"}, {"99999999999999999999999", "3,7,9>30"},
		{"1000000000*1000000000*1000000000", "1000000000,1000000000,1000000000>1"},
		{"-3+7+9", "3,7,9>13"}, {"07*3+9", "3,7,9>30"}, {"(7*3+9", "3,7,9>30"}, {"()", "1>1"},
		{strings.Repeat("(", 40) + "9" + strings.Repeat(")", 40), "9>9"}, {"7×3+9", "3,7,9>30"},
		{"<answer>7*3+9</answer>", "3,7,9>30"}, {"9-(7-3)", "3,7,9>5"}, {"", ""}, {"7*3+9", "3,7,9"},
		{"\xff", "\xff>\xff"}, {"1-1-1-1", "1,1,1,1>-2"},
	} {
		f.Add(s[0], s[1])
	}
	cd := &countdown{}
	f.Fuzz(func(t *testing.T, completion, answer string) {
		v := cd.Verify(completion, answer)
		if v != Malformed && v != Wrong && v != Correct {
			t.Fatalf("Verify(%q, %q) = %v", completion, answer, v)
		}
		if again := cd.Verify(completion, answer); again != v {
			t.Fatalf("Verify(%q, %q) = %v then %v", completion, answer, v, again)
		}
		canon := cd.Canonical(completion)
		if v == Malformed {
			return
		}
		// The canonical form is the same tree: same verdict, and a fixed point.
		if cv := cd.Verify(canon, answer); cv != v {
			t.Fatalf("Verify(%q) = %v but canonical %q is %v", completion, v, canon, cv)
		}
		if c2 := cd.Canonical(canon); c2 != canon {
			t.Fatalf("Canonical(%q) = %q, not a fixed point (%q)", completion, canon, c2)
		}
	})
}

func FuzzAdditionVerify(f *testing.F) {
	for _, s := range [][2]string{{"82", "82"}, {"81", "82"}, {"082", "82"}, {"-", "82"}, {"82 ", "82"}, {"", ""}, {"٨٢", "82"}} {
		f.Add(s[0], s[1])
	}
	add := &addition{}
	f.Fuzz(func(t *testing.T, completion, answer string) {
		v := add.Verify(completion, answer)
		if (v == Correct) != (completion == answer && isInteger(answer)) {
			t.Fatalf("Verify(%q, %q) = %v", completion, answer, v)
		}
		if v == Malformed && isInteger(completion) {
			t.Fatalf("Verify(%q, %q) = malformed for an integer", completion, answer)
		}
	})
}

func FuzzWordProblemsVerify(f *testing.F) {
	for _, s := range [][2]string{
		{"3+5=8 8-2=6 #### 6", "6"}, {"#### 006", "6"}, {"####", "6"}, {"#### -0", "0"}, {"6", "6"},
		{"#### 6 pens", "6"}, {"#### ６", "6"}, {"#### 5 #### 6", "6"}, {"", ""},
	} {
		f.Add(s[0], s[1])
	}
	wp := &wordProblems{}
	f.Fuzz(func(t *testing.T, completion, answer string) {
		v := wp.Verify(completion, answer)
		if v != Malformed && v != Wrong && v != Correct {
			t.Fatalf("Verify(%q, %q) = %v", completion, answer, v)
		}
		if v == Malformed {
			return
		}
		// Only the final answer matters: its canonical form alone after
		// the marker gets the same verdict.
		if cv := wp.Verify(finalMarker+" "+wp.Canonical(completion), answer); cv != v {
			t.Fatalf("Verify(%q) = %v but its final answer %q is %v", completion, v, wp.Canonical(completion), cv)
		}
	})
}

func FuzzLoadJSONL(f *testing.F) {
	for _, s := range []string{
		`{"prompt": "37+45=", "answer": "82"}`,
		"\xef\xbb\xbf{\"prompt\":\"a\",\"answer\":1}\r\n\n{\"prompt\":\"b\",\"answer\":\"2\",\"x\":[]}",
		`{"prompt": "1+1="}`, `{"answer": "2"}`, `{"prompt": null, "answer": "2"}`, `["a", "b"]`, `null`,
		`{"prompt": "a", "answer": true}`, `{"prompt": "a", "answer": -1.5e300}`, `{"prompt":"\ud800","answer":"\u0000"}`,
		`{"prompt": "a", "answer"`, "{}{}", "", "\n\n\n", "\xff\xfe", `{"prompt":"a","answer":"b"}` + "\n" + `{`,
		`{"prompt":"a","answer":"b","prompt":"c"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := LoadJSONLFields(bytes.NewReader(data), Fields{})
		if err != nil {
			var le *LineError
			lines := bytes.Count(data, []byte("\n")) + 1
			if !errors.Is(err, ErrEmptyDataset) && (!errors.As(err, &le) || le.Line < 1 || le.Line > lines+1) {
				t.Fatalf("LoadJSONLFields(%q, Fields{}): error %v is neither ErrEmptyDataset nor a LineError in 1..%d", data, err, lines+1)
			}
			return
		}
		if len(ps) == 0 {
			t.Fatalf("LoadJSONLFields(%q, Fields{}): no problems and no error", data)
		}
		// Round trip: writing the problems back as JSONL loads the same problems.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, p := range ps {
			if err := enc.Encode(p); err != nil {
				t.Fatal(err)
			}
		}
		again, err := LoadJSONLFields(&buf, Fields{})
		if err != nil || !reflect.DeepEqual(again, ps) {
			t.Fatalf("round trip of %q: %q, %v, want %q", data, again, err, ps)
		}
	})
}
