package protocol

import (
	"errors"
	"testing"

	"github.com/v6d-io/v6d-go/internal/status"
)

func TestDecodeTrailing(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		trailing   uint64
		unframed   bool
		code       status.Code
	}{
		{"inline", `{"type":"create_data_request","content":null,"inline":[3,4]}`, 7, false, status.OK},
		{"bad seal, count known", `{"type":"create_data_request","content":{},"seal":"x","inline":[3,4]}`, 7, false, status.Invalid},
		{"bad with_content, count known", `{"type":"create_data_request","content":{},"with_content":"yes","inline":[5]}`, 5, false, status.Invalid},
		{"unreadable count", `{"type":"create_data_request","inline":["x"]}`, 0, true, status.OK},
		{"broken json", `{"type":"create_data_request","inline":[3],`, 0, true, status.OK},
		{"overflow", `{"type":"create_data_request","inline":[9223372036854775807,2]}`, 0, true, status.OK},
		{"no inline", `{"type":"create_data_request","content":{}}`, 0, false, status.OK},
		{"other kind", `{"type":"exists_request","id":1,"inline":[3]}`, 0, false, status.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := DecodeRequest([]byte(tc.body))
			if errors.Is(err, ErrUnframed) != tc.unframed {
				t.Fatalf("unframed: %v", err)
			}
			if tc.unframed {
				return
			}
			if f.Trailing != tc.trailing || status.CodeOf(err) != tc.code {
				t.Fatalf("trailing %d err %v, want %d %v", f.Trailing, err, tc.trailing, tc.code)
			}
		})
	}
}
