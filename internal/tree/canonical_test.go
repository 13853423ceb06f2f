package tree

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestCanonical(t *testing.T) {
	for text, want := range map[string]string{
		`{}`: `{}`,
		`{ "typename" : "T", "b": {"typename":"U", "z": 1, "a": [1, 2]}, "a": "\u0001", "a": "x\u007f" }`:                                     "{\"a\":\"x\x7f\",\"typename\":\"T\",\"b\":{\"a\":[1,2],\"typename\":\"U\",\"z\":1}}",
		`{"\u0001k":{"typename":"vineyard::Blob","transient":true,"nbytes":8,"length":8,"id":"o8000000000000001","instance_id":0,"extra":1}}`: `{"\u0001k":{"id":"o8000000000000001","typename":"vineyard::Blob","length":8,"nbytes":8,"instance_id":0,"transient":true,"extra":1}}`,
	} {
		got, err := Canonical([]byte(text))
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", text, got, err, want)
			continue
		}
		if again, err := Canonical(got); err != nil || string(again) != string(got) {
			t.Errorf("Canonical(%s) = %s, %v: not a fixed point", got, again, err)
		}
	}
	for _, bad := range []string{`[]`, `"s"`, `{"a":}`, "{\"a\":\"\xff\"}", `{"a":"\udc00"}`} {
		if got, err := Canonical([]byte(bad)); err == nil {
			t.Errorf("Canonical(%s) = %s, no error", bad, got)
		}
	}
}

// FuzzCanonical: the canonical text of any tree is valid JSON of the same
// value, and its own canonical text.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"typename":"T","b":{"z":1},"a":"\u0001","a":"x\u007f"}`))
	f.Add([]byte(`{"k":"\u2028","m":{"n":{"id":"o0000000000000001"}},"l":[{"b":1,"a":2}," \/ "]}`))
	f.Fuzz(func(t *testing.T, text []byte) {
		got, err := Canonical(text)
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Canonical(%q) = %q: not JSON", text, got)
		}
		var a, b any
		if json.Unmarshal(text, &a) != nil || json.Unmarshal(got, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("Canonical(%q) = %q: another value", text, got)
		}
		again, err := Canonical(got)
		if err != nil || string(again) != string(got) {
			t.Fatalf("Canonical(%q) = %q, %v: not a fixed point", got, again, err)
		}
	})
}
