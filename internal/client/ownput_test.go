package client

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// ownPutOf returns what the client remembered of its put id (nil: nothing).
func ownPutOf(c *Client, id ids.ObjectID) *ownPut {
	c.state.Lock()
	defer c.state.Unlock()
	return ownPutsOf(c).puts[id]
}

// ownTree is the tree the client rebuilds of a put of tree as id (as a get
// of its own put does, ownPuts.get): false for a tree ownTreeable refuses.
func ownTree(tree []byte, id ids.ObjectID, instance uint64, blobs []shm.DirBlob) ([]byte, bool) {
	t, ok := newOwnTemplate(tree, instance, len(blobs))
	if !ok {
		return nil, false
	}
	return t.render(id, blobs), true
}

// The tree a client rebuilds of its own put is the daemon's, byte for byte,
// for trees of every shape the daemon's rules touch: keys out of order and
// repeated, fields the daemon sets given or not, members that clash with
// scalar keys, several blobs, values of every JSON kind.
func TestOwnTreeIsTheDaemons(t *testing.T) {
	needAccel(t, AccelOwnPut)
	srv := startServer(t, 64<<20)
	a, b := connect(t, srv), connect(t, srv)
	putPipelined(t, a, 8, 0) // the lease
	trees := []struct {
		tree  string
		blobs int
	}{
		{`{"typename":"vineyard::Tensor<uint8>","shape_":"[8]","buffer_":{"inline":0}}`, 1},
		{`{"z":1,"typename":"t","a":[1,{"x":null}],"buffer_":{"inline":0},"m":"\"q\"","b":true}`, 1},
		{`{"typename":"t","k":1,"k":"two","c":{"inline":1},"a":{"inline":0}}`, 2},
		{`{"typename":"t","signature":7,"nbytes":1234,"transient":false,"instance_id":99,"id":"o1"}`, 1},
		{` { "typename" : "t" , "x" : { "inline" : 0 } , "x" : 3 } `, 1},
		{`{"typename":"t","x":3,"x":{"inline":0},"y":{"inline":0}}`, 1},
		{`{"typename":"t","uni":"\u00e9\n","n":-1.5e3,"e":{"inline":2},"d":{"inline":0},"f":{"inline":1}}`, 3},
		{`{"typename":"t","a b":1,"a-b":{"inline":0},"A":2,"__name":"n","<x>":"&"}`, 1},
		{`{"typename":"t","k\u0041":{"inline":0},"\u0042":"\u0043"}`, 1}, // escapes of plain keys
		{`{"typename":"t","k\u00e9":{"inline":0},"\u007f":{"inline":1},"\u0001x":"\u0001\/","\u2028":"\u2029 "}`, 2},
		{"{\"typename\":\"t\",\"\x7f\":{\"inline\":0},\"\u2028\":[\" \\u0041\"]}", 1}, // raw DEL and U+2028
	}
	for i, tc := range trees {
		data := make([][]byte, tc.blobs)
		for j := range data {
			data[j] = bytes.Repeat([]byte{byte(i + j)}, 10+100*j)
		}
		a.mu.Lock()
		pipelineOf(a).since = 0 // never the put that waits for its reply
		a.mu.Unlock()
		id, _, err := a.CreateInline([]byte(tc.tree), data)
		if err != nil {
			t.Fatalf("%s: %v", tc.tree, err)
		}
		op := ownPutOf(a, id)
		if op == nil {
			t.Fatalf("%s: the put is not remembered", tc.tree)
		}
		mine, ok := ownTree(op.shape.tree, id, a.InstanceID(), op.blobs)
		if !ok {
			t.Fatalf("%s: no tree rebuilt", tc.tree)
		}
		daemons, err := b.GetMetadata(id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mine, daemons) {
			t.Errorf("tree %s:\nrebuilt %s\ndaemon's %s", tc.tree, mine, daemons)
		}
	}
	// One template serves every put of a text: other ids, other sizes.
	text := []byte(`{"typename":"t","z":1,"b":{"inline":1},"a":{"inline":0}}`)
	tmpl, ok := newOwnTemplate(text, a.InstanceID(), 2)
	if !ok {
		t.Fatal("no template")
	}
	for i, sizes := range [][2]int{{1, 9}, {100000, 7}, {12, 12}} {
		a.mu.Lock()
		pipelineOf(a).since = 0
		a.mu.Unlock()
		id, _, err := a.CreateInline(text, [][]byte{make([]byte, sizes[0]), make([]byte, sizes[1])})
		if err != nil {
			t.Fatal(err)
		}
		op := ownPutOf(a, id)
		if op == nil {
			t.Fatalf("put %d is not remembered", i)
		}
		daemons, err := b.GetMetadata(id)
		if err != nil {
			t.Fatal(err)
		}
		if mine := tmpl.render(id, op.blobs); !bytes.Equal(mine, daemons) {
			t.Errorf("put %d:\nrendered %s\ndaemon's %s", i, mine, daemons)
		}
	}
	// Trees it cannot rebuild are not remembered: their gets wait for the
	// daemon (pipeline.settle).
	for _, tree := range []string{
		`{"typename":"t","m":{"typename":"u","b":{"inline":0}}}`, // a new member object
		`{"typename":"t","b":{"inline":0,"x":1}}`,                // more than the index
	} {
		a.mu.Lock()
		pipelineOf(a).since = 0
		a.mu.Unlock()
		id, _, err := a.CreateInline([]byte(tree), [][]byte{[]byte("abc")})
		if err != nil {
			t.Fatalf("%s: %v", tree, err)
		}
		if ownPutOf(a, id) != nil {
			t.Errorf("%s is remembered", tree)
		}
		if _, err := a.GetObject(id); err != nil {
			t.Fatalf("%s: %v", tree, err)
		}
		if err := a.Release(id); err != nil {
			t.Fatal(err)
		}
	}
}

