package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e+10`, `-12.0E-3`, `true`, `false`, `null`, ` {"a" : [1, 2, {"b": null}] } `,
	`{"typename": "vineyard::Tensor<int64>", "shape_": "[1]", "order_": "\"C\"", "nbytes": 8, "buffer_": {"inline": 0}}`,
	`"\u00e9\n\t\\\/\b\f\r"`, "\"\xff\xfe\"", `"é"`, `[[[[]]]]`,
	// invalid
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`,
	`tru`, `truex`, `nul`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01\"", `[1 2]`, `{"a":1 "b":2}`, `1 2`,
	`{"a":1}x`, `NaN`, `Infinity`, `"\`, `[`, `["a",`, `{"a":[}`, "\x00",
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, c := range validCases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.60q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// FuzzValidPrefix: the value ValidPrefix finds is one Valid accepts, and a
// valid value followed by anything is found whole.
func FuzzValidPrefix(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c), []byte(",x"))
	}
	f.Add([]byte(`{"a":1}`), []byte(`}`))
	f.Add([]byte(`12`), []byte(`3`))
	f.Fuzz(func(t *testing.T, b, rest []byte) {
		if n, ok := ValidPrefix(b); ok && !Valid(b[:n]) {
			t.Fatalf("ValidPrefix(%q) = %d, but Valid(%q) is false", b, n, b[:n])
		}
		if !Valid(b) || len(bytes.TrimSpace(b)) != len(b) {
			return // ValidPrefix takes no white space before the value
		}
		// A number runs on into digits (and an exponent) after it; anything
		// else ends where it ends.
		if c := b[len(b)-1]; c >= '0' && c <= '9' {
			rest = []byte(",")
		}
		if n, ok := ValidPrefix(append(b[:len(b):len(b)], rest...)); !ok || n != len(b) {
			t.Fatalf("ValidPrefix(%q + %q) = %d, %v; want %d, true", b, rest, n, ok, len(b))
		}
	})
}

var benchTree = []byte(`{"typename": "vineyard::Tensor<int64>", "shape_": "[1]", "partition_index_": "[]", ` +
	`"order_": "\"C\"", "value_type_": "int64", "value_type_meta_": "<i8", "nbytes": 8, "buffer_": {"inline": 0}}`)

// BenchmarkValid is Valid on the tree of a small array's put; compare
// BenchmarkEncodingJSONValid.
func BenchmarkValid(b *testing.B) {
	for b.Loop() {
		Valid(benchTree)
	}
}

func BenchmarkEncodingJSONValid(b *testing.B) {
	for b.Loop() {
		json.Valid(benchTree)
	}
}
