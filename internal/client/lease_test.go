package client

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// fill writes a pattern of seed into b.
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*31) + seed
	}
}

// putLeased puts one tensor of size bytes (a pattern of seed) over a buffer
// the client carves from its lease, and returns the object and blob ids.
func putLeased(t *testing.T, c *Client, size int, seed byte) (ids.ObjectID, ids.ObjectID) {
	t.Helper()
	bufs, err := c.CreateBuffers([]uint64{uint64(size), 0})
	if err != nil {
		t.Fatal(err)
	}
	fill(bufs[0].Data, seed)
	tree := fmt.Sprintf(`{"typename":"vineyard::Tensor<uint8>","shape_":"[%d]","buffer_":{"id":"%v"},"empty_":{"id":"%v"}}`,
		size, bufs[0].ID, bufs[1].ID)
	id, err := c.Create([]byte(tree), []ids.ObjectID{bufs[0].ID, bufs[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	return id, bufs[0].ID
}

// checkBlob gets blob bid through c and compares it with the pattern.
func checkBlob(t *testing.T, c *Client, bid ids.ObjectID, size int, seed byte) {
	t.Helper()
	got, err := c.Get(bid)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	fill(want, seed)
	if !bytes.Equal(got, want) {
		t.Fatalf("blob %v: bytes differ", bid)
	}
	if err := c.Release(bid); err != nil {
		t.Fatal(err)
	}
}

func TestLeasePutsTakeOneRoundTrip(t *testing.T) {
	needAccel(t, AccelLease)
	srv := startServer(t, 64<<20)
	a, b := connect(t, srv), connect(t, srv)
	if leaseOf(a) == nil {
		t.Fatal("the daemon does not offer leases")
	}
	// The first put leases (a round trip); after that, every put of the
	// same size is one create_data, which renews the lease when short.
	const size = 300 << 10
	putLeased(t, a, size, 0)
	start := a.Stats().RoundTrips
	var objs, blobs []ids.ObjectID
	for i := 1; i <= 20; i++ {
		id, bid := putLeased(t, a, size, byte(i))
		objs, blobs = append(objs, id), append(blobs, bid)
	}
	if n := a.Stats().RoundTrips - start; n != 20 {
		t.Errorf("20 puts took %d round trips, want 20", n)
	}
	for i, bid := range blobs {
		checkBlob(t, b, bid, size, byte(i+1))
		if _, err := b.GetObject(objs[i]); err != nil {
			t.Fatal(err)
		}
		_ = b.Release(objs[i])
	}
	st := srv.Store()
	if err := st.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if st.Leased() == 0 {
		t.Fatal("no memory is leased while a client puts")
	}
	used, _ := st.Usage()
	if want := uint64(21 * size); used != want {
		t.Fatalf("usage %d, want the %d bytes of the blobs (the lease apart)", used, want)
	}
	// Closing the client returns its lease.
	_ = a.Close()
	waitFor(t, func() bool { return st.Leased() == 0 })
	if err := st.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits until cond holds (the daemon handles a close on its own
// goroutine); it fails the test after 10 s.
func TestLeaseBlobsOtherRequests(t *testing.T) {
	needAccel(t, AccelLease)
	srv := startServer(t, 64<<20)
	a := connect(t, srv)
	// Seal, shrink and abort name blobs the daemon learns of ahead of them.
	bufs, err := a.CreateBuffers([]uint64{1000, 2000, 3000})
	if err != nil {
		t.Fatal(err)
	}
	fill(bufs[0].Data, 7)
	if err := a.Seal(bufs[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Shrink(bufs[1].ID, 10); err != nil {
		t.Fatal(err)
	}
	if err := a.Abort(bufs[2].ID); err != nil {
		t.Fatal(err)
	}
	checkBlob(t, connect(t, srv), bufs[0].ID, 1000, 7)
	id, bid := put(t, a, []byte("inline after a lease"))
	if _, err := a.GetObject(id); err != nil {
		t.Fatal(err)
	}
	_ = bid
	st := srv.Store()
	if err := st.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// Inline creates send pending lease blobs ahead of them.
	more, err := a.CreateBuffers([]uint64{64})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.CreateInline([]byte(`{"typename":"x","b":{"inline":0}}`), [][]byte{[]byte("hi")}); err != nil {
		t.Fatal(err)
	}
	if err := a.Seal(more[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := st.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseExtentsRefused sends extents a client could not have carved: the
// daemon refuses each with Invalid and nothing stored changes.
func TestLeaseExtentsRefused(t *testing.T) {
	needAccel(t, AccelLease)
	srv := startServer(t, 64<<20)
	a := connect(t, srv)
	other := connect(t, srv)
	keep, keepBlob := putLeased(t, other, 100<<10, 3)
	putLeased(t, a, 100<<10, 4) // a has a lease now
	st := srv.Store()
	l := *leaseOf(a)
	ol := *leaseOf(other)
	for _, tc := range []struct {
		name    string
		pending []uint64
	}{
		{"outside the lease", []uint64{uint64(l.next), l.end, 64}},
		{"across the lease's end", []uint64{uint64(l.next), l.end - 64, 128}},
		{"in another client's lease", []uint64{uint64(l.next), ol.off, 64}},
		{"over a blob put before", []uint64{uint64(l.next), l.off - 64, 64}},
		{"overlapping each other", []uint64{uint64(l.next), l.off, 128, uint64(l.next + 1), l.off + 64, 64}},
		{"unaligned", []uint64{uint64(l.next), l.off + 8, 64}},
		{"an id not of the lease", []uint64{uint64(ol.next), l.off, 64}},
		{"an id used before", []uint64{uint64(l.next - 1), l.off, 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usedBefore, _ := st.Usage()
			leasedBefore := st.Leased()
			a.mu.Lock()
			leaseOf(a).pending = append([]uint64(nil), tc.pending...)
			a.mu.Unlock()
			_, err := a.Create([]byte(`{"typename":"x"}`), nil)
			if status.CodeOf(err) != status.Invalid {
				t.Fatalf("create = %v, want Invalid", err)
			}
			if used, _ := st.Usage(); used != usedBefore || st.Leased() != leasedBefore {
				t.Fatalf("usage %d leased %d, was %d and %d", used, st.Leased(), usedBefore, leasedBefore)
			}
			if err := st.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
	checkBlob(t, a, keepBlob, 100<<10, 3)
	if !st.Exists(keep) {
		t.Fatal("another client's object is gone")
	}
	// After the lease is released, its memory cannot be named.
	lBefore := *leaseOf(a)
	leased := st.Leased()
	if err := a.ReleaseLease(); err != nil {
		t.Fatal(err)
	}
	if st.Leased() != leased-(lBefore.end-lBefore.off) {
		t.Fatalf("leased %d after a release, was %d with %d bytes of a's", st.Leased(), leased, lBefore.end-lBefore.off)
	}
	a.mu.Lock()
	leaseOf(a).pending = []uint64{uint64(lBefore.next), lBefore.off, 64}
	a.mu.Unlock()
	if _, err := a.Create([]byte(`{"typename":"x"}`), nil); status.CodeOf(err) != status.Invalid {
		t.Fatalf("create after release = %v, want Invalid", err)
	}
	if err := st.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseRefusedLeavesNoStaleLease: a lease request the daemon cannot
// grant takes the old lease back; the client must never carve from it
// again, where another client's blobs may lie by then.
func TestLeaseRefusedLeavesNoStaleLease(t *testing.T) {
	needAccel(t, AccelLease)
	srv := startServer(t, 8<<20)
	a, b := connect(t, srv), connect(t, srv)
	putLeased(t, a, 200<<10, 1) // a leases (1 MiB: an eighth of the arena)
	held := *leaseOf(a)
	if held.end-held.off == 0 {
		t.Fatal("a holds no lease")
	}
	// Almost everything else goes to b.
	for {
		if _, err := b.CreateBuffers([]uint64{512 << 10}); err != nil {
			break
		}
	}
	if _, err := a.CreateBuffers([]uint64{4 << 20}); status.CodeOf(err) != status.NotEnoughMemory {
		t.Fatalf("a put larger than what is free = %v, want NotEnoughMemory", err)
	}
	// a's old lease is free memory now: b takes it and fills it.
	var bufs []Buffer
	for {
		got, err := b.CreateBuffers([]uint64{64 << 10})
		if err != nil {
			break
		}
		fill(got[0].Data, 9)
		bufs = append(bufs, got[0])
	}
	if len(bufs) == 0 {
		t.Fatal("b got none of a's returned lease")
	}
	// a's next put must not land in b's memory (with nothing free, it
	// cannot lease again).
	if got, err := a.CreateBuffers([]uint64{1 << 10}); err != nil {
		if status.CodeOf(err) != status.NotEnoughMemory {
			t.Fatal(err)
		}
	} else {
		fill(got[0].Data, 5)
	}
	want := make([]byte, 64<<10)
	fill(want, 9)
	for _, buf := range bufs {
		if !bytes.Equal(buf.Data, want) {
			t.Fatalf("b's buffer %v was overwritten", buf.ID)
		}
	}
	if err := srv.Store().CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