// A get of the client's own put, right after it, is answered from the put:
// neither a round trip nor a wait for the daemon, and the bytes are the
// put's.
func TestOwnGetNeedsNoDaemon(t *testing.T) {
	needAccel(t, AccelOwnPut)
	srv := startServer(t, 64<<20)
	a := connect(t, srv)
	putPipelined(t, a, 8, 0)
	const n = 500
	before := a.Stats().RoundTrips
	for i := range n {
		size := 1 + i*53%3000
		id, bid := putPipelined(t, a, size, byte(i))
		if _, err := a.GetObject(id); err != nil {
			t.Fatal(err)
		}
		checkBlob(t, a, bid, size, byte(i))
		if err := a.Release(id); err != nil {
			t.Fatal(err)
		}
	}
	if trips, most := a.Stats().RoundTrips-before, uint64(2*n/syncEvery+2); trips > most {
		t.Fatalf("%d puts and gets took %d round trips, want at most %d", n, trips, most)
	}
	// The daemon needs a wake-up to read a put; the get follows at once.
	if a.Stats().OwnPutGets == 0 {
		t.Fatal("no get was answered from the client's own put")
	}
	t.Logf("%d of %d gets answered from the put", a.Stats().OwnPutGets, n)
}

// Gets of one's own puts under deletes: another connection deletes each
// object as soon as the writer got it (or, every other put, as soon as it
// returned: the get then fails or holds what it got), and the writer keeps
// putting, so that freed memory is reused at once. Every view the writer holds keeps
// its bytes until released (the delete holds what the own get pinned), and
// everything is freed in the end. Run it with -race.
func TestOwnGetsUnderDeletes(t *testing.T) {
	needAccel(t, AccelOwnPut)
	srv := startServer(t, 64<<20)
	w := connect(t, srv)
	// The deleter allocates as much again without a lease, where the
	// allocator puts it first: into what the delete freed, if it did.
	d, err := Connect(srv.Socket(), WithAccel(AccelAll&^AccelLease))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	first, _ := putPipelined(t, w, 8, 0)
	const puts, held = 600, 8
	type job struct {
		id   ids.ObjectID
		size uint64
	}
	deletes, deleted := make(chan job, puts), make(chan ids.ObjectID, puts)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var fillers []ids.ObjectID
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := range deletes {
			if _, err := d.Delete([]ids.ObjectID{j.id}, false, true, false); err != nil {
				errs <- err
				return
			}
			deleted <- j.id
			id, buf, err := d.CreateBuffer(j.size)
			if err == nil {
				fill(buf, 0xee)
				if err = d.Seal(id); err == nil {
					err = d.Release(id)
				}
			}
			if err != nil {
				errs <- err
				return
			}
			fillers = append(fillers, id)
		}
	}()
	type view struct {
		id   ids.ObjectID
		ptr  []byte
		seed byte
	}
	var views []view
	check := func(v view) error {
		for _, c := range v.ptr {
			if c != v.seed {
				return fmt.Errorf("object %v: a held view changed", v.id)
			}
		}
		return nil
	}
	for i := range puts {
		size := 64 + i*97%4000
		seed := byte(i)
		data := bytes.Repeat([]byte{seed}, size)
		id, bids, err := w.CreateInline(fmt.Appendf(nil, pipelinedTree, size), [][]byte{data})
		if err != nil {
			t.Fatal(err)
		}
		early := i%2 == 1 // the delete may come first: then the get fails, or holds what it got
		if early {
			deletes <- job{id, uint64(size)}
		}
		_, err = w.GetObject(id)
		if early {
			// Once the delete is done, the object is gone for the writer
			// too, whatever it remembers of its put.
			if <-deleted != id {
				t.Fatal("deletes out of order")
			}
			if _, again := w.GetObject(id); status.CodeOf(again) != status.ObjectNotExists {
				t.Fatalf("a get of %v after its delete: %v", id, again)
			}
			if status.CodeOf(err) == status.ObjectNotExists {
				continue
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		ptr, _, err := w.BlobPointer(bids[0])
		if err != nil {
			t.Fatal(err)
		}
		if !early {
			deletes <- job{id, uint64(size)}
			<-deleted
		}
		views = append(views, view{id, ptr, seed})
		if len(views) > held {
			v := views[0]
			views = views[1:]
			if err := check(v); err != nil {
				t.Fatal(err)
			}
			if err := w.Release(v.id); err != nil {
				t.Fatal(err)
			}
		}
	}
	deletes <- job{first, 8}
	<-deleted
	close(deletes)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, v := range views {
		if err := check(v); err != nil {
			t.Fatal(err)
		}
		if err := w.Release(v.id); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d gets answered from the put", w.Stats().OwnPutGets, puts)
	if _, err := d.Delete(fillers, false, true, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Client{w, d} {
		if err := c.FlushReleases(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.ReleaseLease(); err != nil {
		t.Fatal(err)
	}
	srv.Store().RescanPins()
	if used, _ := srv.Store().Usage(); used != 0 {
		t.Fatalf("%d bytes still used after every object was deleted and released", used)
	}
	if err := srv.Store().CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
