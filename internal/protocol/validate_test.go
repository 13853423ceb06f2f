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
}
