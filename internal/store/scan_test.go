package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzObjectFields checks the scanner against encoding/json on every valid
// JSON object: the same keys with the same values (the last of a repeated
// key, as a map keeps it).
func FuzzObjectFields(f *testing.F) {
	for _, seed := range []string{
		`{}`, ` { "a" : 1 , "b":"x\"}y", "c":{"d":[1,{"e":"]"}]}, "e":null ,"f":-1.5e3}`,
		`{"k\u00e9y":true,"a":1,"a":2}`, `{"n":[],"o":{}}`, `[1]`, `"s"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var want map[string]json.RawMessage
		isObject := json.Unmarshal(b, &want) == nil && want != nil
		got := map[string]json.RawMessage{}
		err := objectFields(b, func(k string, raw []byte) error {
			got[k] = append(json.RawMessage(nil), raw...)
			return nil
		})
		if !isObject {
			if err == nil && len(got) > 0 {
				t.Fatalf("%s is not an object, scanned %v", b, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", b, err)
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
