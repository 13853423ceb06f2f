// Package jsontext writes JSON text the way the daemon sends it: strings
// with only quotes, backslashes and control characters escaped ("<" and
// non-ASCII UTF-8 stay as they are, as upstream writes them). It is a leaf
// package, shared by the wire codec (internal/protocol) and the store, which
// keeps metadata as JSON text but must not depend on the wire.
package jsontext

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping: "<" stays "<" (typenames
// are full of them), as upstream writes it.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// AppendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, everything else (including "<" and non-ASCII UTF-8)
// as it is, as Marshal writes it.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
