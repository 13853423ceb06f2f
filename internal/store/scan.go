package store

import (
	"encoding/json"
	"errors"
)

// A scanner for the metadata trees of create_data, the daemon's hot path: it
// splits a JSON object into its keys and raw values in one pass, where
// encoding/json would decode into a map (a validating pass, then a decoding
// pass allocating every value) and again for every member. The input must
// be valid JSON (json.Valid, once for the whole tree): the scanner only
// finds boundaries.

var errNotObject = errors.New("not a JSON object")

// objectFields calls fn with each key and raw value of the JSON object obj,
// in order (a repeated key is passed again). obj must be valid JSON; a value
// that is not an object is errNotObject.
func objectFields(obj []byte, fn func(key string, raw []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for i < len(obj) {
		end := stringEnd(obj, i)
		key, err := unquote(obj[i:end])
		if err != nil {
			return err
		}
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // ':'
		vend := valueEnd(obj, i)
		if err := fn(key, obj[i:vend]); err != nil {
			return err
		}
		i = skipSpace(obj, vend)
		if i >= len(obj) || obj[i] == '}' {
			return nil
		}
		i = skipSpace(obj, i+1) // ','
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd returns the index after the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ { // a number, true, false or null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// unquote returns the string a JSON string literal holds.
func unquote(lit []byte) (string, error) {
	if len(lit) >= 2 && lit[0] == '"' && lit[len(lit)-1] == '"' {
		plain := true // ASCII without escapes; the rest as encoding/json reads it
		for _, c := range lit[1 : len(lit)-1] {
			if c == '\\' || c >= 0x80 {
				plain = false
				break
			}
		}
		if plain {
			return string(lit[1 : len(lit)-1]), nil
		}
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}
