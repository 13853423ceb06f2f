package jsontext

import "testing"

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "vineyard::Tensor<int64>", "\x00\x1f\n\r\t", "ünïcode"} {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, Marshal = %s", s, got, want)
		}
	}
}
