package store

import (
	"go/build"
	"slices"
	"testing"
)

// TestNoWireDependency keeps the store independent of the wire (issue 9):
// the server turns store types into protocol messages, never the store.
func TestNoWireDependency(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pkg.Imports, "github.com/v6d-io/v6d-go/internal/protocol") {
		t.Fatal("internal/store imports internal/protocol")
	}
}
