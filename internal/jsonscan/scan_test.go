package jsonscan

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzScan checks the scanner against encoding/json: on every valid JSON
// object ObjectFields finds the same keys with the same values (the last of
// a repeated key, as a map keeps it), and Skip spans every valid value
// whole; on any input neither panics, and Skip never moves past the end.
func FuzzScan(f *testing.F) {
	for _, seed := range []string{
		`{}`, ` { "a" : 1 , "b":"x\"}y", "c":{"d":[1,{"e":"]"}]}, "e":null ,"f":-1.5e3}`,
		`{"k\u00e9y":true,"a":1,"a":2}`, `{"n":[],"o":{}}`, `[1]`, `"s"`, `{"a":`, `{"a" 1}`,
		`{"a":"\u0001"}`, "{\"a\":\"\x01\"}", `[[[[[[]]]]]]`, `{"a":1}x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := Scanner{Buf: b}
		err := s.Skip(0)
		if s.Pos > len(b) {
			t.Fatalf("Skip moved to %d past %d", s.Pos, len(b))
		}
		got := map[string]json.RawMessage{}
		ferr := ObjectFields(b, func(k string, raw []byte) error {
			got[k] = append(json.RawMessage(nil), raw...)
			return nil
		})
		if !json.Valid(b) {
			return
		}
		if err != nil {
			t.Fatalf("Skip of valid %s: %v", b, err)
		}
		if s.Peek() != 0 {
			t.Fatalf("Skip of %s stopped at %d", b, s.Pos)
		}
		var want map[string]json.RawMessage
		if json.Unmarshal(b, &want) != nil || want == nil {
			if !errors.Is(ferr, ErrNotObject) {
				t.Fatalf("%s is not an object: %v %v", b, got, ferr)
			}
			return
		}
		if ferr != nil {
			t.Fatalf("%s: %v", b, ferr)
		}
		canon := func(m map[string]json.RawMessage) map[string]any {
			out := map[string]any{}
			for k, v := range m {
				var x any
				if err := json.Unmarshal(v, &x); err != nil {
					t.Fatalf("value %q of %s: %v", v, b, err)
				}
				out[k] = x
			}
			return out
		}
		if !reflect.DeepEqual(canon(got), canon(want)) {
			t.Fatalf("%s: scanned %v, encoding/json %v", b, got, want)
		}
	})
}

func TestMalformed(t *testing.T) {
	for _, b := range []string{`{"a":`, `{"a" 1}`, `{"a":1,}`, "{\"a\":\"\x01\"}", `{"a":1}x`, `{"a":"unterminated}`, `{1:2}`} {
		if err := ObjectFields([]byte(b), func(string, []byte) error { return nil }); err == nil {
			t.Errorf("%s accepted", b)
		}
	}
	deep := make([]byte, 0, 2000)
	for i := 0; i < 1000; i++ {
		deep = append(deep, '[')
	}
	s := Scanner{Buf: deep, MaxDepth: 10}
	if err := s.Skip(0); err == nil {
		t.Error("deep nesting accepted")
	}
}
