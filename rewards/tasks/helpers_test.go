package tasks

import (
	"fmt"
	"strconv"
	"strings"
)

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// parseAddition reads a prompt "x+y=" exactly.
func parseAddition(prompt string) (x, y int64, err error) {
	xs, rest, ok := strings.Cut(prompt, "+")
	ys, tail, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || tail != "" || !isInteger(xs) || !isInteger(ys) {
		return 0, 0, fmt.Errorf("not x+y=: %q", prompt)
	}
	x, err = strconv.ParseInt(xs, 10, 64)
	if err == nil {
		y, err = strconv.ParseInt(ys, 10, 64)
	}
	return x, y, err
}
