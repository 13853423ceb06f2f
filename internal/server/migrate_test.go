package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// clusterConfig is the configuration of a test daemon with an etcd backend
// and a peer service, its socket in dir.
func clusterConfig(dir, etcdEndpoint string, size uint64) Config {
	return Config{Socket: filepath.Join(dir, "s.sock"), Size: size, PrefaultAhead: -1,
		Meta: "etcd", EtcdEndpoints: []string{etcdEndpoint}, EtcdPrefix: "migrate-test",
		EtcdLeaseTTL: 2 * time.Second, PeerEndpoint: "127.0.0.1:0"}
}

// clusterServer starts a daemon with an etcd backend and a peer service,
// without background pre-fault.
func clusterServer(t testing.TB, etcd *etcdtest.Server, size uint64) *Server {
	t.Helper()
	return clusterServerPrefault(t, etcd, size, -1)
}

// clusterServerPrefault is clusterServer with Config.PrefaultAhead.
func clusterServerPrefault(t testing.TB, etcd *etcdtest.Server, size uint64, prefault int64) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "v6d-mig-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cfg := clusterConfig(dir, etcd.Endpoint(), size)
	cfg.PrefaultAhead = prefault
	if _, bench := t.(*testing.B); bench {
		cfg.Logger = slog.New(slog.DiscardHandler) // keep benchmark output to figures
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	<-s.Ready()
	return s
}

