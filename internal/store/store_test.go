package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/status"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(Config{Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() { checkInvariants(t, s) }) // runs first: after the test's own deferred closes
	return s
}

// checkInvariants fails the test if the store's bookkeeping is inconsistent.
func checkInvariants(t testing.TB, s *Store) {
	t.Helper()
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("store invariants: %v", err)
	}
}

func blobOf(t *testing.T, ss *Session, n uint64) ids.ObjectID {
	t.Helper()
	p, err := ss.CreateBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

func create(t *testing.T, ss *Session, tree string, seal ...ids.ObjectID) ids.ObjectID {
	t.Helper()
	c, err := ss.CreateData(json.RawMessage(tree), seal)
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func TestDeleteRules(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	b1, b2 := blobOf(t, ss, 64), blobOf(t, ss, 64)
	child := create(t, ss, fmt.Sprintf(`{"typename":"c","b":{"id":"%v"}}`, b1), b1)
	parent := create(t, ss, fmt.Sprintf(`{"typename":"p","c":{"id":"%v"},"b":{"id":"%v"}}`, child, b2), b2)

	// A member still used by another object is kept without force.
	s.Delete([]ids.ObjectID{child}, DeleteOptions{Deep: true})
	if !s.Exists(child) {
		t.Fatal("used child deleted without force")
	}
	// Shallow delete of the parent drops its direct blob but keeps the child.
	deleted := s.Delete([]ids.ObjectID{parent}, DeleteOptions{})
	if s.Exists(parent) || s.Exists(b2) || !s.Exists(child) || !s.Exists(b1) || len(deleted) != 1 {
		t.Fatalf("shallow delete: %v", deleted)
	}
	// Force upward: deleting the blob deletes what uses it.
	other := create(t, ss, fmt.Sprintf(`{"typename":"p","c":{"id":"%v"}}`, child))
	s.Delete([]ids.ObjectID{b1}, DeleteOptions{Force: true, Deep: true})
	if s.Exists(b1) || s.Exists(child) || s.Exists(other) {
		t.Fatal("force delete left users")
	}
	s.Delete([]ids.ObjectID{12345}, DeleteOptions{}) // missing ids are ignored
	checkInvariants(t, s)
}

func TestTreesAndNames(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	b := blobOf(t, ss, 10)
	if _, err := ss.CreateData(json.RawMessage(fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, b)), nil); status.CodeOf(err) != status.ObjectNotSealed {
		t.Fatalf("unsealed member: %v", err)
	}
	for _, bad := range []string{`[]`, `{"typename":""}`, `{"typename":"vineyard::Blob"}`, `{"typename":"t","m":{"x":1}}`} {
		if _, err := ss.CreateData(json.RawMessage(bad), nil); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	id := create(t, ss, fmt.Sprintf(`{"typename":"t","x":[1,2],"b":{"id":"%v"}}`, b), b)
	content, all, _ := s.GetData([]ids.ObjectID{id, 99})
	if all {
		t.Fatal("missing id reported present")
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(content, &m); err != nil {
		t.Fatalf("%s: %v", content, err)
	}
	tree := m[id.String()]
	member, _ := tree["b"].(map[string]any)
	if tree["typename"] != "t" || member["length"] != float64(10) || tree["transient"] != true {
		t.Fatalf("tree %v", tree)
	}
	if err := s.PutName("n", id); status.CodeOf(err) != status.Invalid {
		t.Fatalf("transient name: %v", err)
	}
	if err := s.Persist(id); err != nil {
		t.Fatal(err)
	}
	if err := s.PutName("n", id); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetName("n"); got != id {
		t.Fatal("GetName")
	}
	if err := s.Label(id, []string{"k"}, []string{"v"}); err != nil {
		t.Fatal(err)
	}
	cp, err := s.ShallowCopy(id, json.RawMessage(`{"extra":1}`))
	if err != nil || !s.Exists(cp) {
		t.Fatal(err)
	}
	s.Delete([]ids.ObjectID{id}, DeleteOptions{Force: true, Deep: true})
	if _, err := s.GetName("n"); err == nil {
		t.Fatal("name of a deleted object survives")
	}
	if out, err := s.List("*", false, 0); err != nil || len(out) < 2 {
		t.Fatal(err)
	}
	if _, err := s.List("(", true, 0); status.CodeOf(err) != status.Invalid {
		t.Fatalf("bad regex: %v", err)
	}
}

func TestSessionCloseFreesEverything(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	blobOf(t, ss, 4096)
	sealed := blobOf(t, ss, 4096)
	if err := ss.Seal(sealed); err != nil {
		t.Fatal(err)
	}
	reader := s.NewSession()
	if _, err := reader.GetBuffers([]ids.ObjectID{sealed}, false); err != nil {
		t.Fatal(err)
	}
	ss.Close()
	s.Delete([]ids.ObjectID{sealed}, DeleteOptions{})
	checkInvariants(t, s)
	if used, _ := s.Usage(); used != 4096 {
		t.Fatalf("held blob freed early or unsealed one leaked: used %d", used)
	}
	reader.Close()
	if used, _ := s.Usage(); used != 0 {
		t.Fatalf("used %d after all sessions closed", used)
	}
}

func FuzzCreateData(f *testing.F) {
	f.Add([]byte(`{"typename":"t","a":1,"m":{"id":"o8000000000000000"}}`))
	f.Add([]byte(`{"typename":"t","m":{"id":12}}`))
	f.Add([]byte(`{"typename":5}`))
	s, err := New(Config{Size: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tree []byte) {
		ss := s.NewSession()
		defer ss.Close()
		c, err := ss.CreateData(tree, nil)
		if err != nil {
			return
		}
		if stored, _ := s.Tree(c.ID); !json.Valid(stored) {
			t.Fatalf("stored tree is not JSON: %s", stored)
		}
		checkInvariants(t, s)
		s.Delete([]ids.ObjectID{c.ID}, DeleteOptions{Force: true})
		checkInvariants(t, s)
	})
}

func TestCreateNestedMembers(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	b1, b2 := blobOf(t, ss, 64), blobOf(t, ss, 64)
	tree := fmt.Sprintf(`{"typename":"table","n":2,
		"c0":{"typename":"col","buffer_":{"id":"%v"}},
		"c1":{"typename":"col","inner":{"typename":"leaf","buffer_":{"id":"%v"}}}}`, b1, b2)
	c, err := ss.CreateData(json.RawMessage(tree), []ids.ObjectID{b1, b2})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		C0 struct {
			ID     string `json:"id"`
			Buffer struct {
				ID string `json:"id"`
			} `json:"buffer_"`
		} `json:"c0"`
		C1 struct {
			ID    string `json:"id"`
			Inner struct {
				ID string `json:"id"`
			} `json:"inner"`
		} `json:"c1"`
	}
	stored, _ := s.Tree(c.ID)
	if err := json.Unmarshal(stored, &got); err != nil {
		t.Fatalf("%v: %s", err, stored)
	}
	for _, text := range []string{got.C0.ID, got.C1.ID, got.C1.Inner.ID} {
		id, err := ids.Parse(text)
		if err != nil || !s.Exists(id) || id.IsBlob() {
			t.Fatalf("nested member %q was not created: %s", text, stored)
		}
	}
	if got.C0.Buffer.ID != b1.String() {
		t.Fatalf("blob link lost: %s", stored)
	}
	// The new members are used by the root: a deep delete of the root
	// removes them, and their blobs.
	s.Delete([]ids.ObjectID{c.ID}, DeleteOptions{Deep: true})
	inner, _ := ids.Parse(got.C1.Inner.ID)
	if s.Exists(c.ID) || s.Exists(inner) || s.Exists(b2) {
		t.Fatal("deep delete left nested members")
	}
}

func TestCreateNestedIsAllOrNothing(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	before, _ := s.List("*", false, 0)
	for name, tree := range map[string]string{
		"missing link":     `{"typename":"t","a":{"typename":"new"},"b":{"id":"o0000000000000123"}}`,
		"no id, no type":   `{"typename":"t","a":{"typename":"new","x":{"value":1}}}`,
		"nested blob type": `{"typename":"t","a":{"typename":"vineyard::Blob"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ss.CreateData(json.RawMessage(tree), nil); err == nil {
				t.Fatal("invalid nested tree accepted")
			}
			after, _ := s.List("*", false, 0)
			if string(after) != string(before) {
				t.Fatalf("a failed create left objects: %s", after)
			}
		})
	}
	deep := `{"typename":"leaf"}`
	for i := 0; i <= maxTreeDepth+1; i++ {
		deep = `{"typename":"n","m":` + deep + `}`
	}
	if _, err := ss.CreateData(json.RawMessage(deep), nil); status.CodeOf(err) != status.MetaTreeInvalid {
		t.Fatalf("over-deep tree: %v", err)
	}
}

func TestMetaEpoch(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	b := blobOf(t, ss, 64)
	id := create(t, ss, fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, b), b)
	other := create(t, ss, `{"typename":"t"}`)
	if err := s.PutName("kept", other); err == nil {
		t.Fatal("named a transient object")
	}
	steps := []struct {
		name    string
		do      func()
		changes bool
	}{
		{"create", func() { create(t, ss, `{"typename":"x"}`) }, false},
		{"get", func() { _, _, _ = s.GetData([]ids.ObjectID{id}) }, false},
		{"label", func() { _ = s.Label(id, []string{"k"}, []string{"v"}) }, true},
		{"persist", func() { _ = s.Persist(other) }, true},
		{"persist again", func() { _ = s.Persist(other) }, false},
		{"put name", func() { _ = s.PutName("n", other) }, true},
		{"drop name", func() { _ = s.DropName("n") }, true},
		{"drop unknown name", func() { _ = s.DropName("n") }, false},
		{"delete missing", func() { s.Delete([]ids.ObjectID{12345}, DeleteOptions{}) }, false},
		{"delete", func() { s.Delete([]ids.ObjectID{id}, DeleteOptions{Deep: true}) }, true},
	}
	for _, step := range steps {
		before := s.Epoch()
		step.do()
		checkInvariants(t, s)
		if changed := s.Epoch() != before; changed != step.changes {
			t.Errorf("%s: epoch changed %v, want %v", step.name, changed, step.changes)
		}
	}
	// Clients read the epoch at EpochOffset of the arena, after the magic.
	arena := s.arena.Bytes()
	if string(arena[:6]) != "v6d-go" || binary.NativeEndian.Uint64(arena[EpochOffset:]) != s.Epoch() {
		t.Fatalf("arena header %q", arena[:16])
	}
	ss.Close() // releases the deleted blob
	if used, _ := s.Usage(); used != 0 {
		t.Fatalf("the header counts as usage: %d", used)
	}
}

// TestClearServesOthersBetweenBatches checks that Clear releases the store
// lock between batches: a get from another session runs between them (it
// would deadlock if Clear held the lock), and Clear still removes
// everything.
func TestClearServesOthersBetweenBatches(t *testing.T) {
	s, err := New(Config{Size: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ss := s.NewSession()
	defer ss.Close()
	objs := fillStore(t, ss, 3*clearBatch)
	reader := s.NewSession()
	defer reader.Close()
	batches := 0
	s.clearHook = func() {
		batches++
		if _, _, _, err := reader.GetDataWithBuffers(objs[len(objs)-1:]); err != nil {
			t.Error(err)
		}
		checkInvariants(t, s)
	}
	s.Clear()
	checkInvariants(t, s)
	if batches < 2 {
		t.Fatalf("Clear ran in %d batch(es), want several", batches)
	}
	if len(s.objects) != 0 || len(s.blobs) != 0 { // the reader's blob is a zombie now
		t.Fatalf("Clear left %d objects and %d blobs", len(s.objects), len(s.blobs))
	}
	reader.Close()
	if used, _ := s.Usage(); used != 0 {
		t.Fatalf("used %d after Clear and closing every session", used)
	}
}

// TestCheckInvariantsFindsDamage breaks the bookkeeping on purpose, one way
// at a time, and checks that CheckInvariants notices each.
func TestCheckInvariantsFindsDamage(t *testing.T) {
	for name, damage := range map[string]func(s *Store, obj, bid ids.ObjectID){
		"refcount":       func(s *Store, _, bid ids.ObjectID) { s.blobs[bid].refs++ },
		"reverse index":  func(s *Store, _, bid ids.ObjectID) { s.blobs[bid].users = nil },
		"dangling name":  func(s *Store, _, _ ids.ObjectID) { _ = s.meta.PutName("ghost", 12345) },
		"leaked extent":  func(s *Store, _, _ ids.ObjectID) { _, _ = s.alloc.Alloc(64) },
		"lost zombie":    func(s *Store, _, bid ids.ObjectID) { s.zombies[bid] = s.blobs[bid] },
		"missing member": func(s *Store, obj, _ ids.ObjectID) { s.objects[obj].members[0].id = 0x8000000000000999 },
		"stale tree": func(s *Store, obj, _ ids.ObjectID) {
			_ = s.meta.Persist([]meta.Tree{{ID: obj, Content: []byte(`{}`)}}) // obj is transient
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := New(Config{Size: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			ss := s.NewSession()
			defer ss.Close()
			bid := blobOf(t, ss, 100)
			obj := create(t, ss, fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, bid), bid)
			checkInvariants(t, s)
			damage(s, obj, bid)
			if err := s.CheckInvariants(); err == nil {
				t.Fatal("damage not detected")
			}
		})
	}
}

// published reports whether the directory holds a record of id.
func published(s *Store, id ids.ObjectID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.dir.entries[id]
	return ok
}

// An inline put with a tree publishes the object, whose record lists its
// blobs, and not each blob; an inline put of bare blobs publishes them.
func TestInlinePutPublishesWhatGetsAskFor(t *testing.T) {
	s := newStore(t)
	if s.dir == nil {
		t.Skip("no directory on this kernel")
	}
	ss := s.NewSession()
	defer ss.Close()
	blobs, err := ss.AllocInline([]uint64{8})
	if err != nil {
		t.Fatal(err)
	}
	copy(blobs[0].Data, "12345678")
	out, err := ss.CreateInline(json.RawMessage(`{"typename":"T","a":{"inline":0}}`), blobs)
	if err != nil {
		t.Fatal(err)
	}
	if !published(s, out.ID) {
		t.Fatal("the object of an inline put is not in the directory")
	}
	if published(s, out.Inline[0]) {
		t.Fatal("the member blob of an inline put has a record of its own")
	}
	bare, err := ss.AllocInline([]uint64{8})
	if err != nil {
		t.Fatal(err)
	}
	out, err = ss.CreateInline(nil, bare)
	if err != nil {
		t.Fatal(err)
	}
	if !published(s, out.Inline[0]) {
		t.Fatal("a bare inline blob is not in the directory")
	}
}
