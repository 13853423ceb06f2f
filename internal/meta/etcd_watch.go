package meta

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// retryDelay is how long the follower waits before retrying etcd.
const retryDelay = 200 * time.Millisecond

// follow delivers what other instances change, until Close: it loads every
// tree once (a range read), then watches the prefix from the revision after
// that read. When the watch breaks (etcd down, connection lost) it is
// started again from the revision after the last one delivered, so nothing
// is missed; only when etcd has compacted that revision away does it read
// everything again and report the difference.
func (e *Etcd) follow() {
	defer e.wg.Done()
	defer close(e.changes)
	var next int64 // 0: load everything first
	for e.ctx.Err() == nil {
		if next == 0 {
			rev, err := e.resync()
			if err != nil {
				e.pause()
				continue
			}
			next = rev + 1
		}
		next = e.watch(next)
		if e.ctx.Err() == nil {
			e.pause()
		}
	}
}

// pause waits retryDelay or until Close.
func (e *Etcd) pause() {
	select {
	case <-e.ctx.Done():
	case <-time.After(retryDelay):
	}
}

// send delivers a change unless Close comes first.
func (e *Etcd) send(c Change) bool {
	select {
	case e.changes <- c:
		return true
	case <-e.ctx.Done():
		return false
	}
}

// resyncPage is how many trees resync reads per request: a cluster with
// millions of objects is read in bounded replies, all at one revision. A
// variable for tests; each backend reads it once, at Open.
var resyncPage int64 = 1000

// resync reads every tree and name under the prefix (in pages, all at one
// revision) and reports the trees of other instances as Persisted, and the
// names not reported before or pointing elsewhere now as NamePut; then those
// reported before but gone now as Deleted and NameDropped, then a Progress
// at the read's revision. Names are read too: the watch starts after the
// read, so a name set before it (by an instance that started first, or
// while a compacted watch was away) is reported by nothing else. Only the
// names that changed are reported, as each costs the store a pass over its
// objects (store.applyNameLocked).
func (e *Etcd) resync() (int64, error) {
	var rev int64
	trees := make(map[ids.ObjectID]struct{})
	err := e.readAll(keyData, &rev, func(kv *mvccpb.KeyValue) bool {
		id, ok := e.parseDataKey(string(kv.Key))
		if !ok || e.own(id) {
			return true
		}
		trees[id] = struct{}{}
		e.mu.Lock()
		e.remote[id] = struct{}{}
		e.mu.Unlock()
		// Revision 0: the store must not count rev as applied before
		// the Progress that ends the read.
		return e.send(Change{Kind: Persisted, ID: id, Tree: kv.Value})
	})
	if err != nil {
		return 0, err
	}
	names := make(map[string]struct{})
	err = e.readAll(keyNames, &rev, func(kv *mvccpb.KeyValue) bool {
		name := strings.TrimPrefix(string(kv.Key), e.root+keyNames)
		id, err := ids.Parse(string(kv.Value))
		if err != nil {
			return true
		}
		names[name] = struct{}{}
		e.mu.Lock()
		was, known := e.names[name]
		e.names[name] = id
		e.mu.Unlock()
		if known && was == id {
			return true
		}
		return e.send(Change{Kind: NamePut, Name: name, ID: id})
	})
	if err != nil {
		return 0, err
	}
	// Tombstones of this instance's objects deleted through another while
	// the watch was away.
	err = e.readAll(keyDeleted, &rev, func(kv *mvccpb.KeyValue) bool {
		return e.tombstone(strings.TrimPrefix(string(kv.Key), e.root+keyDeleted))
	})
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	var goneTrees []ids.ObjectID
	for id := range e.remote {
		if _, ok := trees[id]; !ok {
			goneTrees = append(goneTrees, id)
			delete(e.remote, id)
		}
	}
	var goneNames []string
	for name := range e.names {
		if _, ok := names[name]; !ok {
			goneNames = append(goneNames, name)
			delete(e.names, name)
		}
	}
	e.mu.Unlock()
	for _, id := range goneTrees {
		if !e.send(Change{Kind: Deleted, ID: id}) {
			return 0, e.ctx.Err()
		}
	}
	for _, name := range goneNames {
		if !e.send(Change{Kind: NameDropped, Name: name}) {
			return 0, e.ctx.Err()
		}
	}
	if !e.send(Change{Kind: Progress, Revision: rev}) {
		return 0, e.ctx.Err()
	}
	return rev, nil
}

