package config

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors; every *Error wraps one of them.
var (
	// ErrUnknownKey: a file, env variable or flag names no configuration key.
	ErrUnknownKey = errors.New("config: unknown key")
	// ErrType: a value cannot be read as the key's type.
	ErrType = errors.New("config: wrong type")
	// ErrRange: a value is outside the key's allowed range or set.
	ErrRange = errors.New("config: value out of range")
	// ErrConflict: values that are fine alone are impossible together.
	ErrConflict = errors.New("config: impossible combination")
	// ErrSource: a config file or recipe cannot be read or parsed.
	ErrSource = errors.New("config: unreadable source")
)

// Error is a configuration problem tied to one key. Its message is one
// line:
//
//	config: train.max_staleness = -1: must be 0 or more
//	config: train.steps = "abc": must be an integer (file bad.yaml)
type Error struct {
	Key    string // dotted key, e.g. train.max_staleness
	Value  string // the offending value as written, "" if none
	Reason string // what is wrong, e.g. "must be 0 or more"
	Source string // where the value came from ("file x.yaml", "env MGRPO_X__Y", "flag --x.y"); "" for the effective config
	Err    error  // one of the sentinels
}

// Error renders the one-line message. Each part is cut to at most
// maxPartBytes (clip): a 45 MB value is named, not echoed.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	b.WriteString(clip(e.Key))
	if e.Value != "" {
		b.WriteString(" = ")
		b.WriteString(clip(e.Value))
	}
	b.WriteString(": ")
	b.WriteString(clip(e.Reason))
	if e.Source != "" {
		b.WriteString(" (")
		b.WriteString(clip(e.Source))
		b.WriteString(")")
	}
	return b.String()
}

// maxPartBytes is the longest key, value, reason or source an error line
// shows.
const maxPartBytes = 200

// clip returns s, or its first maxPartBytes bytes (whole runes) followed
// by "… (N bytes)" when it is longer.
func clip(s string) string {
	if len(s) <= maxPartBytes {
		return s
	}
	cut := maxPartBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }
