package tree

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

var quoteCases = []string{
	"", "plain", `q"uo\te`, "vineyard::Tensor<int64>&", "\x00\x1f\n\r\t\b\f", "\x01key\x7f", "ünïcode",
	"line\u2028para\u2029", "bad\xffutf8\xc3", "\xed\xa0\x80", "emoji 🙂",
}

// TestAppendStringMatchesMarshal: AppendString writes what encoding/json
// writes, and every string comes back from JSON as valid, equal text.
func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range quoteCases {
		checkQuote(t, s)
	}
}

func checkQuote(t *testing.T, s string) {
	t.Helper()
	want, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got := AppendString(nil, s)
	if !utf8.ValidString(s) {
		var a, b string
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || a != b {
			t.Fatalf("AppendString(%q) = %s, Marshal = %s", s, got, want)
		}
	} else if string(got) != string(want) {
		t.Fatalf("AppendString(%q) = %s, Marshal = %s", s, got, want)
	}
	if err := CheckText(got); err != nil {
		t.Fatalf("AppendString(%q) = %q: %v", s, got, err)
	}
	if !IsCanonicalValue(got) && string(AppendValue(nil, got)) != string(got) {
		t.Fatalf("AppendValue(%s) = %s", got, AppendValue(nil, got))
	}
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("%s does not read back: %v", got, err)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range quoteCases {
		f.Add(s)
	}
	f.Fuzz(checkQuote)
}

func TestCheckText(t *testing.T) {
	for text, want := range map[string]error{
		`{"a":"plain"}`:              nil,
		`{"a":"\ud83d\ude42"}`:       nil,
		`{"a":"\\ud800"}`:            nil, // an escaped backslash, then text
		`{"a":"\u00e9\n"}`:           nil,
		"{\"a\":\"\xff\"}":           ErrNotUTF8,
		"{\"\xc3\":1}":               ErrNotUTF8,
		`{"a":"\ud800"}`:             ErrLoneSurrogate,
		`{"a":"\udc00"}`:             ErrLoneSurrogate,
		`{"a":"\ud800\u0041"}`:       ErrLoneSurrogate,
		`{"\ud800x":1}`:              ErrLoneSurrogate,
		`{"a":"\\\ud800"}`:           ErrLoneSurrogate,
		`{"a":"\ud83d\\ude42"}`:      ErrLoneSurrogate,
		`{"a":"\ud83d\ude42\udc00"}`: ErrLoneSurrogate,
	} {
		if got := CheckText([]byte(text)); !errors.Is(got, want) || (got == nil) != (want == nil) {
			t.Errorf("CheckText(%s) = %v, want %v", text, got, want)
		}
	}
}

func TestAppendValue(t *testing.T) {
	for raw, want := range map[string]string{
		`1`:                   `1`,
		`"\"C\""`:             `"\"C\""`,
		`[1, 2, {"b" : "x"}]`: `[1,2,{"b":"x"}]`,
		`"\u0041\/"`:          `"A/"`,
		`"\u007f\u0001"`:      "\"\x7f\\u0001\"",
		"\"\u2028\"":          `"\u2028"`,
		`"\u00e9"`:            `"é"`,
		`"\ud83d\ude42"`:      `"🙂"`,
		` -1.50e3 `:           `-1.50e3`,
		`["a b", "\"", "\\"]`: `["a b","\"","\\"]`,
	} {
		if got := AppendValue(nil, []byte(raw)); string(got) != want {
			t.Errorf("AppendValue(%s) = %s, want %s", raw, got, want)
		}
		if !IsCanonicalValue([]byte(want)) && string(AppendValue(nil, []byte(want))) != want {
			t.Errorf("%s is not its own canonical form", want)
		}
	}
}
