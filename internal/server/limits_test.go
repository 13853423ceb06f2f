package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

func TestReplyCap(t *testing.T) {
	s := startWith(t, func(c *Config) { c.MaxReplyBytes = 1024 })
	r := dial(t, s)
	r.rpc(`{"type":"register_request"}`)
	var idl []string
	for i := 0; i < 20; i++ {
		r.send(fmt.Sprintf(`{"type":"create_data_request","content":{"typename":"vineyard::Scalar","value_":"%d"}}`, i))
		m := r.recvNumbers()
		if m["type"] != "create_data_reply" {
			t.Fatalf("create: %v", m)
		}
		idl = append(idl, m["id"].(json.Number).String()) // exact: ids do not fit a float64
	}
	m := r.rpc(`{"type":"get_data_request","id":[` + strings.Join(idl, ",") + `]}`)
	if m["code"] != float64(status.Invalid) || !strings.Contains(m["message"].(string), "1024") {
		t.Fatalf("oversized reply: %v", m)
	}
	if m := r.rpc(`{"type":"get_data_request","id":[` + idl[0] + `]}`); m["type"] != "get_data_reply" {
		t.Fatalf("small reply after: %v", m)
	}
}

// recvNumbers is recv keeping numbers exact (json.Number).
func (r *raw) recvNumbers() map[string]any {
	body, err := protocol.ReadFrame(r.c, nil, 1<<20)
	if err != nil {
		r.t.Fatal(err)
	}
	d := json.NewDecoder(strings.NewReader(string(body)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// TestInputRefused checks what the daemon refuses to store, and that a
// listing stays valid UTF-8 JSON.
func TestInputRefused(t *testing.T) {
	s := start(t)
	r := dial(t, s)
	r.rpc(`{"type":"register_request"}`)
	long := strings.Repeat("x", 1025)
	for name, body := range map[string]string{
		"utf8 content":  "{\"type\":\"create_data_request\",\"content\":{\"typename\":\"t\",\"v\":\"\xfe\xff\"}}",
		"long typename": `{"type":"create_data_request","content":{"typename":"` + long + `"}}`,
		"long member":   `{"type":"create_data_request","content":{"typename":"t","m":{"typename":"` + long + `"}}}`,
		"long name":     `{"type":"put_name_request","object_id":1,"name":"` + long + `"}`,
		"timeout":       `{"type":"get_name_request","name":"n","wait":true,"timeout_ms":4611686018427387904}`,
	} {
		if m := r.rpc(body); m["code"] != float64(status.Invalid) {
			t.Errorf("%s: %v, want Invalid", name, m)
		}
	}
	r.send(`{"type":"list_data_request","pattern":"*","limit":100}`)
	body, err := protocol.ReadFrame(r.c, nil, 1<<20)
	if err != nil || !utf8.Valid(body) || !json.Valid(body) {
		t.Fatalf("listing: %q %v", body, err)
	}
	var reply struct{ Content map[string]any }
	if err := json.Unmarshal(body, &reply); err != nil || len(reply.Content) != 0 {
		t.Fatalf("something was stored: %s", body)
	}
}
