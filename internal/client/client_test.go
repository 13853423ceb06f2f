package client

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/servertest"
	"github.com/v6d-io/v6d-go/internal/status"
)

// startServer runs a real daemon in-process on a temp socket.
func startServer(t testing.TB, size uint64) *server.Server {
	t.Helper()
	return startServerWith(t, server.Config{Size: size})
}

// startServerWith starts a daemon of cfg on a socket of its own.
func startServerWith(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	return servertest.Start(t, cfg)
}

// refillFreed creates and fills 16 buffers of 64 KiB, to reuse memory a
// delete freed as hard as possible: a view that must survive the delete
// (pinned or private) shows the fill if that memory was freed under it.
func refillFreed(t testing.TB, c *Client) {
	t.Helper()
	for range 16 {
		_, buf, err := c.CreateBuffer(64 << 10)
		if err != nil {
			t.Fatal(err)
		}
		for j := range buf {
			buf[j] = 9
		}
	}
}

func connect(t testing.TB, srv *server.Server) *Client {
	t.Helper()
	c, err := Connect(srv.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func code(err error) status.Code { return status.CodeOf(err) }

// put creates a blob with data and a tensor-like object over it.
func put(t testing.TB, c *Client, data []byte) (ids.ObjectID, ids.ObjectID) {
	t.Helper()
	bid, buf, err := c.CreateBuffer(uint64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, data)
	tree := fmt.Sprintf(`{"typename":"vineyard::Tensor<uint8>","shape_":"[%d]","buffer_":{"id":"%v"}}`, len(data), bid)
	id, _, err := c.CreateMetadata([]byte(tree), []ids.ObjectID{bid})
	if err != nil {
		t.Fatal(err)
	}
	return id, bid
}

func TestPutGetAcrossClients(t *testing.T) {
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	before := a.Stats().RoundTrips
	id, bid := put(t, a, []byte("hello, vineyard"))
	if n := a.Stats().RoundTrips - before; n != 2 {
		t.Errorf("put took %d round trips, want 2", n)
	}
	before = b.Stats().RoundTrips
	tree, err := b.GetObject(id)
	if err != nil {
		t.Fatal(err)
	}
	if b.Accelerators()&AccelDirectory == 0 {
		before++ // the plain path: one round trip
	}
	if n := b.Stats().RoundTrips - before; n != 0 || b.Stats().DirectoryGets != min(1, uint64(b.Accelerators()&AccelDirectory)) {
		t.Errorf("get took %d round trips (%d from the directory), want 0 (1) with the directory", n, b.Stats().DirectoryGets)
	}
	if !bytes.Contains(tree, []byte(bid.String())) {
		t.Fatalf("tree lacks blob: %s", tree)
	}
	data, writable, err := b.BlobPointer(bid)
	if err != nil || writable || string(data) != "hello, vineyard" {
		t.Fatalf("BlobPointer = %q %v %v", data, writable, err)
	}
	if err := b.Release(id); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(id); code(err) != status.ObjectNotExists {
		t.Fatalf("second release: %v", err)
	}
	if _, _, err := b.BlobPointer(bid); code(err) != status.ObjectNotExists {
		t.Fatalf("after release: %v", err)
	}
	got, err := b.Get(bid)
	if err != nil || string(got) != "hello, vineyard" {
		t.Fatalf("Get = %q %v", got, err)
	}
}

func TestErrors(t *testing.T) {
	srv := startServer(t, 1<<20)
	c := connect(t, srv)
	if _, _, err := c.CreateBuffer(2 << 20); code(err) != status.NotEnoughMemory {
		t.Fatalf("oversize: %v", err)
	}
	if _, err := c.Get(ids.BlobBit | 12345); code(err) != status.ObjectNotExists {
		t.Fatalf("missing: %v", err)
	}
	bid, _, err := c.CreateBuffer(10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBuffers([]ids.ObjectID{bid}, false); code(err) != status.ObjectNotSealed {
		t.Fatalf("unsealed get: %v", err)
	}
	if err := c.Seal(bid); err != nil {
		t.Fatal(err)
	}
	if err := c.Seal(bid); code(err) != status.ObjectSealed {
		t.Fatalf("double seal: %v", err)
	}
	if err := c.Abort(bid); code(err) != status.ObjectSealed {
		t.Fatalf("abort sealed: %v", err)
	}
	if _, _, err := c.CreateMetadata([]byte(`{"x":1}`), nil); code(err) != status.MetaTreeInvalid {
		t.Fatalf("no typename: %v", err)
	}
	if _, _, err := c.CreateMetadata([]byte(`{"typename":"t","m":{"id":"o0000000000000042"}}`), nil); code(err) != status.ObjectNotExists {
		t.Fatalf("missing member: %v", err)
	}
	if _, err := Connect(filepath.Join(t.TempDir(), "none.sock")); code(err) != status.ConnectionFailed {
		t.Fatalf("connect: %v", err)
	}
}

func TestNamesPersistList(t *testing.T) {
	srv := startServer(t, 16<<20)
	c := connect(t, srv)
	id, _ := put(t, c, []byte("abc"))
	if err := c.PutName(id, "n1"); code(err) != status.Invalid {
		t.Fatalf("name on transient: %v", err)
	}
	if err := c.Persist(id); err != nil {
		t.Fatal(err)
	}
	if err := c.PutName(id, "n1"); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetName("n1", false, 0)
	if err != nil || got != id {
		t.Fatalf("GetName = %v %v", got, err)
	}
	names, err := c.ListNames("n*", false, 0)
	if err != nil || names["n1"] != id {
		t.Fatalf("ListNames = %v %v", names, err)
	}
	list, err := c.List("vineyard::Tensor*", false, 0)
	if err != nil || !bytes.Contains(list, []byte(id.String())) {
		t.Fatalf("List = %s %v", list, err)
	}
	if err := c.DropName("n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetName("n1", false, 0); code(err) != status.ObjectNotExists {
		t.Fatalf("dropped: %v", err)
	}
	start := time.Now()
	if _, err := c.GetName("late", true, 100*time.Millisecond); code(err) != status.Timeout {
		t.Fatalf("wait timeout: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatal("wait did not time out")
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		o := connect(t, srv)
		_ = o.PutName(id, "late")
	}()
	if got, err := c.GetName("late", true, 5*time.Second); err != nil || got != id {
		t.Fatalf("wait: %v %v", got, err)
	}
}

func TestDeleteWhileReferenced(t *testing.T) {
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	id, bid := put(t, a, bytes.Repeat([]byte{7}, 4096))
	if err := a.Release(bid); err != nil {
		t.Fatal(err)
	}
	data, err := b.Get(bid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.Exists(id); ok {
		t.Fatal("deleted object still visible")
	}
	if ok, _ := a.Exists(bid); ok {
		t.Fatal("deleted blob still visible")
	}
	// Reuse the memory: new allocations must not overlap the held blob.
	for i := 0; i < 8; i++ {
		_, buf, err := a.CreateBuffer(4096)
		if err != nil {
			t.Fatal(err)
		}
		for j := range buf {
			buf[j] = 9
		}
	}
	for _, v := range data {
		if v != 7 {
			t.Fatal("held blob was overwritten after delete")
		}
	}
	used, _ := srv.Store().Usage()
	if err := b.Release(bid); err != nil {
		t.Fatal(err)
	}
	// The release rides ahead of b's next request.
	if _, err := b.Exists(id); err != nil {
		t.Fatal(err)
	}
	after, _ := srv.Store().Usage()
	if after >= used {
		t.Fatalf("memory not freed on last release: %d -> %d", used, after)
	}
}

func TestDeferredReleases(t *testing.T) {
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	_, bid := put(t, a, bytes.Repeat([]byte{7}, 4096))
	base := a.Stats().RoundTrips
	if err := a.Release(bid); err != nil {
		t.Fatal(err)
	}
	if a.Stats().RoundTrips != base {
		t.Fatal("a release made a round trip of its own")
	}

	// Got again before the release went out: the queued release must not
	// drop the reference the get took.
	if _, err := a.Get(bid); err != nil {
		t.Fatal(err)
	}
	if err := a.FlushReleases(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Delete([]ids.ObjectID{bid}, true, true, false); err != nil {
		t.Fatal(err)
	}
	usedHeld, _ := srv.Store().Usage()
	if usedHeld == 0 {
		t.Fatal("a deleted blob a still holds was freed: a queued release was sent after a new get")
	}

	// Without another request, the timer sends the release.
	if err := a.Release(bid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if used, _ := srv.Store().Usage(); used < usedHeld {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a deferred release was never sent")
		}
		time.Sleep(time.Millisecond)
	}
	if _, _, err := a.BlobPointer(bid); code(err) != status.ObjectNotExists {
		t.Fatalf("released blob still readable: %v", err)
	}
}

func TestGetOfHeldBlobIsLocal(t *testing.T) {
	srv := startServer(t, 16<<20)
	c := connect(t, srv)
	bid, buf, err := c.CreateBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "hello")
	if err := c.Seal(bid); err != nil {
		t.Fatal(err)
	}
	base := c.Stats().RoundTrips
	got, err := c.Get(bid)
	if err != nil || string(got[:5]) != "hello" {
		t.Fatalf("get: %q, %v", got, err)
	}
	if c.Stats().RoundTrips != base {
		t.Fatal("get of a blob the client holds made a round trip")
	}
	// Two references now (seal, get): both must be released.
	for i := 0; i < 2; i++ {
		if err := c.Release(bid); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Release(bid); code(err) != status.ObjectNotExists {
		t.Fatalf("third release: %v", err)
	}
}

func TestDisconnectReclaims(t *testing.T) {
	srv := startServer(t, 16<<20)
	base, _ := srv.Store().Usage()
	c, err := Connect(srv.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateBuffer(1 << 20); err != nil {
		t.Fatal(err)
	}
	if mappedArenas() < 1 {
		t.Fatal("no arena mapped after a create")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, _ := srv.Store().Usage()
		if used == base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage %d, want baseline %d", used, base)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := c.CreateBuffer(1); err == nil {
		t.Fatal("use after close succeeded")
	}
}

func TestConcurrentUse(t *testing.T) {
	srv := startServer(t, 64<<20)
	c := connect(t, srv)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				payload := []byte(fmt.Sprintf("g%d-i%d", g, i))
				bid, buf, err := c.CreateBuffer(uint64(len(payload)))
				if err != nil {
					errs <- err
					return
				}
				copy(buf, payload)
				if err := c.Seal(bid); err != nil {
					errs <- err
					return
				}
				got, err := c.Get(bid)
				if err != nil || !bytes.Equal(got, payload) {
					errs <- fmt.Errorf("get %v: %q: %w", bid, got, err)
					return
				}
				_ = c.Release(bid)
				_ = c.Release(bid)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStatus(t *testing.T) {
	srv := startServer(t, 8<<20)
	c := connect(t, srv)
	st, err := c.InstanceStatus()
	if err != nil || st.MemoryLimit != 8<<20 || st.IPCConnections != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := c.ClusterMeta(); err != nil {
		t.Fatal(err)
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MemoryTrim(); err != nil {
		t.Fatal(err)
	}
	var pe *status.Error
	if !errors.As(status.Errorf(status.Invalid, "x"), &pe) {
		t.Fatal("errors.As")
	}
}

func TestTreeCache(t *testing.T) {
	srv := startServer(t, 16<<20)
	a, b := connect(t, srv), connect(t, srv)
	id, _ := put(t, b, bytes.Repeat([]byte{7}, 4096))
	if err := b.Release(id); err != nil { // the references sealing gave b
		t.Fatal(err)
	}

	first, err := a.GetObject(id)
	if err != nil {
		t.Fatal(err)
	}
	base := a.Stats().RoundTrips
	again, err := a.GetObject(id)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("cached get: %v", err)
	}
	if _, err := a.GetMetadata(id); err != nil {
		t.Fatal(err)
	}
	if a.Stats().RoundTrips != base {
		t.Fatalf("a get of a cached tree made %d round trips", a.Stats().RoundTrips-base)
	}
	for i := 0; i < 2; i++ {
		if err := a.Release(id); err != nil {
			t.Fatal(err)
		}
	}

	// A change to the object by another client is seen at once.
	if err := b.Label(id, []string{"k"}, []string{"v"}); err != nil {
		t.Fatal(err)
	}
	labelled, err := a.GetMetadata(id)
	if err != nil || !bytes.Contains(labelled, []byte(`__labels`)) {
		t.Fatalf("label not seen through the cache: %s, %v", labelled, err)
	}
	if _, err := a.GetObject(id); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(id); err != nil {
		t.Fatal(err)
	}

	// So is a delete; and the cache's references go back by themselves, so
	// the memory is freed although a makes no more requests.
	used, _ := srv.Store().Usage()
	if _, err := b.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetObject(id); code(err) != status.ObjectNotExists {
		t.Fatalf("deleted object got through the cache: %v", err)
	}
	if _, err := a.GetMetadata(id); code(err) != status.ObjectNotExists {
		t.Fatalf("deleted object's metadata got through the cache: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if now, _ := srv.Store().Usage(); now < used {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache kept a deleted object's memory")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTreeCacheBounds(t *testing.T) {
	srv := startServer(t, 64<<20)
	c := connect(t, srv)
	for i := 0; i < cacheMax+10; i++ {
		id, bid := put(t, c, []byte{byte(i)})
		if err := c.Release(bid); err != nil { // put's own reference
			t.Fatal(err)
		}
		if _, err := c.GetObject(id); err != nil {
			t.Fatal(err)
		}
		if err := c.Release(id); err != nil {
			t.Fatal(err)
		}
	}
	c.state.Lock()
	n := len(c.state.cache.entries)
	c.state.Unlock()
	if n > cacheMax {
		t.Fatalf("%d cached trees, limit %d", n, cacheMax)
	}
	// Idle entries go, and with them every reference: nothing is held.
	deadline := time.Now().Add(10 * cacheIdle)
	for {
		c.state.Lock()
		held := 0
		for _, b := range c.state.blobs {
			held += b.pins + b.cached
		}
		c.state.Unlock()
		if held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d references still held by an idle cache", held)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCreateInline(t *testing.T) {
	srv := startServer(t, 16<<20)
	c, other := connect(t, srv), connect(t, srv)
	base := c.Stats().RoundTrips
	tree := `{"typename":"pair","a":{"inline":0},"b":{"typename":"leaf","buffer_":{"inline":1}},"e":{"inline":2}}`
	id, blobs, err := c.CreateInline([]byte(tree), [][]byte{[]byte("first"), bytes.Repeat([]byte{2}, 70000), nil})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := other.GetMetadata(id)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().RoundTrips - base; n != 1 {
		t.Fatalf("inline put took %d round trips", n)
	}
	if len(blobs) != 3 || blobs[2] != ids.EmptyBlob || !bytes.Contains(stored, []byte(blobs[1].String())) {
		t.Fatalf("blobs %v, tree %s", blobs, stored)
	}
	got, err := other.Get(blobs[0])
	if err != nil || string(got) != "first" {
		t.Fatalf("inline blob: %q, %v", got, err)
	}
	// The creator keeps no reference: a delete frees the memory at once.
	if _, err := other.Delete([]ids.ObjectID{id}, false, true, false); err != nil {
		t.Fatal(err)
	}
	if err := other.Release(blobs[0]); err != nil {
		t.Fatal(err)
	}
	if err := other.FlushReleases(); err != nil {
		t.Fatal(err)
	}
	if used, _ := srv.Store().Usage(); used != 0 {
		t.Fatalf("%d bytes still used after deleting an inline put", used)
	}

	// Blobs only, for a bytes value.
	if id, blobs, err := c.CreateInline(nil, [][]byte{[]byte("raw")}); err != nil || id != 0 || len(blobs) != 1 {
		t.Fatalf("blob-only inline create: %v %v %v", id, blobs, err)
	}

	// Errors leave nothing behind and the connection in step.
	used, _ := srv.Store().Usage()
	for name, tree := range map[string]string{
		"index out of range": `{"typename":"t","a":{"inline":5}}`,
		"missing member":     `{"typename":"t","a":{"inline":0},"b":{"id":"o0000000000000123"}}`,
		"no typename":        `{"a":{"inline":0}}`,
	} {
		if _, _, err := c.CreateInline([]byte(tree), [][]byte{bytes.Repeat([]byte{1}, 1000)}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if now, _ := srv.Store().Usage(); now != used {
		t.Fatalf("failed inline creates left %d bytes", now-used)
	}
	if ok, err := c.Exists(id); err != nil || ok {
		t.Fatalf("connection out of step after errors: %v %v", ok, err)
	}
	if _, _, err := c.CreateInline(nil, [][]byte{make([]byte, MaxInline+1)}); code(err) != status.Invalid {
		t.Fatalf("oversized inline: %v", err)
	}
}

func TestCreateInlineOutOfMemory(t *testing.T) {
	srv := startServer(t, 1<<20)
	c := connect(t, srv)
	_, _, err := c.CreateInline(nil, [][]byte{make([]byte, 2<<20)})
	if code(err) != status.NotEnoughMemory {
		t.Fatalf("inline put over the arena: %v", err)
	}
	if _, _, err := c.CreateInline(nil, [][]byte{[]byte("still in step")}); err != nil {
		t.Fatal(err)
	}
}
