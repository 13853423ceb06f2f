package server

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

func startWith(t testing.TB, edit func(*Config)) *Server {
	t.Helper()
	cfg := Config{MaxFrame: 1 << 16}
	edit(&cfg)
	return startCfg(t, cfg)
}

// sendRaw writes bytes as they are.
func (r *raw) sendRaw(b []byte) {
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// closed reports whether the daemon closed the connection (after any
// replies still buffered).
func (r *raw) closed() bool {
	for {
		_, err := protocol.ReadFrame(r.c, nil, 1<<20)
		if err != nil {
			return errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")
		}
	}
}

// inlineFrame is a create_data request with fields, followed by trailing
// bytes that are themselves a whole instance_status_request frame: if the
// daemon read them as requests, an instance_status_reply would come back.
func inlineFrame(fields string) []byte {
	smuggled := protocol.AppendFrame(nil, []byte(`{"type":"instance_status_request"}`))
	body := fmt.Sprintf(`{"type":"create_data_request",%s,"inline":[%d]}`, fields, len(smuggled))
	return append(protocol.AppendFrame(nil, []byte(body)), smuggled...)
}

func TestTrailingBytesAlwaysConsumed(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		name, fields string
		register     bool
		code         status.Code
	}{
		{"unregistered", `"content":{"typename":"t","b":{"inline":0}}`, false, status.Invalid},
		{"bad fields", `"content":{"typename":"t"},"seal":"x"`, true, status.Invalid},
		{"bad tree json", `"content":{"typename":7}`, true, status.MetaTreeInvalid},
		{"bad utf8", "\"content\":{\"typename\":\"\xff\"}", true, status.Invalid},
		{"seal and inline", `"content":{"typename":"t"},"seal":[1]`, true, status.Invalid},
		{"bad tree", `"content":{"no_typename":1,"b":{"inline":0}}`, true, status.MetaTreeInvalid},
		{"ok", `"content":{"typename":"t","b":{"inline":0}}`, true, status.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dial(t, s)
			if tc.register {
				r.rpc(`{"type":"register_request"}`)
			}
			r.sendRaw(inlineFrame(tc.fields))
			m := r.recv()
			if tc.code == status.OK {
				if m["type"] != "create_data_reply" {
					t.Fatalf("inline create: %v", m)
				}
			} else if m["code"] != float64(tc.code) {
				t.Fatalf("reply %v, want code %v", m, tc.code)
			}
			want := "exists_reply"
			if !tc.register {
				want = "register_reply"
				r.send(`{"type":"register_request"}`)
			} else {
				r.send(`{"type":"exists_request","id":1}`)
			}
			if m := r.recv(); m["type"] != want {
				t.Fatalf("next request answered with %v, want %s", m, want)
			}
		})
	}
}

func TestTrailingCountUnknownCloses(t *testing.T) {
	s := start(t)
	for name, body := range map[string]string{
		"over the frame limit": `{"type":"create_data_request","content":{"typename":"t"},"inline":[1099511627776]}`,
		"overflowing":          `{"type":"create_data_request","content":null,"inline":[9223372036854775807,9]}`,
		"unreadable":           `{"type":"create_data_request","content":null,"inline":"many"}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := dial(t, s)
			r.rpc(`{"type":"register_request"}`)
			r.send(body)
			if m := r.recv(); m["code"] != float64(status.Invalid) {
				t.Fatalf("reply %v, want Invalid", m)
			}
			if !r.closed() {
				t.Fatal("connection still open")
			}
		})
	}
	// The daemon serves other connections.
	if m := dial(t, s).rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("other connection: %v", m)
	}
}

// TestEveryRequestHandled sends every request kind of the protocol table,
// zero-valued, and checks each gets a reply of its reply type or an error
// reply with a message: nothing falls through the handler table.
func TestEveryRequestHandled(t *testing.T) {
	for _, k := range protocol.Kinds() {
		if handlers[k] == nil {
			t.Errorf("no handler for %s", k)
		}
	}
	s := start(t)
	r := dial(t, s)
	r.rpc(`{"type":"register_request"}`)
	for _, k := range protocol.Kinds() {
		if k == protocol.KindExit {
			continue
		}
		body, err := protocol.EncodeRequest(k.String(), k.New())
		if err != nil {
			t.Fatal(err)
		}
		m := r.rpc(string(body))
		if code, isErr := m["code"]; isErr {
			if msg, _ := m["message"].(string); code == float64(0) || msg == "" {
				t.Errorf("%s: error reply without code or message: %v", k, m)
			}
			continue
		}
		if m["type"] != k.Reply() {
			t.Errorf("%s: reply %v, want type %s", k, m, k.Reply())
		}
	}
	r.send(`{"type":"exit_request"}`)
	if !r.closed() {
		t.Fatal("exit_request left the connection open")
	}
}
