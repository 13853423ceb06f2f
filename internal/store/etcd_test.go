package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/status"
)

// clusterStore opens a store whose backend is a meta.Etcd on srv.
// Calls to etcd time out after timeout.
func clusterStore(t *testing.T, srv *etcdtest.Server, host string, timeout time.Duration) *Store {
	t.Helper()
	return clusterStoreTTL(t, srv, host, timeout, 2*time.Second)
}

// clusterStoreTTL is clusterStore with a lease of ttl.
func clusterStoreTTL(t *testing.T, srv *etcdtest.Server, host string, timeout, ttl time.Duration) *Store {
	t.Helper()
	be, err := meta.OpenEtcd(context.Background(), meta.EtcdConfig{
		Endpoints:   []string{srv.Endpoint()},
		Prefix:      "store-test",
		DialTimeout: timeout,
		LeaseTTL:    ttl,
		Hostname:    host,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Size: 1 << 20, Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// synced waits until s has applied everything etcd has.
func synced(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClusterStores: three stores on one etcd. What A persists, B and C
// read (get_meta, exists, list, names) after a Sync; A's delete and A's
// end reach them too.
func TestClusterStores(t *testing.T) {
	srv := etcdtest.Run(t)
	a := clusterStore(t, srv, "a", 10*time.Second)
	b := clusterStore(t, srv, "b", 10*time.Second)
	c := clusterStore(t, srv, "c", 10*time.Second)
	if a.InstanceID() == b.InstanceID() || b.InstanceID() == c.InstanceID() || a.InstanceID() == c.InstanceID() {
		t.Fatalf("instance ids %d %d %d", a.InstanceID(), b.InstanceID(), c.InstanceID())
	}
	ss := a.NewSession()
	defer ss.Close()
	bid := blobOf(t, ss, 64)
	child := create(t, ss, fmt.Sprintf(`{"typename":"vineyard::Tensor","b":{"id":"%v"},"shape_":"[8]"}`, bid), bid)
	root := create(t, ss, fmt.Sprintf(`{"typename":"vineyard::Pair","first":{"id":"%v"},"k":1}`, child))
	transient := create(t, ss, `{"typename":"vineyard::Transient"}`)
	if err := a.Persist(root); err != nil {
		t.Fatal(err)
	}
	if err := a.PutName("pair", root); err != nil {
		t.Fatal(err)
	}
	want, _ := a.Tree(root)
	for _, s := range []*Store{b, c} {
		synced(t, s)
		if !s.Exists(root) || !s.Exists(child) || s.Exists(transient) {
			t.Fatalf("exists on %d: root %v child %v transient %v", s.InstanceID(), s.Exists(root), s.Exists(child), s.Exists(transient))
		}
		got, ok := s.Tree(root)
		if !ok || !sameJSON(t, got, want) {
			t.Fatalf("tree on %d:\n%s\nwant (as on a)\n%s", s.InstanceID(), got, want)
		}
		if p, err := s.IfPersist(root); err != nil || !p {
			t.Fatalf("if_persist of a remote object: %v %v", p, err)
		}
		if id, err := s.GetName("pair"); err != nil || id != root {
			t.Fatalf("name on %d: %v %v", s.InstanceID(), id, err)
		}
		list, err := s.List("vineyard::Pa*", false, 0)
		if err != nil || !strings.Contains(string(list), root.String()) {
			t.Fatalf("list on %d: %s %v", s.InstanceID(), list, err)
		}
		content, all, err := s.GetData([]ids.ObjectID{root, child})
		if err != nil || !all || !strings.Contains(string(content), `"instance_id":`+fmt.Sprint(a.InstanceID())) {
			t.Fatalf("get_data on %d: %s %v %v", s.InstanceID(), content, all, err)
		}
		checkInvariants(t, s)
	}
	// The blob's tree carries its instance, so B knows where it lives.
	got, _ := b.Tree(root)
	if !strings.Contains(string(got), fmt.Sprintf(`"id":"%v","typename":"vineyard::Blob","length":64`, bid)) {
		t.Fatalf("the remote tree lacks its blob: %s", got)
	}
	// B can name A's object too; a name is one value for the cluster.
	if err := b.PutName("from-b", root); err != nil {
		t.Fatal(err)
	}
	if id, err := c.GetName("from-b"); err != nil || id != root {
		t.Fatalf("name set on b, read on c: %v %v", id, err)
	}
	a.Delete([]ids.ObjectID{root}, DeleteOptions{Deep: true})
	for _, s := range []*Store{b, c} {
		synced(t, s)
		if s.Exists(root) || s.Exists(child) {
			t.Fatalf("deleted objects still exist on %d", s.InstanceID())
		}
		if _, err := s.GetName("pair"); status.CodeOf(err) != status.ObjectNotExists {
			t.Fatalf("the name of a deleted object on %d: %v", s.InstanceID(), err)
		}
	}
	// An instance that goes away takes its persisted objects with it.
	other := create(t, ss, `{"typename":"vineyard::Other"}`)
	if err := a.Persist(other); err != nil {
		t.Fatal(err)
	}
	synced(t, b)
	if !b.Exists(other) {
		t.Fatal("a second persist did not reach b")
	}
	ss.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	synced(t, b)
	if b.Exists(other) {
		t.Fatal("the objects of a closed instance are still visible")
	}
	checkInvariants(t, b)
}

// TestClusterEtcdDown: with etcd down, local put/get keep working, persist
// and names fail with EtcdError naming the endpoint, and nothing changes.
func TestClusterEtcdDown(t *testing.T) {
	srv := etcdtest.Run(t)
	a := clusterStore(t, srv, "a", 2*time.Second)
	ss := a.NewSession()
	defer ss.Close()
	srv.Stop()
	bid := blobOf(t, ss, 64)
	id := create(t, ss, fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, bid), bid)
	if _, ok := a.Tree(id); !ok {
		t.Fatal("local get with etcd down")
	}
	err := a.Persist(id)
	if status.CodeOf(err) != status.EtcdError || !strings.Contains(err.Error(), srv.Endpoint()) {
		t.Fatalf("persist with etcd down: %v", err)
	}
	if p, _ := a.IfPersist(id); p {
		t.Fatal("persisted although etcd is down")
	}
	if _, err := a.ListNames("*", false, 0); status.CodeOf(err) != status.EtcdError {
		t.Fatalf("list names with etcd down: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Sync(ctx); status.CodeOf(err) != status.EtcdError {
		t.Fatalf("sync with etcd down: %v", err)
	}
	checkInvariants(t, a)
}

// TestClusterEtcdOutageConverges: the changes of persisted objects made
// while etcd is stopped are not lost. A delete (with the deleted object's
// name) and a label succeed and are queued (MetaPending counts them), a
// drop_name fails with EtcdError and changes nothing; once etcd is back
// (same data, the lease survived, so the keys too), the queue is written and
// the other store converges: the deleted objects and their names are gone,
// the label is there, the name whose drop failed is still there.
func TestClusterEtcdOutageConverges(t *testing.T) {
	srv := etcdtest.Run(t)
	a := clusterStoreTTL(t, srv, "a", 2*time.Second, time.Minute)
	b := clusterStoreTTL(t, srv, "b", 2*time.Second, time.Minute)
	ss := a.NewSession()
	defer ss.Close()
	obj := func(name string) ids.ObjectID {
		id := create(t, ss, `{"typename":"vineyard::`+name+`"}`)
		if err := a.Persist(id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	gone, named, labelled, labelledGone, kept := obj("Gone"), obj("Named"), obj("Labelled"), obj("LabelledGone"), obj("Kept")
	for name, id := range map[string]ids.ObjectID{"named": named, "kept": kept} {
		if err := a.PutName(name, id); err != nil {
			t.Fatal(err)
		}
	}
	synced(t, b)
	for _, id := range []ids.ObjectID{gone, named, labelled, labelledGone, kept} {
		if !b.Exists(id) {
			t.Fatalf("%v did not reach b", id)
		}
	}

	srv.Stop()
	a.Delete([]ids.ObjectID{gone, named}, DeleteOptions{})
	if err := a.Label(labelled, []string{"during"}, []string{"outage"}); err != nil {
		t.Fatalf("label with etcd down: %v", err)
	}
	if err := a.Label(labelledGone, []string{"x"}, []string{"y"}); err != nil {
		t.Fatalf("label with etcd down: %v", err)
	}
	a.Delete([]ids.ObjectID{labelledGone}, DeleteOptions{}) // after its label: the delete must win
	if err := a.DropName("kept"); status.CodeOf(err) != status.EtcdError {
		t.Fatalf("drop_name with etcd down: %v, want EtcdError", err)
	}
	if raw, _ := a.Tree(kept); !strings.Contains(string(raw), `"__name":"kept"`) {
		t.Fatalf("a failed drop_name changed the object: %s", raw)
	}
	// gone, named, named's name, labelled, labelledGone.
	if n := a.MetaPending(); n != 5 {
		t.Fatalf("%d changes pending with etcd down, want 5", n)
	}
	if a.Exists(gone) || a.Exists(named) || a.Exists(labelledGone) {
		t.Fatal("the local deletes did not happen")
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.Sync(ctx) // fails until b's client reconnected
		cancel()
		raw, _ := b.Tree(labelled)
		_, nameErr := b.GetName("named")
		keptID, keptErr := b.GetName("kept")
		converged := a.MetaPending() == 0 && !b.Exists(gone) && !b.Exists(named) && !b.Exists(labelledGone) &&
			status.CodeOf(nameErr) == status.ObjectNotExists && strings.Contains(string(raw), `\"during\":\"outage\"`) &&
			keptErr == nil && keptID == kept && b.Exists(kept)
		if converged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not converge 30 s after etcd came back: pending %d, gone %v named %v labelledGone %v, name %v, label tree %s, kept %v %v",
				a.MetaPending(), b.Exists(gone), b.Exists(named), b.Exists(labelledGone), nameErr, raw, keptID, keptErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkInvariants(t, a)
	checkInvariants(t, b)
}

// sameJSON reports whether two JSON documents hold the same value.
func sameJSON(t *testing.T, x, y []byte) bool {
	t.Helper()
	var a, b any
	if json.Unmarshal(x, &a) != nil || json.Unmarshal(y, &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestClusterSyncOtherKeys: Sync returns when etcd's latest revision is a
// key outside the prefix (no watch event of ours reports it; a progress
// report does).
func TestClusterSyncOtherKeys(t *testing.T) {
	srv := etcdtest.Run(t)
	a := clusterStore(t, srv, "a", 10*time.Second)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for i := range 3 {
		if _, err := cli.Put(context.Background(), fmt.Sprint("elsewhere/", i), "x"); err != nil {
			t.Fatal(err)
		}
		synced(t, a)
	}
}

// TestClusterNameChangesVisitOnlyTheirObjects: a name set, moved and dropped
// by another daemon changes the "__name" of the objects here that list it,
// and the watch's apply looks at those objects only, not at every object
// of the store (it scanned them all).
func TestClusterNameChangesVisitOnlyTheirObjects(t *testing.T) {
	srv := etcdtest.Run(t)
	a := clusterStore(t, srv, "a", 10*time.Second)
	b := clusterStore(t, srv, "b", 10*time.Second)
	ss := a.NewSession()
	defer ss.Close()
	const many = 300
	objs := make([]ids.ObjectID, many)
	for i := range objs {
		objs[i] = create(t, ss, fmt.Sprintf(`{"typename":"vineyard::Many","i":%d}`, i))
		if err := a.Persist(objs[i]); err != nil {
			t.Fatal(err)
		}
	}
	first, second := objs[0], objs[1]
	if err := a.PutName("n", first); err != nil {
		t.Fatal(err)
	}
	synced(t, a)
	synced(t, b)
	a.mu.Lock()
	before := a.nameVisits
	a.mu.Unlock()
	if err := b.PutName("n", second); err != nil { // moved by the other daemon
		t.Fatal(err)
	}
	synced(t, a)
	if tree, _ := a.Tree(first); strings.Contains(string(tree), `"__name"`) {
		t.Fatalf("the object the name left still carries it: %s", tree)
	}
	if tree, _ := a.Tree(second); !strings.Contains(string(tree), `"__name":"n"`) {
		t.Fatalf("the object the name moved to does not carry it: %s", tree)
	}
	if err := b.DropName("n"); err != nil {
		t.Fatal(err)
	}
	synced(t, a)
	if tree, _ := a.Tree(second); strings.Contains(string(tree), `"__name"`) {
		t.Fatalf("a dropped name is still carried: %s", tree)
	}
	checkInvariants(t, a)
	a.mu.Lock()
	visits := a.nameVisits - before
	a.mu.Unlock()
	if visits > 8 {
		t.Fatalf("two name changes looked at %d objects of %d", visits, many)
	}
}

// TestClusterDeleteThroughAnotherInstance: upstream's delete of a persisted
// object through an instance that did not make it is cluster-wide: it is
// gone there at once, and its owner deletes it with its members and blobs
// (its memory is free again) once it has caught up; a third instance no
// longer sees any of it. A delete of a local object of b is unaffected.
func TestClusterDeleteThroughAnotherInstance(t *testing.T) {
	srv := etcdtest.Run(t)
	a := clusterStore(t, srv, "a", 10*time.Second)
	b := clusterStore(t, srv, "b", 10*time.Second)
	c := clusterStore(t, srv, "c", 10*time.Second)
	sa := a.NewSession()
	defer sa.Close()
	before, _ := a.Usage()
	bid := blobOf(t, sa, 4096)
	child := create(t, sa, fmt.Sprintf(`{"typename":"vineyard::Tensor","b":{"id":"%v"}}`, bid), bid)
	root := create(t, sa, fmt.Sprintf(`{"typename":"vineyard::Pair","first":{"id":"%v"}}`, child))
	kept := create(t, sa, `{"typename":"vineyard::Kept"}`)
	for _, id := range []ids.ObjectID{root, kept} {
		if err := a.Persist(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := sa.Release(bid); err != nil { // create's reference: the blob is held by the tree alone
		t.Fatal(err)
	}
	if used, _ := a.Usage(); used == before {
		t.Fatal("the blob takes no memory")
	}
	synced(t, b)
	if !b.Exists(root) {
		t.Fatal("b does not see a's object")
	}
	if _, removed := b.DeleteCounted([]ids.ObjectID{root}, DeleteOptions{Deep: true}); removed != 1 {
		t.Fatalf("b's delete of a's object removed %d", removed)
	}
	if b.Exists(root) {
		t.Fatal("deleted through b, b still sees it")
	}
	synced(t, a)
	for _, id := range []ids.ObjectID{root, child, bid} {
		if a.Exists(id) {
			t.Fatalf("deleted through b, %v is still on its owner", id)
		}
	}
	if used, _ := a.Usage(); used != before {
		t.Fatalf("the owner's memory after the delete through b: %d bytes used, %d before", used, before)
	}
	if !a.Exists(kept) {
		t.Fatal("another object of a went too")
	}
	// The owner's deletion of the members goes to etcd as its own deletes
	// do (written at once, or queued while its outbox is busy).
	for deadline := time.Now().Add(30 * time.Second); a.MetaPending() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a's outbox still holds %d changes", a.MetaPending())
		}
	}
	synced(t, c)
	if c.Exists(root) || c.Exists(child) || !c.Exists(kept) {
		t.Fatalf("c: root %v child %v kept %v", c.Exists(root), c.Exists(child), c.Exists(kept))
	}
	for _, s := range []*Store{a, b, c} {
		checkInvariants(t, s)
	}
}
