package ctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/servertest"
)

// TestCluster: two daemons sharing an etcd. What one persisted, vineyardctl
// on the other inspects (its blobs are on the first: not local), lists,
// and gets (the bytes come over the peer service); status lists both.
func TestCluster(t *testing.T) {
	etcd := etcdtest.Run(t)
	cfg := server.Config{Meta: "etcd", EtcdEndpoints: []string{etcd.Endpoint()}, EtcdPrefix: "ctl-test",
		EtcdTimeout: 5 * time.Second, EtcdLeaseTTL: 5 * time.Second, PeerEndpoint: "127.0.0.1:0"}
	a, b := servertest.Start(t, cfg), servertest.Start(t, cfg)
	onA, onB := "--socket="+a.Socket(), "--socket="+b.Socket()
	file := npyFile(t, []uint64{4, 5}, false)
	id := strings.TrimSpace(ok(t, "put", onA, "--persist", writeFile(t, file, "m.npy")))

	var in inspection
	if err := json.Unmarshal([]byte(ok(t, "inspect", onB, id, "-o", "json")), &in); err != nil {
		t.Fatal(err)
	}
	if in.Instance != a.Store().InstanceID() || !in.Persisted || len(in.Blobs) != 1 ||
		in.Blobs[0].Local || in.Blobs[0].Instance != a.Store().InstanceID() {
		t.Fatalf("inspect on the other daemon: %+v (a is instance %d, b %d)", in, a.Store().InstanceID(), b.Store().InstanceID())
	}
	if text := ok(t, "inspect", onB, id); !strings.Contains(text, "0 on this instance") || !strings.Contains(text, "1 elsewhere") {
		t.Fatalf("inspect:\n%s", text)
	}
	for !strings.Contains(ok(t, "ls", onB), id) { // b follows etcd's watch
		waitABit()
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(ok(t, "status", onB, "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Cluster) != 2 {
		t.Fatalf("status: %d instances, want 2: %v", len(rep.Cluster), rep.Cluster)
	}
	out := filepath.Join(t.TempDir(), "m.npy")
	var res getResult
	if err := json.Unmarshal([]byte(ok(t, "get", onB, id, "-o", out, "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); string(got) != string(file) {
		t.Fatal("the .npy got from the other daemon differs from the one put")
	}
	if res.FetchedFrom == nil || *res.FetchedFrom != a.Store().InstanceID() || res.LocalCopy == "" || res.LocalCopy == id {
		t.Fatalf("get on the other daemon: %+v", res)
	}
	// On the daemon that holds it, nothing is copied.
	res = getResult{}
	if err := json.Unmarshal([]byte(ok(t, "get", onA, id, "-o", filepath.Join(t.TempDir(), "a.npy"), "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.FetchedFrom != nil || res.LocalCopy != "" {
		t.Fatalf("get on the owner: %+v", res)
	}
}