func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// putTensor stores a NumPy-like tree (a tensor with a buffer blob and a
// shape) of n bytes pattern(seed, n) on s, persists it and returns its id.
func putTensor(t *testing.T, s *Server, seed byte, n int) ids.ObjectID {
	t.Helper()
	id, err := storeTensor(s, n, func(b []byte) { copy(b, pattern(seed, n)) })
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// storeTensor stores and persists a tensor of n bytes that fill writes.
func storeTensor(s *Server, n int, fill func([]byte)) (ids.ObjectID, error) {
	ss := s.store.NewSession()
	defer ss.Close()
	ext, err := ss.CreateBuffer(uint64(n))
	if err != nil {
		return 0, err
	}
	b, err := ss.OwnedBytes(ext.ID)
	if err != nil {
		return 0, err
	}
	fill(b)
	tree := fmt.Sprintf(`{"typename":"vineyard::Tensor<uint8>","shape_":"[%d]","nbytes":%d,"buffer_":{"id":%q}}`, n, n, ext.ID.String())
	c, err := ss.CreateData(json.RawMessage(tree), []ids.ObjectID{ext.ID})
	if err != nil {
		return 0, err
	}
	return c.ID, s.store.Persist(c.ID)
}

// tensorBytes reads the buffer of a local tensor of s.
func tensorBytes(t *testing.T, s *Server, id ids.ObjectID) (shape string, data []byte) {
	t.Helper()
	tree, ok := s.store.Tree(id)
	if !ok {
		t.Fatalf("%v is not known", id)
	}
	var n struct {
		Shape  string `json:"shape_"`
		Buffer struct {
			ID string `json:"id"`
		} `json:"buffer_"`
	}
	if err := json.Unmarshal(tree, &n); err != nil {
		t.Fatal(err)
	}
	bid, err := ids.Parse(n.Buffer.ID)
	if err != nil {
		t.Fatal(err)
	}
	ss := s.store.NewSession()
	defer ss.Close()
	exts, err := ss.GetBuffers([]ids.ObjectID{bid}, false)
	if err != nil {
		t.Fatal(err)
	}
	return n.Shape, append([]byte(nil), ss.Bytes(exts[0])...)
}

func synced(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.store.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

func used(s *Server) uint64 { u, _ := s.store.Usage(); return u }

func migrateCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestMigrate: B migrates A's persisted tensor; the bytes are equal, the
// copy has new ids and the same signature, a second migrate (and concurrent
// ones) return one copy, the copy is persisted and migrates on to C.
func TestMigrate(t *testing.T) {
	etcd := etcdtest.Run(t)
	a := clusterServer(t, etcd, 64<<20)
	b := clusterServer(t, etcd, 64<<20)
	c := clusterServer(t, etcd, 64<<20)

	const n = 3<<20 + 17
	id := putTensor(t, a, 5, n)
	synced(t, b)
	base := used(b)

	// A local object is its own copy.
	if got, err := a.Migrate(migrateCtx(t), id); err != nil || got != id {
		t.Fatalf("local migrate = %v, %v", got, err)
	}

	// Concurrent migrates transfer once and agree.
	var wg sync.WaitGroup
	res := make([]ids.ObjectID, 4)
	errs := make([]error, 4)
	for i := range res {
		wg.Add(1)
		go func() { defer wg.Done(); res[i], errs[i] = b.Migrate(migrateCtx(t), id) }()
	}
	wg.Wait()
	for i := range res {
		if errs[i] != nil || res[i] != res[0] {
			t.Fatalf("migrate %d = %v, %v; first %v", i, res[i], errs[i], res[0])
		}
	}
	cp := res[0]
	if cp == id {
		t.Fatal("the copy has the origin's id")
	}
	if u := used(b); u < base+n || u > base+n+4096 {
		t.Fatalf("B uses %d bytes after the migrate, %d before: one copy of %d expected", u, base, n)
	}
	shape, data := tensorBytes(t, b, cp)
	if shape != fmt.Sprintf("[%d]", n) || string(data) != string(pattern(5, n)) {
		t.Fatal("the copy's bytes or shape differ")
	}
	origTree, _ := b.store.Tree(id)
	copyTree, _ := b.store.Tree(cp)
	var o1, o2 struct {
		Signature uint64 `json:"signature"`
	}
	_ = json.Unmarshal(origTree, &o1)
	_ = json.Unmarshal(copyTree, &o2)
	if o1.Signature == 0 || o1.Signature != o2.Signature {
		t.Fatalf("signatures %d and %d differ", o1.Signature, o2.Signature)
	}
	if again, err := b.Migrate(migrateCtx(t), id); err != nil || again != cp {
		t.Fatalf("second migrate = %v, %v; want %v", again, err, cp)
	}

	// Through the protocol (the Go client), and on to C.
	cl, err := client.Connect(b.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if got, err := cl.Migrate(id); err != nil || got != cp {
		t.Fatalf("client migrate = %v, %v; want %v", got, err, cp)
	}
	// The copy is persisted (as upstream's): C knows it without a persist.
	if err := b.store.PutName("migrated", cp); err != nil {
		t.Fatal(err)
	}
	synced(t, c)
	cc, err := c.Migrate(migrateCtx(t), cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, data := tensorBytes(t, c, cc); string(data) != string(pattern(5, n)) {
		t.Fatal("C's copy differs")
	}

	// A deleted copy is made again.
	b.store.Delete([]ids.ObjectID{cp}, store.DeleteOptions{Deep: true})
	if u := used(b); u != base {
		t.Fatalf("B uses %d bytes after deleting the copy, %d before", u, base)
	}
	cp2, err := b.Migrate(migrateCtx(t), id)
	if err != nil || cp2 == cp {
		t.Fatalf("migrate after delete = %v, %v", cp2, err)
	}

	// Unknown object: a clear error.
	if _, err := b.Migrate(migrateCtx(t), ids.ObjectID(12345)); status.CodeOf(err) != status.ObjectNotExists {
		t.Fatalf("unknown object: %v", err)
	}
}

// TestMigrateFaults: a copy that does not fit and an owner that is gone fail
// with a clear status, leave nothing in the destination, and a retry works
// once the cause is gone.
func TestMigrateFaults(t *testing.T) {
	etcd := etcdtest.Run(t)
	a := clusterServer(t, etcd, 64<<20)
	b := clusterServer(t, etcd, 8<<20)

	big := putTensor(t, a, 1, 6<<20)
	small := putTensor(t, a, 2, 1<<20)
	synced(t, b)
	base := used(b)

	// Destination out of memory: fill B, then migrate.
	ss := b.store.NewSession()
	if _, err := ss.CreateBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Migrate(migrateCtx(t), big); status.CodeOf(err) != status.NotEnoughMemory {
		t.Fatalf("err = %v, want NotEnoughMemory", err)
	}
	ss.Close() // frees the filler
	if u := used(b); u != base {
		t.Fatalf("B uses %d bytes after the failure, %d before", u, base)
	}
	cp, err := b.Migrate(migrateCtx(t), big)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if _, data := tensorBytes(t, b, cp); string(data) != string(pattern(1, 6<<20)) {
		t.Fatal("the copy differs")
	}
	b.store.Delete([]ids.ObjectID{cp}, store.DeleteOptions{Deep: true})

	// Deleted on the owner after B learnt of it.
	gone := putTensor(t, a, 3, 1<<20)
	synced(t, b)
	a.store.Delete([]ids.ObjectID{gone}, store.DeleteOptions{Deep: true})
	if _, err := b.Migrate(migrateCtx(t), gone); status.CodeOf(err) != status.ObjectNotExists {
		t.Fatalf("err = %v, want ObjectNotExists", err)
	}
	if u := used(b); u != base {
		t.Fatalf("B uses %d bytes after the failure, %d before", u, base)
	}

	// Owner gone: the fetch fails within the migration's bounds.
	_ = a.Close()
	_, err = b.Migrate(migrateCtx(t), small)
	if code := status.CodeOf(err); code != status.ConnectionError && code != status.ObjectNotExists {
		t.Fatalf("err = %v, want ConnectionError or ObjectNotExists", err)
	}
	if u := used(b); u != base {
		t.Fatalf("B uses %d bytes after the failure, %d before", u, base)
	}
}
