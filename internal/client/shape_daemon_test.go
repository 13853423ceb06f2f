package client

import (
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// getShape gets id as libv6d's v6d_get_object_shaped does and returns the
// tree, the daemon's shape number that came with it and the process's.
func getShape(t *testing.T, c *Client, id ids.ObjectID) (string, uint64, uint64) {
	t.Helper()
	var text string
	var daemons uint64
	if _, _, err := c.GetObjectViews(id, nil, func(tree []byte, shape uint64) {
		text, daemons = string(tree), shape
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(id); err != nil {
		t.Fatal(err)
	}
	return text, daemons, c.TreeShapeOf(daemons, []byte(text))
}

// TestShapesFromTheDaemon: a get, from the directory or by round trip,
// hands over the daemon's shape number of the tree; TreeShapeOf turns it into the process's number, the
// one TreeShape finds in the text. Two daemons number their first shapes
// alike, but the process's numbers of different shapes stay apart.
func TestShapesFromTheDaemon(t *testing.T) {
	srv1, srv2 := startServer(t, 16<<20), startServer(t, 16<<20)
	a, b := connect(t, srv1), connect(t, srv2)
	id1, _ := put(t, a, []byte("12345678"))
	id2, _ := put(t, a, []byte("abcdefgh")) // the same shape
	text1, d1, p1 := getShape(t, a, id1)
	_, d2, p2 := getShape(t, a, id2)
	if d1 == 0 || d1 != d2 {
		t.Fatalf("the daemon's shapes of two tensors of one shape: %d and %d", d1, d2)
	}
	if p1 == 0 || p1 != p2 || p1 != TreeShape([]byte(text1)) {
		t.Fatalf("process shapes %d and %d, TreeShape %d", p1, p2, TreeShape([]byte(text1)))
	}
	// A round trip's get_data reply carries the same number.
	rt, err := Connect(srv1.Socket(), WithoutDirectory())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Close() }()
	before := rt.roundTrips.Load()
	if _, d, p := getShape(t, rt, id2); d != d1 || p != p1 || rt.roundTrips.Load() == before {
		t.Fatalf("by round trip: daemon's %d, process's %d; by the directory %d, %d", d, p, d1, p1)
	}
	id3, _ := put(t, b, []byte("a longer value")) // another shape, on another daemon
	_, d3, p3 := getShape(t, b, id3)
	if d3 == 0 || p3 == 0 || p3 == p1 {
		t.Fatalf("another daemon's other shape: daemon's %d (the first's %d), process's %d (the first's %d)", d3, d1, p3, p1)
	}
	if d3 != d1 { // fresh daemons number alike: the case the map is for
		t.Fatalf("the daemons numbered their first shapes %d and %d: the test needs them equal", d1, d3)
	}
}
