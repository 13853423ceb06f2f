package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// startEtcd starts a real etcd for the test, stopped at its end.
func startEtcd(t *testing.T) *etcdtest.Server {
	t.Helper()
	srv := etcdtest.Run(t)
	return srv
}

// openEtcd opens a backend on srv with a short lease and timeout, closed at
// the end of the test.
func openEtcd(t *testing.T, srv *etcdtest.Server, host string) *Etcd {
	t.Helper()
	e, err := OpenEtcd(context.Background(), EtcdConfig{
		Endpoints:   []string{srv.Endpoint()},
		Prefix:      "test",
		DialTimeout: 10 * time.Second, // generous: the test machine is shared and slow
		LeaseTTL:    2 * time.Second,
		Hostname:    host,
		IPCSocket:   "/tmp/" + host + ".sock",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// follower records what a backend's Changes deliver.
type follower struct {
	mu      sync.Mutex
	trees   map[ids.ObjectID]string
	names   map[string]ids.ObjectID
	deletes int // Deleted changes seen
	rev     int64
	claims  []claim // each change that reported progress, in order
	changed chan struct{}
}

// claim is a change's Revision and how many trees the follower had once it
// was applied: every tree persisted up to that revision must be among them.
type claim struct {
	rev   int64
	trees int
}

func follow(e *Etcd) *follower {
	f := &follower{trees: map[ids.ObjectID]string{}, names: map[string]ids.ObjectID{}, changed: make(chan struct{}, 1)}
	go func() {
		for c := range e.Changes() {
			f.mu.Lock()
			switch c.Kind {
			case Persisted:
				f.trees[c.ID] = string(c.Tree)
			case Deleted:
				delete(f.trees, c.ID)
				f.deletes++
			case NamePut:
				f.names[c.Name] = c.ID
			case NameDropped:
				delete(f.names, c.Name)
			}
			f.rev = max(f.rev, c.Revision)
			if c.Revision != 0 {
				f.claims = append(f.claims, claim{c.Revision, len(f.trees)})
			}
			f.mu.Unlock()
			select {
			case f.changed <- struct{}{}:
			default:
			}
		}
	}()
	return f
}

// waitFor waits until cond holds over what f saw, failing after a generous
// bound (a hang guard, not a speed check).
func (f *follower) waitFor(t *testing.T, what string, cond func(f *follower) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		ok := cond(f)
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("never saw: %s", what)
		}
	}
}

func tree(id ids.ObjectID, typename string) Tree {
	return Tree{ID: id, Content: fmt.Appendf(nil, `{"id":"%v","typename":%q}`, id, typename)}
}

// TestEtcdUnreachable: Open fails, in bounded time, naming the endpoint.
func TestEtcdUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	_ = l.Close() // nothing listens there now
	done := make(chan error, 1)
	go func() {
		e, err := OpenEtcd(context.Background(), EtcdConfig{Endpoints: []string{endpoint}, DialTimeout: 300 * time.Millisecond})
		if err == nil {
			_ = e.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrEtcd) || !strings.Contains(err.Error(), endpoint) {
			t.Fatalf("open of an unreachable etcd: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("open of an unreachable etcd hangs")
	}
	if _, err := OpenEtcd(context.Background(), EtcdConfig{}); !errors.Is(err, ErrEtcd) {
		t.Fatalf("open without endpoints: %v", err)
	}
}

// TestEtcdInstances: instances get distinct ids, publish their addresses,
// and disappear when closed.
func TestEtcdInstances(t *testing.T) {
	srv := startEtcd(t)
	a := openEtcd(t, srv, "host-a")
	b := openEtcd(t, srv, "host-b")
	if a.InstanceID() == b.InstanceID() || a.InstanceID()%MaxInstances == b.InstanceID()%MaxInstances {
		t.Fatalf("instance ids %d and %d", a.InstanceID(), b.InstanceID())
	}
	all, err := b.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[a.InstanceID()].Hostname != "host-a" || all[a.InstanceID()].IPCSocket != "/tmp/host-a.sock" ||
		all[b.InstanceID()].Hostname != "host-b" || all[a.InstanceID()].HostID == all[b.InstanceID()].HostID {
		t.Fatalf("instances: %+v", all)
	}
	// Concurrent registrations get distinct ids (compare-and-swap, no lock).
	var wg sync.WaitGroup
	got := make([]uint64, 4)
	for i := range got {
		wg.Go(func() { got[i] = openEtcd(t, srv, fmt.Sprint("c", i)).InstanceID() })
	}
	wg.Wait()
	seen := map[uint64]bool{a.InstanceID(): true, b.InstanceID(): true}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("instance id %d given twice: %v", id, got)
		}
		seen[id] = true
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	all, err = b.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := all[a.InstanceID()]; ok || len(all) != 5 {
		t.Fatalf("a closed instance is still listed: %+v", all)
	}
	if err := a.Persist([]Tree{tree(1, "t")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("persist after close: %v", err)
	}
}

var (
	gensMu sync.Mutex
	gens   = map[*Etcd]*ids.Generator{}
)

// objectOf returns a fresh object id of instance e.
func objectOf(e *Etcd) ids.ObjectID {
	gensMu.Lock()
	defer gensMu.Unlock()
	g, ok := gens[e]
	if !ok {
		g = ids.NewGenerator(e.InstanceID())
		gens[e] = g
	}
	return g.Object()
}

// TestEtcdPersistAndDelete: trees persisted on A reach B (also a tree too
// large for one transaction); deletes too; A never reports its own.
func TestEtcdPersistAndDelete(t *testing.T) {
	srv := startEtcd(t)
	a := openEtcd(t, srv, "a")
	b := openEtcd(t, srv, "b")
	fa, fb := follow(a), follow(b)
	gen := ids.NewGenerator(a.InstanceID())
	// 300 trees of 8 KiB: more operations and bytes than one etcd txn takes.
	var trees []Tree
	pad := strings.Repeat("x", 8<<10)
	for i := range 300 {
		id := gen.Object()
		trees = append(trees, Tree{ID: id, Content: fmt.Appendf(nil, `{"id":"%v","typename":"t","i":%d,"pad":%q}`, id, i, pad)})
	}
	if err := a.Persist(trees); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "300 trees on b", func(f *follower) bool { return len(f.trees) == 300 })
	for _, tr := range trees {
		if fb.trees[tr.ID] != string(tr.Content) {
			t.Fatalf("tree of %v differs on b", tr.ID)
		}
	}
	big := Tree{ID: gen.Object(), Content: make([]byte, MaxTreeBytes+1)}
	if err := a.Persist([]Tree{big}); !errors.Is(err, ErrEtcd) {
		t.Fatalf("persist of a tree larger than etcd takes: %v", err)
	}
	idl := make([]ids.ObjectID, 0, len(trees))
	for _, tr := range trees[:200] {
		idl = append(idl, tr.ID)
	}
	if err := a.Delete(idl); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "deletes on b", func(f *follower) bool { return len(f.trees) == 100 })
	// A's own changes are not reported to A.
	if err := b.Persist([]Tree{tree(objectOf(b), "from-b")}); err != nil {
		t.Fatal(err)
	}
	fa.waitFor(t, "b's tree on a", func(f *follower) bool { return len(f.trees) == 1 })
	// An instance that joins later reads what is there (in pages) first.
	page := resyncPage
	resyncPage = 7
	c := openEtcd(t, srv, "c")
	resyncPage = page // c read it in Open
	fc := follow(c)
	fc.waitFor(t, "every tree on a late joiner", func(f *follower) bool { return len(f.trees) == 101 })
	for _, tr := range trees[200:] {
		if fc.trees[tr.ID] != string(tr.Content) {
			t.Fatalf("tree of %v differs on c", tr.ID)
		}
	}
}

