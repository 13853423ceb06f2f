package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// TestGlobalObjectOfRemotePartitions: a global object may link a persisted
// object of another instance (a partition); a non-global one may not; the
// invariants hold, also once the partition's instance has deleted it.
func TestGlobalObjectOfRemotePartitions(t *testing.T) {
	srv := etcdtest.Run(t)
	a := clusterStore(t, srv, "a", 10*time.Second)
	b := clusterStore(t, srv, "b", 10*time.Second)
	sa, sb := a.NewSession(), b.NewSession()
	defer sa.Close()
	defer sb.Close()
	local := create(t, sa, `{"typename":"vineyard::Tensor<int64>","shape_":"[1]"}`)
	remote := create(t, sb, `{"typename":"vineyard::Tensor<int64>","shape_":"[2]"}`)
	if err := a.Persist(local); err != nil {
		t.Fatal(err)
	}
	if err := b.Persist(remote); err != nil {
		t.Fatal(err)
	}
	synced(t, a)

	tree := func(global bool) string {
		return fmt.Sprintf(`{"typename":"vineyard::GlobalTensor","global":%t,"partitions_-size":2,`+
			`"partitions_-0":{"id":"%v"},"partitions_-1":{"id":"%v"}}`, global, local, remote)
	}
	if _, err := sa.CreateData(json.RawMessage(tree(false)), nil); status.CodeOf(err) != status.ObjectNotExists {
		t.Fatalf("a non-global object with a remote member: %v, want ObjectNotExists", err)
	}
	g := create(t, sa, tree(true))
	got, ok := a.Tree(g)
	if !ok || !strings.Contains(string(got), `"shape_":"[2]"`) || !strings.Contains(string(got), `"shape_":"[1]"`) {
		t.Fatalf("global tree %s lacks its partitions' trees", got)
	}
	if err := a.Persist(g); err != nil {
		t.Fatal(err)
	}
	synced(t, b)
	if got, ok := b.Tree(g); !ok || !strings.Contains(string(got), `"shape_":"[1]"`) {
		t.Fatalf("b reads the global object as %s", got)
	}
	b.Delete([]ids.ObjectID{remote}, DeleteOptions{Deep: true})
	synced(t, a)
	for _, s := range []*Store{a, b} {
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNameMovedByAnotherInstance: when b moves a name a's object had, a's
// object stops listing it (its "__name" goes) once a has caught up.
func TestNameMovedByAnotherInstance(t *testing.T) {
	srv := etcdtest.Run(t)
	a := clusterStore(t, srv, "a", 10*time.Second)
	b := clusterStore(t, srv, "b", 10*time.Second)
	sa, sb := a.NewSession(), b.NewSession()
	defer sa.Close()
	defer sb.Close()
	oa := create(t, sa, `{"typename":"t"}`)
	ob := create(t, sb, `{"typename":"t"}`)
	for _, p := range []struct {
		s  *Store
		id ids.ObjectID
	}{{a, oa}, {b, ob}} {
		if err := p.s.Persist(p.id); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.PutName("moved", oa); err != nil {
		t.Fatal(err)
	}
	synced(t, b)
	if err := b.PutName("moved", ob); err != nil {
		t.Fatal(err)
	}
	synced(t, a)
	if tree, _ := a.Tree(oa); strings.Contains(string(tree), `"__name"`) {
		t.Fatalf("a's object still carries the moved name: %s", tree)
	}
	if tree, _ := b.Tree(ob); !strings.Contains(string(tree), `"__name":"moved"`) {
		t.Fatalf("b's object lacks the name: %s", tree)
	}
	_ = b.DropName("moved")
	synced(t, a)
	for _, s := range []*Store{a, b} {
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}
