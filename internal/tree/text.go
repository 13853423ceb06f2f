package tree

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// ErrNotUTF8 is returned by CheckText for text that is not valid UTF-8.
var ErrNotUTF8 = errors.New("tree: the text is not valid UTF-8")

// ErrLoneSurrogate is returned by CheckText for a \u escape of a UTF-16
// surrogate that is not half of a pair.
var ErrLoneSurrogate = errors.New(`tree: the text holds a \u escape of a lone UTF-16 surrogate`)

// CheckText checks what JSON's grammar (jsonscan.Valid) leaves open and a
// canonical text cannot hold: b must be valid UTF-8, and every \u escape of
// a UTF-16 surrogate half of a pair. encoding/json reads both as U+FFFD,
// Python as lone surrogates it cannot encode again: the text would not come
// back as it went in. b is JSON text (Valid), so every backslash is in a
// string.
func CheckText(b []byte) error {
	if !utf8.Valid(b) {
		return ErrNotUTF8
	}
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return nil
		}
		i += j + 1
		if i >= len(b) {
			return nil
		}
		if b[i] != 'u' {
			i++ // the escaped byte, perhaps a backslash
			continue
		}
		r, ok := hex4(b, i+1)
		i += 5
		switch {
		case !ok || r < 0xd800 || r > 0xdfff:
		case r >= 0xdc00:
			return ErrLoneSurrogate
		default:
			if lo, ok := hex4(b, i+2); !ok || i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' || lo < 0xdc00 || lo > 0xdfff {
				return ErrLoneSurrogate
			}
			i += 6
		}
	}
}

// hex4 reads the 4 hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// IsCanonicalValue reports whether raw, one JSON value that CheckText
// accepts, is already in canonical form (AppendValue would write it as it
// is). It looks at each byte once, and is true for compact text of plain
// ASCII whose strings have no escapes but \" and \\, as most field values
// are; a value it is unsure of is false, and AppendValue rewrites it.
func IsCanonicalValue(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c >= utf8.RuneSelf:
			return false
		case c == '"':
			in = !in
		case c == '\\':
			if i+1 >= len(raw) || (raw[i+1] != '"' && raw[i+1] != '\\') {
				return false
			}
			i++
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// AppendValue appends the canonical form of raw, one JSON value that
// jsonscan.Valid and CheckText accept: white space outside strings dropped,
// every string quoted again by AppendString, numbers and literals as
// written, the members of objects inside it in their order.
func AppendValue(dst, raw []byte) []byte {
	if IsCanonicalValue(raw) {
		return append(dst, raw...)
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			end := stringEnd(raw, i)
			var s string
			if json.Unmarshal(raw[i:end], &s) != nil { // not a string: Valid was not called
				dst = append(dst, raw[i:end]...)
			} else {
				dst = AppendString(dst, s)
			}
			i = end
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// stringEnd returns the index after the string that opens at raw[i].
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(raw)
}
