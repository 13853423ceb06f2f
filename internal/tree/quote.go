package tree

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Marshal is json.Marshal without HTML escaping: "<" stays "<" (typenames
// are full of them), as upstream writes it. Its strings are quoted as
// AppendString quotes them.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// plain marks the bytes AppendString writes as they are: printable ASCII
// but for '"' and '\' (U+007F is printable to JSON).
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendString appends s as a canonical JSON string, exactly as Marshal
// writes it: '"' and '\' escaped, control characters as \b \f \n \r \t or
// \u00XX, U+2028 and U+2029 escaped (JavaScript reads them as line ends),
// everything else as it is. A byte of invalid UTF-8 becomes U+FFFD, as
// Marshal reads it, but written as it is (Marshal writes \ufffd), so that
// the result is canonical too; CheckText refuses such text before it
// becomes a tree.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), "\uFFFD"...)
		case r == '\u2028' || r == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
