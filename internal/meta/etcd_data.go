package meta

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// Limits of one etcd transaction. etcd refuses a txn of more than 128
// operations (--max-txn-ops) or a request larger than 1.5 MiB
// (--max-request-bytes) by default; we stay well below both.
const (
	txnMaxOps   = 64
	txnMaxBytes = 1 << 20
)

// MaxTreeBytes is the largest tree one object may persist: it must fit one
// etcd request with room to spare.
const MaxTreeBytes = txnMaxBytes - 4096

func (e *Etcd) dataKey(id ids.ObjectID) string {
	var b [17]byte
	return e.root + keyData + string(id.AppendText(b[:0]))
}

// tombstoneKey is the key of the tombstone of id (Delete).
func (e *Etcd) tombstoneKey(id ids.ObjectID) string {
	var b [17]byte
	return e.root + keyDeleted + string(id.AppendText(b[:0]))
}

func (e *Etcd) nameKey(name string) string { return e.root + keyNames + name }

// Persist writes the trees, one key per object, attached to this instance's
// lease. It is one transaction when the trees fit etcd's limits; otherwise
// several, written in reverse order: the store gives the root first and its
// members after it, so members land before the objects that link them and
// the root, last, makes the whole tree visible at once. If a later
// transaction fails, the keys already written are deleted again (best
// effort) and the error is returned.
func (e *Etcd) Persist(trees []Tree) error {
	lease, err := e.currentLease()
	if err != nil {
		return err
	}
	for _, t := range trees {
		if len(t.Content) > MaxTreeBytes {
			return fmt.Errorf("%w: the tree of %v is %d bytes, more than the %d etcd allows in one request",
				ErrEtcd, t.ID, len(t.Content), MaxTreeBytes)
		}
	}
	ops := make([]clientv3.Op, 0, len(trees))
	sizes := make([]int, 0, len(trees))
	opIDs := make([]ids.ObjectID, 0, len(trees))
	seen := make(map[ids.ObjectID]bool, len(trees))
	for i := len(trees) - 1; i >= 0; i-- {
		if seen[trees[i].ID] {
			continue // etcd refuses a key twice in one txn; the last tree given wins
		}
		seen[trees[i].ID] = true
		opIDs = append(opIDs, trees[i].ID)
		key := e.dataKey(trees[i].ID)
		ops = append(ops, clientv3.OpPut(key, string(trees[i].Content), clientv3.WithLease(lease)))
		sizes = append(sizes, len(key)+len(trees[i].Content))
	}
	done := 0
	for _, n := range chunks(sizes) {
		if err := e.commit(ops[done:done+n], "persist"); err != nil {
			if done > 0 {
				_ = e.Delete(opIDs[:done])
			}
			return err
		}
		done += n
	}
	e.mu.Lock()
	for _, t := range trees {
		e.ownTrees[t.ID] = append([]byte(nil), t.Content...)
	}
	e.mu.Unlock()
	return nil
}

// chunks splits operations of the given sizes into runs that fit one
// transaction, and returns the length of each run.
func chunks(sizes []int) []int {
	var out []int
	n, bytes := 0, 0
	for _, s := range sizes {
		if n > 0 && (n == txnMaxOps || bytes+s > txnMaxBytes) {
			out = append(out, n)
			n, bytes = 0, 0
		}
		n++
		bytes += s + 64 // per-operation framing, generously
	}
	if n > 0 {
		out = append(out, n)
	}
	return out
}

// commit runs ops as one unconditional transaction.
func (e *Etcd) commit(ops []clientv3.Op, what string) error {
	ctx, cancel := e.opCtx(e.ctx)
	defer cancel()
	if _, err := e.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return e.fail(what, err)
	}
	return nil
}

// Delete removes the trees of idl; unknown ids are ignored. The objects
// are gone locally already, so the deletion is queued (etcd_outbox.go): it
// is written at once when etcd answers, else when it is back. It fails only
// when the backend is closed.
func (e *Etcd) Delete(idl []ids.ObjectID) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	keys := make([]string, 0, len(idl))
	seqs := make([]uint64, 0, len(idl))
	for _, id := range idl {
		delete(e.ownTrees, id) // not published again under a new lease
		keys = append(keys, e.dataKey(id))
		seqs = append(seqs, e.enqueueLocked(outOp{key: keys[len(keys)-1], del: true}))
		if !e.own(id) {
			// Another instance's object: its tombstone tells the owner,
			// whose watch skips the deletes of its own keys (a lease that
			// expired deletes them too, and the owner puts them back).
			keys = append(keys, e.tombstoneKey(id))
			value := []byte(strconv.FormatUint(e.instance, 10))
			seqs = append(seqs, e.enqueueLocked(outOp{key: keys[len(keys)-1], value: value}))
		}
	}
	e.mu.Unlock()
	e.tryWrite(keys, seqs)
	return nil
}

