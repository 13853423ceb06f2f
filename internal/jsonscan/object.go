package jsonscan

import "errors"

// ErrNotObject is returned by ObjectFields for a value that is not an
// object.
var ErrNotObject = errors.New("jsonscan: not a JSON object")

// ObjectFields calls fn with each key and raw value of the JSON object obj,
// in order (a repeated key is passed again); raw is a slice of obj. A value
// that is not an object is ErrNotObject; a malformed one a *SyntaxError (or
// ErrNotObject); an error of fn stops the scan and is returned.
func ObjectFields(obj []byte, fn func(key string, raw []byte) error) error {
	return ObjectFieldBytes(obj, func(key, raw []byte) error { return fn(string(key), raw) })
}

// ObjectFieldBytes is ObjectFields with each key as bytes, so that a caller
// that keeps obj can keep its keys without a copy: a plain key (no escape,
// printable ASCII) is a slice of obj, an escaped one a new slice of its
// value. Neither is ever written by ObjectFieldBytes.
func ObjectFieldBytes(obj []byte, fn func(key, raw []byte) error) error {
	s := Scanner{Buf: obj}
	if s.Peek() != '{' {
		return ErrNotObject
	}
	s.Pos++
	if s.Peek() == '}' {
		s.Pos++
		return s.end()
	}
	for {
		key, err := s.Key()
		if err != nil {
			return err
		}
		if err := s.Expect(':'); err != nil {
			return err
		}
		s.WS()
		start := s.Pos
		if err := s.Skip(1); err != nil {
			return err
		}
		if err := fn(key, obj[start:s.Pos]); err != nil {
			return err
		}
		if more, ok := s.Next('}'); !ok {
			return s.Fail("expected , or }")
		} else if !more {
			return s.end()
		}
	}
}

// end checks nothing but white space follows the value.
func (s *Scanner) end() error {
	if s.Peek() != 0 || s.Pos < len(s.Buf) {
		return s.Fail("data after the value")
	}
	return nil
}
