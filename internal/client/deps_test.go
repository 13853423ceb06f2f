package client

import (
	"go/build"
	"slices"
	"testing"
)

// TestNoAllocatorDependency: the client knows the daemon through the
// protocol and the shared-memory layouts only, never its allocator.
func TestNoAllocatorDependency(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pkg.Imports, "github.com/v6d-io/v6d-go/internal/alloc") {
		t.Fatal("internal/client imports internal/alloc")
	}
}
