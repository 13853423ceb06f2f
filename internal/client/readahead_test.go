package client

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// TestReadAhead checks the replies read through the read-ahead buffer
// (create_data and acknowledgements): a reply larger than the buffer, a
// put whose exchange carries deferred releases ahead of it, an error reply
// in the middle, and that the arena fds a get needs right after still
// arrive (its replies are read without reading ahead).
func TestReadAhead(t *testing.T) {
	srv := startServer(t, 16<<20)
	c, reader := connect(t, srv), connect(t, srv)

	// A tree whose reply (with_content) is over the buffer.
	long := strings.Repeat("x", 3*readAheadSize)
	id, tree, err := c.CreateMetadata([]byte(fmt.Sprintf(`{"typename":"big","v":%q}`, long)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(tree, []byte(long)) || !bytes.Contains(tree, []byte(id.String())) {
		t.Fatalf("the reply over the buffer came back as %d bytes", len(tree))
	}

	// Puts of small blobs: each put is one read-ahead exchange.
	var puts []ids.ObjectID
	for i := range 50 {
		id, _, err := c.CreateInline([]byte(`{"typename":"t","b":{"inline":0}}`), [][]byte{[]byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		puts = append(puts, id)
	}
	// An error reply leaves the stream in step.
	if _, err := c.Create([]byte(`{"typename":"t","m":{"id":"o0000000000000123"}}`), nil); err == nil {
		t.Fatal("a missing member was accepted")
	}
	// The reader has no arena yet: its get must receive the fd.
	tree, err = reader.GetMetadata(puts[7])
	if err != nil {
		t.Fatal(err)
	}
	var blob ids.ObjectID
	for _, f := range strings.Split(string(tree), `"`) {
		if b, err := ids.Parse(f); err == nil && b.IsBlob() {
			blob = b
		}
	}
	got, err := reader.Get(blob)
	if err != nil || string(got) != "7" {
		t.Fatalf("get after read-ahead puts: %q, %v (tree %s)", got, err, tree)
	}
	// Releases deferred by the reader go ahead of its next put, in one
	// exchange read ahead: the acknowledgements and the reply.
	if err := reader.Release(blob); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reader.CreateInline(nil, [][]byte{[]byte("after")}); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Exists(puts[0]); err != nil || !ok {
		t.Fatalf("exists after read-ahead exchanges: %v, %v", ok, err)
	}
}
