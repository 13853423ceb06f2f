package alloc

import (
	"testing"

	"github.com/v6d-io/v6d-go/internal/protocol"
)

// TestAlignmentIsTheProtocols: clients carve blobs from a lease at
// protocol.BlobAlignment without knowing the allocator, which must place
// blobs the same way.
func TestAlignmentIsTheProtocols(t *testing.T) {
	if Alignment != protocol.BlobAlignment {
		t.Fatalf("alloc.Alignment %d, protocol.BlobAlignment %d", Alignment, protocol.BlobAlignment)
	}
}
