package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
)

// startEtcdDaemon starts a daemon with the etcd backend of srv.
func startEtcdDaemon(t *testing.T, srv *etcdtest.Server) *Server {
	t.Helper()
	return startCfg(t, Config{Meta: "etcd", EtcdEndpoints: []string{srv.Endpoint()}, EtcdPrefix: "server-test",
		EtcdTimeout: 5 * time.Second, EtcdLeaseTTL: 5 * time.Second})
}

// clusterMetaOf asks for cluster_meta and returns its "meta".
func clusterMetaOf(t *testing.T, r *raw) map[string]any {
	t.Helper()
	reply := r.rpc(`{"type":"cluster_meta"}`)
	meta, ok := reply["meta"].(map[string]any)
	if !ok {
		t.Fatalf("cluster_meta: %v", reply)
	}
	return meta
}

// TestClusterThroughTheDaemon: two daemons on one etcd have distinct
// instance ids, both list both in cluster_meta, and an object persisted on
// one is found by a get_data on the other at once (the miss syncs).
func TestClusterThroughTheDaemon(t *testing.T) {
	srv := etcdtest.Run(t)
	a, b := startEtcdDaemon(t, srv), startEtcdDaemon(t, srv)
	if a.Store().InstanceID() == b.Store().InstanceID() {
		t.Fatalf("both daemons have instance id %d", a.Store().InstanceID())
	}
	ra, rb := dial(t, a), dial(t, b)
	for _, r := range []*raw{ra, rb} {
		r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	}
	meta := clusterMetaOf(t, rb)
	for _, s := range []*Server{a, b} {
		entry, ok := meta[fmt.Sprintf("i%d", s.Store().InstanceID())].(map[string]any)
		if !ok || entry["ipc_socket"] != s.Socket() {
			t.Fatalf("cluster_meta %v lacks instance %d at %s", meta, s.Store().InstanceID(), s.Socket())
		}
		if _, isNumber := entry["hostid"].(float64); !isNumber {
			t.Fatalf("hostid %v is not a number", entry["hostid"])
		}
	}
	created := ra.rpc(`{"type":"create_data_request","content":{"typename":"t","x":1}}`)
	id := uint64(created["id"].(float64))
	if reply := ra.rpc(fmt.Sprintf(`{"type":"persist_request","id":%d}`, id)); reply["code"] != nil {
		t.Fatalf("persist: %v", reply)
	}
	got := rb.rpc(fmt.Sprintf(`{"type":"get_data_request","id":[%d]}`, id))
	content, _ := got["content"].(map[string]any)
	if len(content) != 1 {
		t.Fatalf("get_data on the other daemon right after persist: %v", got)
	}
}

// TestEtcdUnreachableAtStart: Start fails within the timeout, naming the
// endpoint, and leaves no socket behind.
func TestEtcdUnreachableAtStart(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	_, err := Start(Config{Socket: sock, Size: 4 << 20, Meta: "etcd",
		EtcdEndpoints: []string{"http://127.0.0.1:1"}, EtcdTimeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1") {
		t.Fatalf("Start: %v, want an error naming the endpoint", err)
	}
	if _, statErr := os.Stat(sock); statErr == nil {
		t.Fatal("a failed start left its socket")
	}
}

// TestClusterMetaLocal: the local backend reports this daemon alone, in
// upstream's shape.
func TestClusterMetaLocal(t *testing.T) {
	s := start(t)
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	meta := clusterMetaOf(t, r)
	entry, ok := meta["i0"].(map[string]any)
	if len(meta) != 1 || !ok || entry["ipc_socket"] != s.Socket() {
		t.Fatalf("cluster_meta %v", meta)
	}
	if _, isNumber := entry["hostid"].(float64); !isNumber {
		t.Fatalf("hostid %v is not a number", entry["hostid"])
	}
}

// TestGetWhileEtcdIsAwaySaysSo: a get of an id this daemon does not know,
// while etcd cannot be reached, still answers what the daemon has (local
// gets keep working), and its reply carries sync_error: the object may
// exist on another instance.
func TestGetWhileEtcdIsAwaySaysSo(t *testing.T) {
	srv := etcdtest.Run(t)
	s := startCfg(t, Config{Meta: "etcd", EtcdEndpoints: []string{srv.Endpoint()}, EtcdPrefix: "away-test",
		EtcdTimeout: time.Second, EtcdLeaseTTL: 5 * time.Second})
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	created := r.rpc(`{"type":"create_data_request","content":{"typename":"t","x":1}}`)
	known := uint64(created["id"].(float64))
	const unknown = 0x0123456789abcdef >> 1
	for _, buffers := range []bool{false, true} {
		got := r.rpc(fmt.Sprintf(`{"type":"get_data_request","id":[%d],"with_buffers":%v}`, unknown, buffers))
		if _, has := got["sync_error"]; has || got["code"] != nil {
			t.Fatalf("with etcd up, a get of an unknown id (with_buffers %v): %v", buffers, got)
		}
	}
	srv.Stop()
	for _, buffers := range []bool{false, true} {
		got := r.rpc(fmt.Sprintf(`{"type":"get_data_request","id":[%d],"with_buffers":%v}`, unknown, buffers))
		if msg, _ := got["sync_error"].(string); got["code"] != nil || msg == "" {
			t.Fatalf("with etcd away, a get of an unknown id (with_buffers %v): %v", buffers, got)
		}
		got = r.rpc(fmt.Sprintf(`{"type":"get_data_request","id":[%d],"with_buffers":%v}`, known, buffers))
		if content, _ := got["content"].(map[string]any); got["code"] != nil || len(content) != 1 {
			t.Fatalf("with etcd away, a get of a local object (with_buffers %v): %v", buffers, got)
		}
	}
}
