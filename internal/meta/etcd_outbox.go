package meta

import (
	"cmp"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// The outbox: changes the store has already made locally and that etcd must
// get, whether or not it answers now. They are the keys only this instance
// writes, or writes conditionally: the deletion of its trees (a delete
// cannot be undone locally, the object's bytes are gone), the rewrite of
// its persisted trees (a label, a name moved), and the drop of a deleted
// object's names (only while a name still points at that object). Each is
// tried at once; when etcd cannot take it (unreachable, timeout), it stays
// queued in memory and the reconciler writes it when etcd is back, retrying
// with a backoff. The queue holds the last change per key (a later change
// of a key replaces the earlier, and the writes of one key are serialized
// by outMu, so etcd gets them in order), and every change is idempotent (a
// put of the whole tree, a delete, a compare-and-delete), so writing one
// twice is harmless.
//
// The operations that depend on what etcd holds now (persist, put_name,
// drop_name) are not queued: they fail with ErrEtcd and change nothing.

// outOp is one queued change of a key.
type outOp struct {
	seq   uint64
	key   string
	del   bool   // delete the key; else put value under the lease
	value []byte // a tree (put)
	cond  bool   // a name's drop: only while it points at ifID
	ifID  ids.ObjectID
}

// Backoff of the reconciler between failed attempts.
const (
	outRetryFirst = 100 * time.Millisecond
	outRetryLast  = 5 * time.Second
)

// enqueueLocked queues op as the latest change of its key and returns its
// sequence number. e.mu must be held.
func (e *Etcd) enqueueLocked(op outOp) uint64 {
	e.outSeq++
	op.seq = e.outSeq
	e.out[op.key] = &op
	return op.seq
}

// Pending returns how many changes wait in the outbox for etcd.
func (e *Etcd) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.out)
}

// tryWrite writes the changes just queued (their keys and sequence
// numbers), unless etcd is known to be down or the reconciler is writing
// (then it soon writes them too). It never fails: whatever is not written
// stays queued and the reconciler is woken.
func (e *Etcd) tryWrite(keys []string, seqs []uint64) {
	if _, err := e.currentLease(); err == nil && e.outMu.TryLock() {
		e.mu.Lock()
		ops := make([]*outOp, 0, len(keys))
		for i, k := range keys {
			if op, ok := e.out[k]; ok && op.seq == seqs[i] {
				ops = append(ops, op)
			}
		}
		e.mu.Unlock()
		err = e.writeOps(ops)
		e.outMu.Unlock()
		if err == nil {
			return
		}
		e.noteQueued(err)
	} else if err != nil {
		e.noteQueued(err)
	}
	select {
	case e.outKick <- struct{}{}:
	default:
	}
}

// noteQueued logs, once per outage, that changes wait for etcd.
func (e *Etcd) noteQueued(err error) {
	e.mu.Lock()
	first := !e.outLogged
	e.outLogged = true
	n := len(e.out)
	e.mu.Unlock()
	if first {
		e.cfg.Logger.Warn("etcd cannot take changes now: they are queued and written when it answers again",
			"instance", e.instance, "pending", n, "error", err)
	}
}

// writeOps writes ops to etcd in their order: the unconditional ones in
// transactions that fit etcd's limits, each name drop in its own
// compare-and-delete. Each op written leaves the queue unless a later
// change of its key came meanwhile. The caller holds outMu.
func (e *Etcd) writeOps(ops []*outOp) error {
	lease, err := e.currentLease()
	if err != nil {
		return err
	}
	for len(ops) > 0 {
		var batch []*outOp
		if ops[0].cond {
			batch = ops[:1]
			key, want := ops[0].key, ops[0].ifID.String()
			ctx, cancel := e.opCtx(e.ctx)
			_, err = e.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", want)).
				Then(clientv3.OpDelete(key)).Commit()
			cancel()
			if err != nil {
				return e.fail("drop a deleted object's name", err)
			}
		} else {
			n := 0
			for n < len(ops) && !ops[n].cond {
				n++
			}
			sizes := make([]int, n)
			for i, op := range ops[:n] {
				sizes[i] = len(op.key) + len(op.value)
			}
			batch = ops[:chunks(sizes)[0]]
			txn := make([]clientv3.Op, len(batch))
			for i, op := range batch {
				if op.del {
					txn[i] = clientv3.OpDelete(op.key)
				} else {
					txn[i] = clientv3.OpPut(op.key, string(op.value), clientv3.WithLease(lease))
				}
			}
			if err := e.commit(txn, "write queued changes"); err != nil {
				return err
			}
		}
		e.mu.Lock()
		for _, op := range batch {
			if cur, ok := e.out[op.key]; ok && cur.seq == op.seq {
				delete(e.out, op.key)
			}
		}
		e.mu.Unlock()
		ops = ops[len(batch):]
	}
	return nil
}

// reconcile writes the queued changes while there are any, until Close:
// woken by tryWrite, it retries with a growing backoff while etcd does not
// take them, and logs when the queue is empty again.
func (e *Etcd) reconcile() {
	defer e.wg.Done()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-e.outKick:
		}
		delay := outRetryFirst
		written := 0
		for {
			e.mu.Lock()
			ops := make([]*outOp, 0, len(e.out))
			for _, op := range e.out {
				ops = append(ops, op)
			}
			e.mu.Unlock()
			if len(ops) == 0 {
				break
			}
			slices.SortFunc(ops, func(a, b *outOp) int { return cmp.Compare(a.seq, b.seq) })
			err := e.writeBatches(ops)
			if err == nil {
				written += len(ops)
				continue // changes queued meanwhile
			}
			e.noteQueued(err)
			select {
			case <-e.ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, outRetryLast)
		}
		e.mu.Lock()
		logged := e.outLogged
		e.outLogged = false
		e.mu.Unlock()
		if logged {
			e.cfg.Logger.Info("queued changes written to etcd", "instance", e.instance, "written", written)
		}
	}
}

// writeBatches writes ops (in order) taking outMu for each transaction's
// worth only, so a change made meanwhile (tryWrite) waits for at most one.
func (e *Etcd) writeBatches(ops []*outOp) error {
	for len(ops) > 0 {
		n := min(len(ops), txnMaxOps)
		e.outMu.Lock()
		// Skip what a later change replaced or tryWrite wrote meanwhile.
		e.mu.Lock()
		live := make([]*outOp, 0, n)
		for _, op := range ops[:n] {
			if cur, ok := e.out[op.key]; ok && cur.seq == op.seq {
				live = append(live, op)
			}
		}
		e.mu.Unlock()
		err := e.writeOps(live)
		e.outMu.Unlock()
		if err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}
