package server

import (
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/metrics"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// TestMetrics: the server counts requests by type, errors by code,
// connections and the store's events in the registry of its config, and
// instance_status answers from the same values.
func TestMetrics(t *testing.T) {
	reg := metrics.NewRegistry()
	s := startCfg(t, Config{Metrics: reg})
	if s.Metrics() != reg {
		t.Fatal("Server.Metrics is not Config.Metrics")
	}
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	for range 3 {
		r.rpc(`{"type":"exists_request","id":1}`)
	}
	if m := r.rpc(`{"type":"get_name_request","name":"nope","wait":false}`); m["code"] != float64(status.ObjectNotExists) {
		t.Fatalf("get_name of a missing name: %v", m)
	}
	if m := r.rpc(`{"type":"create_data_request","content":{"typename":"vineyard::Scalar","value_":"1"}}`); m["type"] != "create_data_reply" {
		t.Fatalf("create_data: %v", m)
	}
	if n := s.m.requests.Value(int(protocol.KindExists)); n != 3 {
		t.Errorf("exists requests %d, want 3", n)
	}
	if n := s.m.errors.Value(status.ObjectNotExists.String()); n != 1 {
		t.Errorf("ObjectNotExists errors %d, want 1", n)
	}
	if n := s.m.events.Value(int(store.EventCreated)); n != 1 {
		t.Errorf("created events %d, want 1", n)
	}
	st, ok := r.rpc(`{"type":"instance_status_request"}`)["meta"].(map[string]any)
	if !ok {
		t.Fatal("instance_status has no meta")
	}
	if st["ipc_connections"] != float64(s.m.conns.Value(listenerIPC)) || st["ipc_connections"] != 1.0 ||
		st["memory_limit"] != float64(s.m.memLimit.Value()) || st["memory_limit"] != float64(4<<20) {
		t.Errorf("instance_status %v; metrics ipc %d, limit %d", st, s.m.conns.Value(listenerIPC), s.m.memLimit.Value())
	}
	var text strings.Builder
	if err := reg.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`vineyard_requests_total{type="exists_request"} 3`,
		`vineyard_request_errors_total{code="ObjectNotExists"} 1`,
		`vineyard_store_events_total{kind="created"} 1`,
		`vineyard_connections_accepted_total{listener="ipc"} 1`,
		`vineyard_connections{listener="ipc"} 1`,
		`vineyard_objects 1`,
		`vineyard_memory_spilled_bytes 0`,
		`vineyard_streams 0`,
		"# HELP vineyard_memory_limit_bytes ",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics text lacks %q:\n%s", want, text.String())
		}
	}
}