// TestEtcdProgressCoversWholeTransactions: the trees of one persist share
// one etcd revision, and no change reports that revision as delivered until
// all of them are. (The first tree of a transaction once carried it, and a
// get_meta on another daemon that synced to it missed the root.)
func TestEtcdProgressCoversWholeTransactions(t *testing.T) {
	srv := startEtcd(t)
	a := openEtcd(t, srv, "a")
	b := openEtcd(t, srv, "b")
	fb := follow(b)
	gen := ids.NewGenerator(a.InstanceID())
	for round := 1; round <= 20; round++ {
		trees := []Tree{tree(gen.Object(), "root"), tree(gen.Object(), "member"), tree(gen.Object(), "member")}
		if err := a.Persist(trees); err != nil {
			t.Fatal(err)
		}
		rev, err := a.LatestRevision(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		fb.waitFor(t, "the persist's revision on b", func(f *follower) bool { return f.rev >= rev })
		fb.mu.Lock()
		for _, c := range fb.claims {
			if c.rev >= rev && c.trees < 3*round {
				fb.mu.Unlock()
				t.Fatalf("round %d: revision %d reported with %d of %d trees", round, c.rev, c.trees, 3*round)
			}
		}
		fb.mu.Unlock()
	}
}

// TestEtcdNames: names are cluster-wide; two instances racing for one name:
// exactly one wins, the other gets ErrNameTaken.
func TestEtcdNames(t *testing.T) {
	srv := startEtcd(t)
	a := openEtcd(t, srv, "a")
	b := openEtcd(t, srv, "b")
	fb := follow(b)
	x, y := objectOf(a), objectOf(b)
	if err := a.PutName("shared", x); err != nil {
		t.Fatal(err)
	}
	if id, err := b.GetName("shared"); err != nil || id != x {
		t.Fatalf("b resolves shared: %v %v", id, err)
	}
	fb.waitFor(t, "the name on b", func(f *follower) bool { return f.names["shared"] == x })
	// A name set before an instance starts is reported to it by its first
	// read, not by its watch, which starts after that read.
	c := openEtcd(t, srv, "c")
	fc := follow(c)
	fc.waitFor(t, "the name set before c started", func(f *follower) bool { return f.names["shared"] == x })
	// Both read the name before either writes it.
	var read sync.WaitGroup
	read.Add(2)
	hook := func() { read.Done(); read.Wait() }
	a.beforeNameTxn, b.beforeNameTxn = hook, hook
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = a.PutName("race", x) })
	wg.Go(func() { errs[1] = b.PutName("race", y) })
	wg.Wait()
	a.beforeNameTxn, b.beforeNameTxn = nil, nil
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatal("both instances got the name")
			}
			won = i
		case !errors.Is(err, ErrNameTaken):
			t.Fatalf("the loser's error: %v", err)
		}
	}
	if won < 0 {
		t.Fatalf("nobody got the name: %v", errs)
	}
	want := []ids.ObjectID{x, y}[won]
	if id, err := a.GetName("race"); err != nil || id != want {
		t.Fatalf("race resolves to %v %v, want the winner's %v", id, err, want)
	}
	names, err := b.ListNames()
	if err != nil || len(names) != 2 || names["shared"] != x {
		t.Fatalf("names: %v %v", names, err)
	}
	if err := b.DropName("shared"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetName("shared"); !errors.Is(err, ErrNameNotFound) {
		t.Fatalf("dropped name: %v", err)
	}
	fb.waitFor(t, "the drop on b", func(f *follower) bool { _, ok := f.names["shared"]; return !ok })
}