// Update rewrites the persisted trees of objects this instance persisted
// before (a label, a name moved): queued like Delete. A tree too large for
// etcd is refused, and nothing is queued.
func (e *Etcd) Update(trees []Tree) error {
	for _, t := range trees {
		if len(t.Content) > MaxTreeBytes {
			return fmt.Errorf("%w: the tree of %v is %d bytes, more than the %d etcd allows in one request",
				ErrEtcd, t.ID, len(t.Content), MaxTreeBytes)
		}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	keys := make([]string, len(trees))
	seqs := make([]uint64, len(trees))
	for i, t := range trees {
		content := append([]byte(nil), t.Content...)
		e.ownTrees[t.ID] = content
		keys[i] = e.dataKey(t.ID)
		seqs[i] = e.enqueueLocked(outOp{key: keys[i], value: content})
	}
	e.mu.Unlock()
	e.tryWrite(keys, seqs)
	return nil
}

// DropNameOf removes name if it still points at id (the names of a deleted
// object: a name moved elsewhere meanwhile stays), queued like Delete.
func (e *Etcd) DropNameOf(name string, id ids.ObjectID) error {
	if checkName(name) != nil {
		return nil // never set
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	if e.ownNames[name] == id {
		delete(e.ownNames, name)
	}
	key := e.nameKey(name)
	seq := e.enqueueLocked(outOp{key: key, del: true, cond: true, ifID: id})
	e.mu.Unlock()
	e.tryWrite([]string{key}, []uint64{seq})
	return nil
}

// checkName refuses names etcd keys cannot carry sensibly.
func checkName(name string) error {
	if name == "" || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w: bad name %q", ErrEtcd, name)
	}
	return nil
}

// PutName points name at id. It reads the name's current revision and sets
// it in a transaction that compares that revision: of two instances racing
// for one name (both saw it free, or both saw the same old value), exactly
// one succeeds and the other gets ErrNameTaken.
func (e *Etcd) PutName(name string, id ids.ObjectID) error {
	lease, err := e.currentLease()
	if err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	ctx, cancel := e.opCtx(e.ctx)
	defer cancel()
	key := e.nameKey(name)
	cur, err := e.cli.Get(ctx, key)
	if err != nil {
		return e.fail("put name", err)
	}
	var rev int64
	if len(cur.Kvs) > 0 {
		rev = cur.Kvs[0].ModRevision
		if string(cur.Kvs[0].Value) == id.String() {
			return nil
		}
	}
	if e.beforeNameTxn != nil {
		e.beforeNameTxn()
	}
	resp, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, id.String(), clientv3.WithLease(lease))).Commit()
	if err != nil {
		return e.fail("put name", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %q was set by another instance at the same time", ErrNameTaken, name)
	}
	e.mu.Lock()
	e.ownNames[name] = id
	e.mu.Unlock()
	return nil
}

// GetName resolves a name from etcd (not from a cache: a name put on
// another instance is seen at once).
func (e *Etcd) GetName(name string) (ids.ObjectID, error) {
	if _, err := e.currentLease(); err != nil {
		return 0, err
	}
	ctx, cancel := e.opCtx(e.ctx)
	defer cancel()
	resp, err := e.cli.Get(ctx, e.nameKey(name))
	if err != nil {
		return 0, e.fail("get name", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, ErrNameNotFound
	}
	id, err := ids.Parse(string(resp.Kvs[0].Value))
	if err != nil {
		return 0, e.fail("get name", err)
	}
	return id, nil
}

// DropName removes a name; an unknown name is not an error.
func (e *Etcd) DropName(name string) error {
	if _, err := e.currentLease(); err != nil {
		return err
	}
	ctx, cancel := e.opCtx(e.ctx)
	defer cancel()
	if _, err := e.cli.Delete(ctx, e.nameKey(name)); err != nil {
		return e.fail("drop name", err)
	}
	e.mu.Lock()
	delete(e.ownNames, name)
	e.mu.Unlock()
	return nil
}

// ListNames returns every name of the cluster, read from etcd.
func (e *Etcd) ListNames() (map[string]ids.ObjectID, error) {
	if _, err := e.currentLease(); err != nil {
		return nil, err
	}
	ctx, cancel := e.opCtx(e.ctx)
	defer cancel()
	prefix := e.root + keyNames
	resp, err := e.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, e.fail("list names", err)
	}
	out := make(map[string]ids.ObjectID, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if id, err := ids.Parse(string(kv.Value)); err == nil {
			out[strings.TrimPrefix(string(kv.Key), prefix)] = id
		}
	}
	return out, nil
}

// LatestRevision returns etcd's current revision and asks the watch for a
// progress report, so that a Progress change with at least that revision
// follows once every earlier change has been delivered.
func (e *Etcd) LatestRevision(ctx context.Context) (int64, error) {
	if _, err := e.currentLease(); err != nil {
		return 0, err
	}
	octx, cancel := e.opCtx(ctx)
	defer cancel()
	resp, err := e.cli.Get(octx, e.root+keyCounter)
	if err != nil {
		return 0, e.fail("sync", err)
	}
	_ = e.cli.RequestProgress(clientv3.WithRequireLeader(octx))
	return resp.Header.Revision, nil
}

// RequestProgress asks the watch for a progress report again (a Progress
// change), for a waiter of LatestRevision whose report has not come.
func (e *Etcd) RequestProgress(ctx context.Context) {
	octx, cancel := e.opCtx(ctx)
	defer cancel()
	_ = e.cli.RequestProgress(clientv3.WithRequireLeader(octx))
}
