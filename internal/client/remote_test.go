package client

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/servertest"
	"github.com/v6d-io/v6d-go/internal/status"
)

// startRPCServer runs a real daemon with a TCP listener on a free loopback
// port; secret "" requires none.
func startRPCServer(t testing.TB, size uint64, secret string) *server.Server {
	t.Helper()
	return servertest.StartRPC(t, server.Config{Size: size}, secret)
}

func connectRPCTest(t testing.TB, srv *server.Server, opts ...Option) *Client {
	t.Helper()
	c, err := ConnectRPC(srv.RPCEndpoint(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(n)})
	_, _ = r.Read(b)
	return b
}

// TestRemotePutGet puts over TCP and gets over TCP and over IPC, and the
// other way round: the same objects, the same bytes.
func TestRemotePutGet(t *testing.T) {
	srv := startRPCServer(t, 64<<20, "")
	rc := connectRPCTest(t, srv)
	ic := connect(t, srv)
	if !rc.IsRPC() || ic.IsRPC() {
		t.Fatalf("IsRPC: remote %v, ipc %v", rc.IsRPC(), ic.IsRPC())
	}
	data := randomBytes(100_000)
	id, bid := put(t, rc, data) // CreateBuffer, write, CreateMetadata with seal
	if err := rc.Release(id); err != nil {
		t.Fatal(err)
	}
	got, err := ic.Get(bid)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("IPC get of a remote put: err %v, equal %v", err, bytes.Equal(got, data))
	}

	// IPC put, remote get: GetObject and GetBuffers.
	data2 := randomBytes(3 << 20)
	id2, bid2 := put(t, ic, data2)
	tree, err := rc.GetObject(id2)
	if err != nil || !strings.Contains(string(tree), bid2.String()) {
		t.Fatalf("GetObject: %v %s", err, tree)
	}
	view, writable, err := rc.BlobPointer(bid2)
	if err != nil || writable || !bytes.Equal(view, data2) {
		t.Fatalf("BlobPointer after a remote GetObject: err %v, equal %v", err, bytes.Equal(view, data2))
	}
	view[0] ^= 0xff // a private copy: writing it changes nothing stored
	if err := rc.Release(id2); err != nil {
		t.Fatal(err)
	}
	bufs, err := rc.GetBuffers([]ids.ObjectID{bid2, ids.EmptyBlob, bid2}, false)
	if err != nil || !bytes.Equal(bufs[0], data2) || bufs[1] != nil || !bytes.Equal(bufs[2], data2) {
		t.Fatalf("GetBuffers: %v", err)
	}
	for range 2 {
		if err := rc.Release(bid2); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.Release(bid2); code(err) != status.ObjectNotExists {
		t.Fatalf("third release of a blob got twice: %v", err)
	}

	// Seal of a single buffer, metadata, names, list, delete.
	bid3, buf, err := rc.CreateBuffer(10)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "0123456789")
	if err := rc.Seal(bid3); err != nil {
		t.Fatal(err)
	}
	if got, err := ic.Get(bid3); err != nil || string(got) != "0123456789" {
		t.Fatalf("IPC get of a remote Seal: %q %v", got, err)
	}
	if err := rc.Persist(id); err != nil {
		t.Fatal(err)
	}
	if err := rc.PutName(id, "remote-x"); err != nil {
		t.Fatal(err)
	}
	if got, err := rc.GetName("remote-x", false, 0); err != nil || got != id {
		t.Fatalf("GetName: %v %v", got, err)
	}
	list, err := rc.List("vineyard::Tensor*", false, 10)
	if err != nil || !strings.Contains(string(list), id.String()) {
		t.Fatalf("List: %v %s", err, list)
	}
	if _, err := rc.Delete([]ids.ObjectID{id2}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if ok, err := rc.Exists(id2); err != nil || ok {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
	if _, err := rc.MapPrivate(bid); code(err) != status.Invalid {
		t.Fatalf("MapPrivate over TCP: %v", err)
	}
	var meta map[string]map[string]any
	raw, err := rc.ClusterMeta()
	if err != nil || json.Unmarshal(raw, &meta) != nil {
		t.Fatalf("ClusterMeta: %v %s", err, raw)
	}
	for _, inst := range meta {
		if inst["rpc_endpoint"] != srv.RPCEndpoint() {
			t.Fatalf("cluster meta rpc_endpoint %v, want %s", inst["rpc_endpoint"], srv.RPCEndpoint())
		}
	}
}

// TestRemoteLarge moves more than 64 MiB each way, which only works in
// chunks: upstream's create_remote_buffers, then get_remote_buffers; then
// the CreateBuffer path (fill_buffers_request).
func TestRemoteLarge(t *testing.T) {
	const n = 72 << 20
	srv := startRPCServer(t, 2*n+(8<<20), "")
	rc := connectRPCTest(t, srv)
	data := randomBytes(n)
	bids, err := rc.CreateRemoteBuffers([][]byte{data[:1000], data})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rc.GetBuffers(bids, false)
	if err != nil || !bytes.Equal(got[0], data[:1000]) || !bytes.Equal(got[1], data) {
		t.Fatalf("remote get of %d bytes: err %v", n, err)
	}
	for _, b := range bids {
		if err := rc.Release(b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.Delete(bids, true, false, false); err != nil {
		t.Fatal(err)
	}
	if err := rc.FlushReleases(); err != nil {
		t.Fatal(err)
	}
	bid, buf, err := rc.CreateBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, data)
	if err := rc.Seal(bid); err != nil {
		t.Fatal(err)
	}
	ic := connect(t, srv)
	if got, err := ic.Get(bid); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("IPC get of a %d-byte remote Seal: %v", n, err)
	}
}

// TestRemoteManyBlobs gets more blobs over TCP in one call than one writev
// takes (the daemon writes the reply and the bytes in writevs of at most
// 1024 buffers), with a blob larger than one write's bulk chunk among them.
func TestRemoteManyBlobs(t *testing.T) {
	srv := startRPCServer(t, 64<<20, "")
	rc := connectRPCTest(t, srv)
	data := make([][]byte, 1500)
	for i := range data {
		data[i] = randomBytes(1 + i%97)
	}
	data[700] = randomBytes(9 << 20)
	bids, err := rc.CreateRemoteBuffers(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rc.GetBuffers(bids, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		if !bytes.Equal(got[i], data[i]) {
			t.Fatalf("blob %d of %d: %d bytes, want %d, equal %v", i, len(data), len(got[i]), len(data[i]), bytes.Equal(got[i], data[i]))
		}
	}
	// The connection is still in step.
	if got, err := rc.GetBuffers(bids[:1], false); err != nil || !bytes.Equal(got[0], data[0]) {
		t.Fatalf("a get after: %v", err)
	}
}

// TestRemoteAuth: a daemon with a secret refuses a client without it, or
// with a wrong one, and serves one with it.
func TestRemoteAuth(t *testing.T) {
	srv := startRPCServer(t, 4<<20, "s3cret")
	for _, secret := range []string{"", "wrong", "s3cre", "s3cret!"} {
		if _, err := ConnectRPC(srv.RPCEndpoint(), WithSecret(secret)); code(err) != status.ConnectionFailed ||
			!strings.Contains(err.Error(), "secret") {
			t.Fatalf("secret %q: %v", secret, err)
		}
	}
	t.Setenv(RPCSecretEnv, "s3cret")
	c := connectRPCTest(t, srv)
	if _, err := c.InstanceStatus(); err != nil {
		t.Fatal(err)
	}
	// IPC clients need no secret: the socket's permissions guard it.
	if _, err := connect(t, srv).InstanceStatus(); err != nil {
		t.Fatal(err)
	}
}

func TestConnectRPCErrors(t *testing.T) {
	t.Setenv(RPCEndpointEnv, "")
	if _, err := ConnectRPC(""); code(err) != status.ConnectionFailed {
		t.Fatalf("no endpoint: %v", err)
	}
	if _, err := ConnectRPC("127.0.0.1:1"); code(err) != status.ConnectionFailed {
		t.Fatalf("nothing listening: %v", err)
	}
	srv := startRPCServer(t, 4<<20, "")
	t.Setenv(RPCEndpointEnv, "127.0.0.1:1,"+srv.RPCEndpoint())
	c := connectRPCTest(t, srv)
	if !c.IsRPC() {
		t.Fatal("not remote")
	}
}
