package protocol

import (
	"fmt"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/status"
)

func TestDecodeLimits(t *testing.T) {
	many := "[" + strings.Repeat("1,", MaxItems) + "1]"
	long := strings.Repeat("n", MaxNameBytes+1)
	for _, tc := range []struct{ name, body, field string }{
		{"sizes", `{"type":"create_buffers_request","sizes":` + many + `}`, "sizes"},
		{"get ids", `{"type":"get_data_request","id":` + many + `}`, "id"},
		{"del ids", `{"type":"del_data_request","id":` + many + `}`, "id"},
		{"release ids", `{"type":"release_request","ids":` + many + `}`, "ids"},
		{"get buffers", `{"type":"get_buffers_request","ids":` + many + `}`, "ids"},
		{"keyed num", `{"type":"get_buffers_request","num":70000}`, "num"},
		{"name", `{"type":"put_name_request","name":"` + long + `"}`, "name"},
		{"get name", `{"type":"get_name_request","name":"` + long + `"}`, "name"},
		{"utf8 content", "{\"type\":\"create_data_request\",\"content\":{\"typename\":\"a\xff\"}}", "UTF-8"},
		{"utf8 contents", "{\"type\":\"create_datas_request\",\"contents\":[{\"typename\":\"a\xc3\"}]}", "UTF-8"},
		{"negative timeout", `{"type":"get_name_request","name":"a","wait":true,"timeout_ms":-1}`, "timeout_ms"},
		{"huge timeout", `{"type":"get_name_request","name":"a","wait":true,"timeout_ms":4611686018427387904}`, "timeout_ms"},
		{"nul typename", `{"type":"create_data_request","content":{"typename":"a\u0000b"}}`, "typename with a NUL"},
		{"nul typename nested", `{"type":"create_datas_request","contents":[{"typename":"t","m":{"typename":"\u0000"}}]}`, "typename with a NUL"},
		{"nul key", `{"type":"create_data_request","content":{"typename":"t","k\u0000":1}}`, "key with a NUL"},
		{"nul key nested", `{"type":"create_data_request","content":{"typename":"t","a":[{"b":{"x\u0000y":"v"}}]}}`, "key with a NUL"},
		{"nul extra key", `{"type":"shallow_copy_request","id":1,"extra":{"\u0000":1}}`, "key with a NUL"},
		{"nul label key", `{"type":"label_request","id":1,"keys":["a\u0000"],"values":["v"]}`, "NUL"},
		{"nul name", `{"type":"put_name_request","name":"a\u0000b","object_id":1}`, "NUL"},
		{"nul drop name", `{"type":"drop_name_request","name":"\u0000"}`, "NUL"},
		{"10^13 timeout", `{"type":"get_name_request","name":"a","wait":true,"timeout_ms":10000000000000}`, "timeout_ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tc.body))
			if status.CodeOf(err) != status.Invalid || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("err = %v, want Invalid naming %q", err, tc.field)
			}
		})
	}
	ok := fmt.Sprintf(`{"type":"get_name_request","name":"%s","wait":true,"timeout_ms":%d}`,
		strings.Repeat("n", MaxNameBytes), MaxTimeoutMs)
	if _, err := DecodeRequest([]byte(ok)); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
	// A NUL in a value other than a typename is data, and an escaped
	// backslash before "u0000" is no NUL.
	for _, body := range []string{
		`{"type":"create_data_request","content":{"typename":"t","v":"a\u0000b","l":["\u0000"],"m":{"typename":"u","w":"\u0000"}}}`,
		`{"type":"create_data_request","content":{"typename":"t\\u0000","k\\u0000":1}}`,
	} {
		if _, err := DecodeRequest([]byte(body)); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	}
}
