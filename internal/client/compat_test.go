package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

// upstreamMode makes c behave as against upstream's daemon (no extension):
// our daemon answers upstream's messages too, so every fallback path runs
// against the real daemon.
func upstreamMode(c *Client) *Client {
	c.ext = extSet{}
	c.state.epochOffset = 0
	c.d = dialectFor(c, false)
	c.accels, c.accelOn = nil, AccelNone // our daemon's
	return c
}

func TestConnectLearnsExtensions(t *testing.T) {
	c := connect(t, startServer(t, 16<<20))
	if c.Upstream() || !c.ext.seal || !c.ext.inline || !c.ext.withBuffers || !c.ext.releaseIDs {
		t.Fatalf("extensions of our daemon not learnt: %+v", c.ext)
	}
	if e := parseExtensions(nil); e != (extSet{}) {
		t.Fatalf("no extensions named, got %+v", e)
	}
}

func TestUpstreamFallbackPutGetNested(t *testing.T) {
	srv := startServer(t, 16<<20)
	c := upstreamMode(connect(t, srv))
	reader := upstreamMode(connect(t, srv))
	bid, buf, err := c.CreateBuffer(5)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "hello")
	// A new member without an id: upstream creates one object per
	// create_data, so the client creates it first.
	tree := fmt.Sprintf(`{"typename":"vineyard::Outer","x":1,"inner_":{"typename":"vineyard::Tensor<uint8>","shape_":"[5]","buffer_":{"id":"%v"}}}`, bid)
	id, stored, err := c.CreateMetadata([]byte(tree), []ids.ObjectID{bid})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(stored, []byte(`"vineyard::Outer"`)) {
		t.Fatalf("stored tree %s", stored)
	}
	got, err := reader.GetObject(id)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Inner struct {
			Buffer struct {
				Length int `json:"length"`
			} `json:"buffer_"`
		} `json:"inner_"`
	}
	if err := json.Unmarshal(got, &parsed); err != nil || parsed.Inner.Buffer.Length != 5 {
		t.Fatalf("tree %s: blob length %d (%v)", got, parsed.Inner.Buffer.Length, err)
	}
	data, _, err := reader.BlobPointer(bid)
	if err != nil || string(data) != "hello" {
		t.Fatalf("blob %q, %v", data, err)
	}
	if err := reader.Release(id); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(id); err != nil {
		t.Fatal(err)
	}
	if err := c.FlushReleases(); err != nil { // one release_request per blob
		t.Fatal(err)
	}
}

func TestUpstreamFallbackInline(t *testing.T) {
	srv := startServer(t, 16<<20)
	c := upstreamMode(connect(t, srv))
	id, bids, err := c.CreateInline([]byte(`{"typename":"vineyard::Tensor<uint8>","shape_":"[3]","buffer_":{"inline":0}}`),
		[][]byte{[]byte("abc")})
	if err != nil {
		t.Fatal(err)
	}
	r := connect(t, srv)
	if _, err := r.GetObject(id); err != nil {
		t.Fatal(err)
	}
	data, _, err := r.BlobPointer(bids[0])
	if err != nil || string(data) != "abc" {
		t.Fatalf("blob %q, %v", data, err)
	}
}

func TestUpstreamFallbackFailedPutLeaksNothing(t *testing.T) {
	srv := startServer(t, 16<<20)
	c := upstreamMode(connect(t, srv))
	used0, _ := srv.Store().Usage()
	bid, _, err := c.CreateBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	// The member is fine, the root refers to an object that does not exist.
	tree := fmt.Sprintf(`{"typename":"vineyard::Outer","a_":{"typename":"vineyard::Tensor<uint8>","buffer_":{"id":"%v"}},"b_":{"id":"o0000000000000123"}}`, bid)
	if _, _, err := c.CreateMetadata([]byte(tree), []ids.ObjectID{bid}); err == nil {
		t.Fatal("a tree with a missing member was created")
	}
	if err := c.FlushReleases(); err != nil {
		t.Fatal(err)
	}
	if used, _ := srv.Store().Usage(); used != used0 {
		t.Fatalf("%d bytes in use after a failed put, %d before", used, used0)
	}
	if ok, _ := c.Exists(bid); ok {
		t.Fatalf("blob %v of the failed put still exists", bid)
	}
}

func TestListDataReplyIsUpstreams(t *testing.T) {
	if got := protocol.KindListData.Reply(); got != "get_data_reply" {
		t.Fatalf("list_data is answered with %q, upstream answers get_data_reply", got)
	}
	c := connect(t, startServer(t, 16<<20))
	put(t, c, []byte("x"))
	trees, err := c.List("vineyard::Tensor*", false, 0)
	if err != nil || !bytes.Contains(trees, []byte("vineyard::Tensor<uint8>")) {
		t.Fatalf("list: %s, %v", trees, err)
	}
}

func TestBlobIDsAndSizes(t *testing.T) {
	tree := []byte(`{"id":"o0000000000000001","a":{"id":"o8000000000000002","length":0},"b":{"c":{"id":"o8000000000000003"}},"e":{"id":"o8000000000000000"}}`)
	got := blobIDs(tree)
	if len(got) != 2 {
		t.Fatalf("blob ids %v", got)
	}
	sized := withBlobSizes(tree, map[ids.ObjectID][]byte{got[0]: make([]byte, 7), got[1]: make([]byte, 9)})
	if !bytes.Contains(sized, []byte(`"length":7`)) || !bytes.Contains(sized, []byte(`"length":9`)) {
		t.Fatalf("sizes not set: %s", sized)
	}
}

func TestUpstreamFallbackFailedSealAbortsTheRest(t *testing.T) {
	srv := startServer(t, 16<<20)
	c := upstreamMode(connect(t, srv))
	used0, _ := srv.Store().Usage()
	bufs, err := c.CreateBuffers([]uint64{1 << 20, 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// The second id to seal does not exist: the first is sealed, then the
	// put fails; both real blobs must go.
	seal := []ids.ObjectID{bufs[0].ID, ids.ObjectID(1<<63 | 12345), bufs[1].ID}
	if _, _, err := c.CreateMetadata([]byte(`{"typename":"vineyard::X"}`), seal); err == nil {
		t.Fatal("a put sealing a missing blob succeeded")
	}
	if err := c.FlushReleases(); err != nil {
		t.Fatal(err)
	}
	if used, _ := srv.Store().Usage(); used != used0 {
		t.Fatalf("%d bytes in use after a failed put, %d before", used, used0)
	}
}
