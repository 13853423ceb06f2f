// Package jsonscan reads JSON text in place: it finds the boundaries of
// values, keys and strings without decoding into Go values, for the hot
// paths where encoding/json costs more than the work (the daemon splitting
// a metadata tree into fields, libv6d reading an Arrow layout). It is the
// one hand-written JSON scanner of the project.
//
// A Scanner never trusts its input: every malformation is a *SyntaxError
// naming the offset, never a panic or a read out of bounds. It checks
// structure (brackets, commas, colons, string quotes, control characters)
// but not the spelling of numbers and literals; a caller that needs full
// validity calls Valid (encoding/json.Valid's rules, a quarter of its cost)
// once for the whole text.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// DefaultMaxDepth bounds the nesting Skip accepts when Scanner.MaxDepth is 0.
const DefaultMaxDepth = 512

// SyntaxError is a malformation found at byte Offset.
type SyntaxError struct {
	Offset int
	What   string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("malformed JSON at byte %d: %s", e.Offset, e.What)
}

// Scanner reads JSON from Buf, from Pos on. Callers may read Buf and move
// Pos themselves between calls (to parse a number, say).
type Scanner struct {
	Buf []byte
	Pos int
	// MaxDepth bounds nesting in Skip; DefaultMaxDepth when 0.
	MaxDepth int
}

// Fail returns a *SyntaxError at the cursor.
func (s *Scanner) Fail(what string) error { return &SyntaxError{Offset: s.Pos, What: what} }

// WS skips white space.
func (s *Scanner) WS() {
	for s.Pos < len(s.Buf) {
		switch s.Buf[s.Pos] {
		case ' ', '\t', '\n', '\r':
			s.Pos++
		default:
			return
		}
	}
}

// Peek skips white space and returns the next byte, 0 at the end.
func (s *Scanner) Peek() byte {
	s.WS()
	if s.Pos < len(s.Buf) {
		return s.Buf[s.Pos]
	}
	return 0
}

// Expect skips white space and c.
func (s *Scanner) Expect(c byte) error {
	if s.Peek() != c {
		return s.Fail("expected " + string(c))
	}
	s.Pos++
	return nil
}

// Next reads what follows an object member or an array element: a ',' (more
// is true) or closing (more is false), white space skipped; ok is false for
// anything else.
func (s *Scanner) Next(closing byte) (more, ok bool) {
	switch s.Peek() {
	case ',':
		s.Pos++
		return true, true
	case closing:
		s.Pos++
		return false, true
	}
	return false, false
}

// RawString returns the quoted string at the cursor, quotes included, and
// whether it needs unquoting (Unquote) to read as encoding/json reads it:
// it holds escapes or bytes outside ASCII (invalid UTF-8 becomes U+FFFD).
// Without, its value is raw[1:len(raw)-1].
func (s *Scanner) RawString() (raw []byte, escaped bool, err error) {
	if s.Peek() != '"' {
		return nil, false, s.Fail("expected a string")
	}
	start := s.Pos
	// Fast path: most strings are plain ASCII; find the quote.
	if end := bytes.IndexByte(s.Buf[start+1:], '"'); end >= 0 {
		seg := s.Buf[start+1 : start+1+end]
		if bytes.IndexByte(seg, '\\') < 0 && plainASCII(seg) {
			s.Pos = start + end + 2
			return s.Buf[start:s.Pos], false, nil
		}
	}
	for s.Pos++; s.Pos < len(s.Buf); s.Pos++ {
		switch c := s.Buf[s.Pos]; {
		case c == '\\':
			escaped = true
			s.Pos++
		case c == '"':
			s.Pos++
			return s.Buf[start:s.Pos], escaped, nil
		case c < 0x20:
			return nil, false, s.Fail("control character in a string")
		case c >= 0x80:
			escaped = true
		}
	}
	s.Pos = len(s.Buf) // a trailing backslash stepped past the end
	return nil, false, s.Fail("unterminated string")
}

// plainASCII reports whether b holds only printable ASCII (no control
// character, which is not allowed raw in a JSON string, and nothing that
// may be invalid UTF-8).
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x80 {
			return false
		}
	}
	return true
}

// Str reads a string and returns its value, as encoding/json reads it
// (invalid UTF-8 becomes U+FFFD).
func (s *Scanner) Str() (string, error) {
	raw, escaped, err := s.RawString()
	if err != nil {
		return "", err
	}
	if !escaped {
		return string(raw[1 : len(raw)-1]), nil
	}
	return s.Unquote(raw)
}

// Unquote returns the value of the quoted string raw (escapes resolved as
// encoding/json resolves them).
func (s *Scanner) Unquote(raw []byte) (string, error) {
	var out string
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", s.Fail("bad string escape")
	}
	return out, nil
}

// Key reads an object key. A plain one (RawString) is returned in place, a
// slice of Buf, without a copy.
func (s *Scanner) Key() ([]byte, error) {
	raw, escaped, err := s.RawString()
	if err != nil {
		return nil, err
	}
	if !escaped {
		return raw[1 : len(raw)-1], nil
	}
	str, err := s.Unquote(raw)
	return []byte(str), err
}

// Skip skips one value of any kind; depth is the nesting the value is at.
func (s *Scanner) Skip(depth int) error {
	limit := s.MaxDepth
	if limit <= 0 {
		limit = DefaultMaxDepth
	}
	if depth > limit {
		return s.Fail("nested too deeply")
	}
	switch c := s.Peek(); c {
	case '"':
		_, _, err := s.RawString()
		return err
	case '{', '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		s.Pos++
		if s.Peek() == closing {
			s.Pos++
			return nil
		}
		for {
			if c == '{' {
				if _, _, err := s.RawString(); err != nil {
					return err
				}
				if err := s.Expect(':'); err != nil {
					return err
				}
			}
			if err := s.Skip(depth + 1); err != nil {
				return err
			}
			if more, ok := s.Next(closing); !ok {
				return s.Fail("expected , or " + string(closing))
			} else if !more {
				return nil
			}
		}
	default:
		start := s.Pos
		for s.Pos < len(s.Buf) && strings.IndexByte(",}]{[\" \t\r\n:", s.Buf[s.Pos]) < 0 {
			s.Pos++
		}
		if s.Pos == start {
			return s.Fail("expected a value")
		}
		return nil
	}
}
