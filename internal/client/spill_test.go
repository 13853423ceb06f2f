package client

import (
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sync"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/servertest"
)

// spillPut puts one object of a blob of n bytes made from seed over c and
// releases it; it returns the object, its blob and the bytes' checksum.
func spillPut(t *testing.T, c *Client, n int, seed int) (ids.ObjectID, ids.ObjectID, uint32) {
	t.Helper()
	bid, data, err := c.CreateBuffer(uint64(n))
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = byte(i*31 + seed*7 + i>>12)
	}
	sum := crc32.ChecksumIEEE(data)
	if err := c.Seal(bid); err != nil {
		t.Fatal(err)
	}
	id, _, err := c.CreateMetadata([]byte(fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, bid)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(bid); err != nil {
		t.Fatal(err)
	}
	return id, bid, sum
}

// A daemon with a 16 MiB arena takes 64 MiB of objects and gives every one
// back intact, to another client over IPC and to one over TCP, while a view
// another client holds stays in memory throughout.
func TestSpillDaemonFourTimesTheArena(t *testing.T) {
	srv := servertest.StartRPC(t, server.Config{Size: 16 << 20, SpillPath: filepath.Join(servertest.Dir(t), "spill")}, "")
	w := connect(t, srv)
	holder := connect(t, srv)
	heldID, heldBlob, heldSum := spillPut(t, w, 2<<20, 1000)
	view, err := holder.Get(heldBlob)
	if err != nil {
		t.Fatal(err)
	}
	type obj struct {
		id, blob ids.ObjectID
		sum      uint32
	}
	var objs []obj
	for i := range 32 {
		id, bid, sum := spillPut(t, w, 2<<20, i)
		objs = append(objs, obj{id, bid, sum})
	}
	st, err := w.InstanceStatus()
	if err != nil {
		t.Fatal(err)
	}
	if st.SpilledObjects == 0 || st.SpilledBytes == 0 {
		t.Fatalf("nothing spilled: %+v", st)
	}
	if crc32.ChecksumIEEE(view) != heldSum {
		t.Fatal("a held view changed while the arena spilled")
	}
	if err := holder.Release(heldBlob); err != nil {
		t.Fatal(err)
	}
	_ = heldID
	r := connect(t, srv)
	rc := connectRPCTest(t, srv)
	for i, o := range objs {
		c := r
		if i%2 == 1 {
			c = rc
		}
		data, err := c.Get(o.blob)
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if crc32.ChecksumIEEE(data) != o.sum {
			t.Fatalf("object %d: wrong bytes", i)
		}
		if err := c.Release(o.blob); err != nil {
			t.Fatal(err)
		}
	}
	// Many clients get one spilled object at once.
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Connect(srv.Socket())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			tree, err := c.GetObject(objs[0].id)
			if err != nil {
				errs <- err
				return
			}
			_ = tree
			data, _, err := c.BlobPointer(objs[0].blob)
			if err != nil {
				errs <- err
				return
			}
			if crc32.ChecksumIEEE(data) != objs[0].sum {
				errs <- fmt.Errorf("wrong bytes")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Store().CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Evict, Load with pin and Unpin, over the wire.
func TestSpillEvictLoadUnpin(t *testing.T) {
	srv := servertest.Start(t, server.Config{Size: 16 << 20, SpillPath: filepath.Join(servertest.Dir(t), "spill")})
	c := connect(t, srv)
	id, bid, sum := spillPut(t, c, 1<<20, 3)
	spilled := func() int {
		st, err := c.InstanceStatus()
		if err != nil {
			t.Fatal(err)
		}
		return st.SpilledObjects
	}
	if err := c.Evict([]ids.ObjectID{id}); err != nil {
		t.Fatal(err)
	}
	if n := spilled(); n != 1 {
		t.Fatalf("%d spilled after evict", n)
	}
	if err := c.Load([]ids.ObjectID{id}, true); err != nil {
		t.Fatal(err)
	}
	if n := spilled(); n != 0 {
		t.Fatalf("%d spilled after load", n)
	}
	if err := c.Evict([]ids.ObjectID{id}); err != nil {
		t.Fatal(err)
	}
	if n := spilled(); n != 0 {
		t.Fatalf("a pinned object spilled: %d", n)
	}
	if err := c.Unpin([]ids.ObjectID{id}); err != nil {
		t.Fatal(err)
	}
	if err := c.Evict([]ids.ObjectID{id}); err != nil {
		t.Fatal(err)
	}
	if n := spilled(); n != 1 {
		t.Fatalf("%d spilled after unpin and evict", n)
	}
	data, err := c.Get(bid)
	if err != nil {
		t.Fatal(err)
	}
	if crc32.ChecksumIEEE(data) != sum {
		t.Fatal("wrong bytes after load")
	}
	if err := c.Evict([]ids.ObjectID{12345}); err == nil {
		t.Fatal("evict of a missing object")
	}
	plain := connect(t, servertest.Start(t, server.Config{}))
	if err := plain.Evict(nil); err == nil {
		t.Fatal("evict without spilling")
	}
}