// readAll calls fn with every key under e.root+sub, in pages of e.page keys,
// at revision *rev (0: the current one, which it then sets), until fn
// returns false (Close came first: it returns the context's error).
func (e *Etcd) readAll(sub string, rev *int64, fn func(kv *mvccpb.KeyValue) bool) error {
	prefix := e.root + sub
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(e.page)}
		if *rev != 0 {
			opts = append(opts, clientv3.WithRev(*rev))
		}
		ctx, cancel := e.opCtx(e.ctx)
		resp, err := e.cli.Get(ctx, from, opts...)
		cancel()
		if err != nil {
			return err
		}
		if *rev == 0 {
			*rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if !fn(kv) {
				return e.ctx.Err()
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// watch follows the prefix from revision next until the watch breaks, and
// returns the revision to resume from (0 when it was compacted away).
func (e *Etcd) watch(next int64) int64 {
	// The same outgoing metadata as RequestProgress's context, so a
	// progress request reaches this watch's stream.
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(e.ctx))
	defer cancel()
	wch := e.cli.Watch(ctx, e.root, clientv3.WithPrefix(), clientv3.WithRev(next), clientv3.WithProgressNotify())
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return 0
		}
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrFutureRev) {
				return 0 // etcd lost revisions we saw (restored from an older backup): read it all again
			}
			return next
		}
		for _, ev := range resp.Events {
			if !e.event(ev) {
				return next
			}
			next = ev.Kv.ModRevision + 1
		}
		if resp.IsProgressNotify() && resp.Header.Revision >= next {
			next = resp.Header.Revision + 1
		}
		if next > 1 && !e.send(Change{Kind: Progress, Revision: next - 1}) {
			return next
		}
	}
	return next
}

// event turns one watch event into a change for the store; false means
// Close came first. The change carries no revision: the other keys of its
// transaction share that revision and may not have been delivered yet (a
// persist writes a tree's members and root in one transaction, and a store
// that counted the revision applied at the first member would sync to it
// and miss the root). The Progress that follows each watch response, which
// holds whole revisions, reports it.
func (e *Etcd) event(ev *clientv3.Event) bool {
	key := string(ev.Kv.Key)
	put := ev.Type == mvccpb.PUT
	if name, ok := strings.CutPrefix(key, e.root+keyNames); ok {
		if !put {
			e.mu.Lock()
			delete(e.names, name)
			e.mu.Unlock()
			return e.send(Change{Kind: NameDropped, Name: name})
		}
		id, err := ids.Parse(string(ev.Kv.Value))
		if err != nil {
			return true
		}
		e.mu.Lock()
		e.names[name] = id
		e.mu.Unlock()
		return e.send(Change{Kind: NamePut, Name: name, ID: id})
	}
	if rest, ok := strings.CutPrefix(key, e.root+keyDeleted); ok {
		if !put {
			return true
		}
		return e.tombstone(rest)
	}
	id, ok := e.parseDataKey(key)
	if !ok || e.own(id) {
		return true
	}
	e.mu.Lock()
	_, known := e.remote[id]
	if put {
		e.remote[id] = struct{}{}
	} else {
		delete(e.remote, id)
	}
	e.mu.Unlock()
	if put {
		return e.send(Change{Kind: Persisted, ID: id, Tree: ev.Kv.Value})
	}
	if !known {
		return true
	}
	return e.send(Change{Kind: Deleted, ID: id})
}

// tombstone handles the tombstone of the object id (the text after the
// prefix; Delete): one of this instance's objects deleted through another
// is reported as Deleted, and its tombstone removed (queued, as a delete);
// the tombstones of other instances' objects are theirs. False means Close
// came first.
func (e *Etcd) tombstone(text string) bool {
	id, err := ids.Parse(text)
	if err != nil || id.IsBlob() || !e.own(id) {
		return true
	}
	key := e.tombstoneKey(id)
	e.mu.Lock()
	e.enqueueLocked(outOp{key: key, del: true})
	e.mu.Unlock()
	select {
	case e.outKick <- struct{}{}:
	default:
	}
	return e.send(Change{Kind: Deleted, ID: id})
}

func (e *Etcd) parseDataKey(key string) (ids.ObjectID, bool) {
	rest, ok := strings.CutPrefix(key, e.root+keyData)
	if !ok {
		return 0, false
	}
	id, err := ids.Parse(rest)
	return id, err == nil && !id.IsBlob()
}

// own reports whether id was made by this instance: ids carry the low 10
// bits of their instance id (internal/ids), which live instances never
// share (register).
func (e *Etcd) own(id ids.ObjectID) bool {
	return uint64(id)>>12&(MaxInstances-1) == e.instance%MaxInstances
}

// Changes returns the changes other instances make, in etcd's order, and a
// Progress after each batch. It is closed by Close.
func (e *Etcd) Changes() <-chan Change { return e.changes }