// crash stops e as a killed daemon would: no revoke, the lease just stops
// being kept alive.
func crash(e *Etcd) {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	_ = e.cli.Close()
}

// TestEtcdLeaseExpiry: a crashed instance's registration and objects
// disappear from the others after its lease's TTL.
func TestEtcdLeaseExpiry(t *testing.T) {
	srv := startEtcd(t)
	a := openEtcd(t, srv, "a")
	b := openEtcd(t, srv, "b")
	fb := follow(b)
	id := objectOf(a)
	if err := a.Persist([]Tree{tree(id, "t")}); err != nil {
		t.Fatal(err)
	}
	if err := a.PutName("n", id); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "a's tree on b", func(f *follower) bool { return len(f.trees) == 1 })
	crash(a)
	fb.waitFor(t, "a's tree gone from b", func(f *follower) bool { return len(f.trees) == 0 })
	all, err := b.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := all[a.InstanceID()]; ok {
		t.Fatal("a crashed instance is still listed after its lease expired")
	}
	if _, err := b.GetName("n"); !errors.Is(err, ErrNameNotFound) {
		t.Fatalf("a crashed instance's name: %v", err)
	}
}

// TestEtcdRestart: while etcd is down, writes fail fast with ErrEtcd naming
// the endpoint; after it comes back, instances keep their ids and the watch
// resumes without missing anything written meanwhile.
func TestEtcdRestart(t *testing.T) {
	srv := startEtcd(t)
	a := openEtcd(t, srv, "a")
	b := openEtcd(t, srv, "b")
	fb := follow(b)
	before := tree(objectOf(a), "before")
	if err := a.Persist([]Tree{before}); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "the first tree on b", func(f *follower) bool { return len(f.trees) == 1 })
	srv.Stop()
	err := a.Persist([]Tree{tree(objectOf(a), "down")})
	if !errors.Is(err, ErrEtcd) || !strings.Contains(err.Error(), srv.Endpoint()) {
		t.Fatalf("persist with etcd down: %v", err)
	}
	if _, err := a.ListNames(); !errors.Is(err, ErrEtcd) {
		t.Fatalf("list names with etcd down: %v", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var after []ids.ObjectID
	for i := range 20 {
		tr := tree(objectOf(a), fmt.Sprint("after", i))
		// The client reconnects on its own; the first calls may still fail.
		for try := 0; ; try++ {
			err := a.Persist([]Tree{tr})
			if err == nil {
				break
			}
			if try == 100 {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		after = append(after, tr.ID)
	}
	fb.waitFor(t, "every tree written after the restart on b", func(f *follower) bool {
		for _, id := range after {
			if _, ok := f.trees[id]; !ok {
				return false
			}
		}
		return len(f.trees) == 21
	})
	all, err := b.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := all[a.InstanceID()]; !ok {
		t.Fatalf("a is not registered under its id after the restart: %+v", all)
	}
}

// TestEtcdLeaseLost: when an instance's lease is lost (revoked here, as
// expiry during an outage would), it registers again under the same id and
// publishes its trees and names again.
func TestEtcdLeaseLost(t *testing.T) {
	srv := startEtcd(t)
	a := openEtcd(t, srv, "a")
	b := openEtcd(t, srv, "b")
	fb := follow(b)
	id := objectOf(a)
	if err := a.Persist([]Tree{tree(id, "t")}); err != nil {
		t.Fatal(err)
	}
	if err := a.PutName("kept", id); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "a's tree on b", func(f *follower) bool { return len(f.trees) == 1 })
	a.mu.Lock()
	lease := a.lease
	a.mu.Unlock()
	if _, err := b.cli.Revoke(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "a's tree gone with its lease, then published again", func(f *follower) bool {
		return f.deletes == 1 && len(f.trees) == 1
	})
	all, err := b.Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info, ok := all[a.InstanceID()]; !ok || info.Hostname != "a" {
		t.Fatalf("a is not registered again under its id: %+v", all)
	}
	for try := 0; ; try++ {
		got, err := b.GetName("kept")
		if err == nil && got == id {
			break
		}
		if try == 300 {
			t.Fatalf("a's name was not published again: %v %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEtcdCompacted: a watch resumed from a revision etcd has compacted
// away reports it (watch returns 0), and the full read that follows reports
// trees deleted meanwhile as Deleted and present ones as Persisted.
func TestEtcdCompacted(t *testing.T) {
	page := resyncPage
	t.Cleanup(func() { resyncPage = page }) // after the backends' Close
	resyncPage = 1                          // the full read in pages, too
	srv := startEtcd(t)
	a := openEtcd(t, srv, "a")
	b := openEtcd(t, srv, "b")
	fb := follow(b)
	gone, kept := objectOf(a), objectOf(a)
	if err := a.Persist([]Tree{tree(gone, "gone"), tree(kept, "kept")}); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "both trees on b", func(f *follower) bool { return len(f.trees) == 2 })
	fb.mu.Lock()
	old := fb.rev
	fb.mu.Unlock()
	// As if b had been away: it knew gone, which is deleted now, and
	// missed a new tree, and etcd compacted the revisions in between.
	ctx := context.Background()
	if _, err := a.cli.Delete(ctx, a.dataKey(gone)); err != nil {
		t.Fatal(err)
	}
	fresh := objectOf(a)
	if err := a.Persist([]Tree{tree(fresh, "fresh")}); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "the changes on b", func(f *follower) bool { return f.deletes == 1 && len(f.trees) == 2 })
	if err := a.PutName("kept", kept); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "the name on b", func(f *follower) bool { return f.names["kept"] == kept })
	b.mu.Lock()
	b.remote[gone] = struct{}{} // the view of a b that missed the delete,
	b.names["dropped"] = gone   // a name's drop
	b.names["kept"] = gone      // and a name's move
	b.mu.Unlock()
	fb.mu.Lock()
	fb.names["dropped"], fb.names["kept"] = gone, gone
	fb.mu.Unlock()
	resp, err := a.cli.Get(ctx, a.dataKey(fresh))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if next := b.watch(old + 1); next != 0 {
		t.Fatalf("watch from a compacted revision resumes at %d", next)
	}
	if _, err := b.resync(); err != nil {
		t.Fatal(err)
	}
	fb.waitFor(t, "the resync's delete of the missed tree", func(f *follower) bool {
		_, g := f.trees[gone]
		_, k := f.trees[kept]
		_, n := f.trees[fresh]
		return f.deletes == 2 && !g && k && n
	})
	fb.waitFor(t, "the resync's names", func(f *follower) bool {
		_, d := f.names["dropped"]
		return !d && f.names["kept"] == kept
	})
}
