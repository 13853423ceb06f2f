package client

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/status"
)

// TestTreeOfSaysWhenEtcdWasAway: a missing id is ObjectNotExists; when the
// daemon could not catch up with etcd, the message says so.
func TestTreeOfSaysWhenEtcdWasAway(t *testing.T) {
	id := ids.ObjectID(0x1234)
	for _, tc := range []struct {
		sync, want string
	}{
		{"", "does not exist"},
		{"etcd: deadline exceeded", "could not catch up with etcd to look for it on the others: etcd: deadline exceeded"},
	} {
		_, err := treeOf(&protocol.GetDataReply{Content: json.RawMessage(`{}`), SyncError: tc.sync}, id)
		if status.CodeOf(err) != status.ObjectNotExists || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sync error %q: %v", tc.sync, err)
		}
	}
	tree, err := treeOf(&protocol.GetDataReply{Content: json.RawMessage(`{"o0000000000001234":{"a":1}}`),
		SyncError: "x"}, id)
	if err != nil || string(tree) != `{"a":1}` {
		t.Errorf("a present id: %s, %v", tree, err)
	}
}

// A delete of more ids than a request takes (protocol.MaxItems) goes in
// parts with the result of one request: without deep or force, an object
// a later part's object used is deleted by another pass once that object
// is gone, not kept.
func TestDeleteLongListNested(t *testing.T) {
	srv := startServer(t, 64<<20)
	c := connect(t, srv)
	inner, innerBlob := put(t, c, []byte("inner"))
	outer, err := c.Create([]byte(fmt.Sprintf(`{"typename":"vineyard::Tuple","__elements_-size":1,"__elements_-0":{"id":"%v"}}`, inner)), nil)
	if err != nil {
		t.Fatal(err)
	}
	// inner in the first part, outer in the second; ids nothing has between.
	idl := []ids.ObjectID{inner}
	for i := range protocol.MaxItems {
		idl = append(idl, ids.ObjectID(0x7000_0000_0000_0000+uint64(i)))
	}
	idl = append(idl, outer)
	deleted, err := c.Delete(idl, false, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []ids.ObjectID{inner, outer, innerBlob} {
		if ok, err := c.Exists(id); ok || err != nil {
			t.Fatalf("%v exists after the delete (%v); deleted blobs %v", id, err, deleted)
		}
	}
	if !slices.Equal(deleted, []ids.ObjectID{innerBlob}) {
		t.Fatalf("deleted blobs %v, want %v", deleted, innerBlob)
	}
	checkStore(t, srv)
}

// A reply larger than a request frame (64 MiB), up to the daemon's reply
// limit (256 MiB by default), reaches the client whole: the client once
// read at most 64 MiB and dropped the connection on such a reply.
func TestReplyLargerThanARequestFrame(t *testing.T) {
	srv := startServer(t, 64<<20)
	c := connect(t, srv)
	field := strings.Repeat("x", 40<<20)
	for range 2 {
		if _, err := c.Create([]byte(`{"typename":"big","f":"`+field+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	trees, err := c.List("big", false, 0)
	if err != nil || len(trees) < 80<<20 || !json.Valid(trees) {
		t.Fatalf("a list of %d bytes: %v", len(trees), err)
	}
	if ok, err := c.Exists(1); ok || err != nil {
		t.Fatalf("the connection after the reply: %v", err)
	}
}

// A put of more blobs than a request carries (protocol.MaxItems): blobs
// created one at a time (carved from the lease; a lease holds 1,024 ids,
// so those the daemon does not know yet stay far below the limit) and all
// at once, then one object of them all, sealed and readable:
// CreateBuffers and the seals go in parts.
func TestCreateOfMoreBlobsThanARequestCarries(t *testing.T) {
	srv := startServer(t, 256<<20)
	c := connect(t, srv)
	n := 2 * (protocol.MaxItems + 100)
	var bids []ids.ObjectID
	for i := range n / 2 { // one at a time
		bid, buf, err := c.CreateBuffer(8)
		if err != nil {
			t.Fatal(err)
		}
		binary.LittleEndian.PutUint64(buf, uint64(i))
		bids = append(bids, bid)
	}
	sizes := make([]uint64, n-n/2)
	for i := range sizes {
		sizes[i] = 8
	}
	bufs, err := c.CreateBuffers(sizes) // more than a request takes, with the others pending
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bufs {
		binary.LittleEndian.PutUint64(b.Data, uint64(n/2+i))
		bids = append(bids, b.ID)
	}
	var tree strings.Builder
	tree.WriteString(`{"typename":"many"`)
	for i, bid := range bids {
		fmt.Fprintf(&tree, `,"m%d":{"id":"%v"}`, i, bid)
	}
	tree.WriteString("}")
	id, err := c.Create([]byte(tree.String()), bids)
	if err != nil {
		t.Fatal(err)
	}
	other := connect(t, srv)
	datas, err := other.GetBuffers(bids[len(bids)-10:], false)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range datas {
		if got := binary.LittleEndian.Uint64(d); got != uint64(n-10+i) {
			t.Fatalf("blob %d holds %d", n-10+i, got)
		}
	}
	if err := other.Close(); err != nil { // its references go with it
		t.Fatal(err)
	}
	if err := c.Release(id); err != nil { // the references sealing took, ahead or not
		t.Fatal(err)
	}
	if _, err := c.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if used := usedAfterReleases(t, srv, c); used != 0 {
		t.Fatalf("%d bytes used after the delete", used)
	}
	checkStore(t, srv)
}

// GetBuffers of more blobs than a request carries, by round trip, goes in
// parts; when a part fails, the references the parts before took are
// dropped, but not one the client held before the call.
func TestGetBuffersInParts(t *testing.T) {
	srv := startServer(t, 256<<20)
	a := connect(t, srv)
	n := protocol.MaxItems + 10
	sizes := make([]uint64, n)
	for i := range sizes {
		sizes[i] = 8
	}
	bufs, err := a.CreateBuffers(sizes)
	if err != nil {
		t.Fatal(err)
	}
	var tree strings.Builder
	tree.WriteString(`{"typename":"many"`)
	bids := make([]ids.ObjectID, n)
	for i, b := range bufs {
		binary.LittleEndian.PutUint64(b.Data, uint64(i))
		bids[i] = b.ID
		fmt.Fprintf(&tree, `,"m%d":{"id":"%v"}`, i, b.ID)
	}
	tree.WriteString("}")
	id, err := a.Create([]byte(tree.String()), bids)
	if err != nil {
		t.Fatal(err)
	}
	for _, bid := range bids {
		_ = a.Release(bid) // sealing's references
	}
	b, err := Connect(srv.Socket(), WithoutDirectory())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.GetBuffers(bids[:1], false); err != nil { // held before
		t.Fatal(err)
	}
	missing := ids.ObjectID(1<<63 | 12345)
	if _, err := b.GetBuffers(append(slices.Clone(bids), missing), false); status.CodeOf(err) != status.ObjectNotExists {
		t.Fatalf("a get of a missing blob in the second part: %v", err)
	}
	datas, err := b.GetBuffers(bids, false)
	if err != nil || len(datas) != n || binary.LittleEndian.Uint64(datas[n-1]) != uint64(n-1) {
		t.Fatalf("%d blobs got: %v", len(datas), err)
	}
	for _, bid := range bids {
		if err := b.Release(bid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if usedAfterReleases(t, srv, a, b) == 0 {
		t.Fatal("the blob the client held before the failed get was freed")
	}
	if err := b.Release(bids[0]); err != nil {
		t.Fatal(err)
	}
	if used := usedAfterReleases(t, srv, b); used != 0 {
		t.Fatalf("%d bytes used after every release", used)
	}
	checkStore(t, srv)
}

// usedAfterReleases sends the queued releases of clients and returns the
// bytes the store then uses.
func usedAfterReleases(t *testing.T, srv *server.Server, clients ...*Client) uint64 {
	t.Helper()
	for _, c := range clients {
		if err := c.FlushReleases(); err != nil {
			t.Fatal(err)
		}
	}
	used, _ := srv.Store().Usage()
	return used
}
