package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/tree"
)

// remoteTrees reads the persisted trees of other instances' objects.
type remoteTrees struct{ s *Store }

// cluster applies the changes other instances made, as the metadata
// backend reports them.
type cluster struct{ s *Store }

// remoteObject is the persisted tree of an object of another instance, as
// the metadata backend reported it: its own fields, members as links. Its
// blobs live on their own instance; this store serves the metadata only.
type remoteObject struct {
	tree     []byte
	typename string
}

// follow applies the backend's changes until the backend closes its
// channel. It runs in its own goroutine for the store's life.
func (part *cluster) follow(changes <-chan meta.Change) {
	s := part.s
	for c := range changes {
		s.mu.Lock()
		if !s.closed {
			s.cl.applyChangeLocked(c)
		}
		s.mu.Unlock()
	}
}

// applyChangeLocked applies one change made by another instance.
func (part *cluster) applyChangeLocked(c meta.Change) {
	s := part.s
	switch c.Kind {
	case meta.Persisted:
		if _, local := s.objects[c.ID]; local {
			break
		}
		var head struct {
			Typename string `json:"typename"`
		}
		if jsonscan.ObjectFields(c.Tree, func(key string, raw []byte) error {
			if key == "typename" {
				return json.Unmarshal(raw, &head.Typename)
			}
			return nil
		}) != nil || head.Typename == "" {
			break // not a tree: ignore it rather than serve garbage
		}
		s.remote[c.ID] = &remoteObject{tree: c.Tree, typename: head.Typename}
		// Also for a new tree (the epoch moves): a remote tree cached
		// before its member arrived (a full read goes by key, not members
		// first) showed only the member's link.
		s.emitIDLocked(EventTreeChanged, c.ID, FlagRemote)
	case meta.Deleted:
		if _, ok := s.remote[c.ID]; ok {
			delete(s.remote, c.ID)
			s.emitIDLocked(EventDeleted, c.ID, FlagRemote)
		} else if o, ok := s.objects[c.ID]; ok && o.persisted {
			// This instance's object, deleted through another instance
			// (upstream's cluster-wide delete): deleted here as a delete
			// here would (deep), which frees its blobs and tells the
			// cluster about its persisted members.
			s.deleteLocked([]ids.ObjectID{c.ID}, DeleteOptions{Deep: true})
		}
	case meta.NamePut, meta.NameDropped:
		s.cl.applyNameLocked(c)
	}
	if c.Revision > s.metaRev {
		s.metaRev = c.Revision
		s.waiters.broadcast() // Sync
	}
}

// deleteRemoteLocked deletes, of idl, the persisted objects of other
// instances, as upstream's delete of them through this instance does: they
// go from here at once, and the backend tells their owners (meta.Backend's
// Delete of an id another instance made), which delete them with their
// members and blobs (applyChangeLocked). Returns how many it deleted.
func (part *cluster) deleteRemoteLocked(idl []ids.ObjectID) int {
	s := part.s
	var gone []ids.ObjectID
	for _, id := range idl {
		if _, ok := s.remote[id]; !ok {
			continue
		}
		if _, local := s.objects[id]; local {
			continue
		}
		delete(s.remote, id)
		s.emitIDLocked(EventDeleted, id, FlagRemote)
		gone = append(gone, id)
	}
	if len(gone) > 0 {
		_ = s.meta.Delete(gone) // queued while etcd does not answer, as a local delete's
	}
	return len(gone)
}

// applyNameLocked makes the "__name" of this daemon's objects follow a name
// set, moved or dropped in the cluster (by any daemon, this one included:
// the watch reports them in etcd's order, so the last one wins here as it
// does in etcd). It visits only the objects that list the name and the
// object it now names (Store.listedBy), never the whole table.
func (part *cluster) applyNameLocked(c meta.Change) {
	s := part.s
	touched := make([]ids.ObjectID, 0, len(s.listedBy[c.Name])+1)
	for id := range s.listedBy[c.Name] {
		touched = append(touched, id)
	}
	if _, listed := s.listedBy[c.Name][c.ID]; !listed {
		touched = append(touched, c.ID)
	}
	s.nameVisits += uint64(len(touched))
	for _, id := range touched {
		o, ok := s.objects[id]
		if !ok {
			continue
		}
		_, listed := o.names[c.Name]
		switch {
		case listed && (c.Kind == meta.NameDropped || id != c.ID):
			s.unlistNameLocked(o, c.Name)
		case !listed && c.Kind == meta.NamePut && id == c.ID && o.persisted:
			s.listNameLocked(o, c.Name)
		default:
			continue
		}
		o.refreshName()
		s.emitIDLocked(EventTreeChanged, o.id, 0)
	}
	if c.Kind == meta.NamePut {
		s.emitLocked(Event{Kind: EventNamed, ID: c.ID, Name: c.Name, Flags: FlagRemote})
	} else {
		s.emitLocked(Event{Kind: EventUnnamed, ID: c.ID, Name: c.Name, Flags: FlagRemote})
	}
}

// knownLocked reports whether id is a local object or blob, or the
// persisted object of another instance.
func (part *remoteTrees) knownLocked(id ids.ObjectID) bool {
	s := part.s
	if s.existsLocked(id) {
		return true
	}
	_, ok := s.remote[id]
	return ok
}

// appendRemoteTreeLocked appends the full tree of a remote object: its own
// fields, each member link replaced by the member's tree (local or remote;
// blob members are persisted whole, so they are copied as they are).
func (part *remoteTrees) appendRemoteTreeLocked(dst []byte, r *remoteObject, depth int) []byte {
	s := part.s
	dst = append(dst, '{')
	first := true
	_ = jsonscan.ObjectFields(r.tree, func(key string, raw []byte) error {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = tree.AppendString(dst, key)
		dst = append(dst, ':')
		if len(raw) == 0 || raw[0] != '{' {
			dst = append(dst, raw...)
			return nil
		}
		var link struct {
			ID       string `json:"id"`
			Typename string `json:"typename"`
		}
		if json.Unmarshal(raw, &link) != nil || link.Typename != "" || depth >= maxTreeDepth {
			dst = append(dst, raw...) // a whole tree (a blob): as it is
			return nil
		}
		mid, err := ids.Parse(link.ID)
		if err != nil {
			dst = append(dst, raw...)
			return nil
		}
		if m, ok := s.remote[mid]; ok {
			dst = s.rtext.appendRemoteTreeLocked(dst, m, depth+1)
		} else if s.existsLocked(mid) {
			dst = s.text.appendTreeLocked(dst, mid)
		} else {
			dst = append(dst, raw...) // not (yet) known here: the link
		}
		return nil
	})
	return append(dst, '}')
}

// syncer is a backend that can tell its latest revision (meta.Etcd).
type syncer interface {
	LatestRevision(ctx context.Context) (int64, error)
	RequestProgress(ctx context.Context)
}

// Sync waits until the store has applied every change the metadata backend
// had when Sync was called (get_meta with sync_remote), or ctx ends. With a
// backend that shares nothing (meta.Local) it returns at once.
func (s *Store) Sync(ctx context.Context) error {
	sy, ok := s.meta.(syncer)
	if !ok {
		return nil
	}
	rev, err := sy.LatestRevision(ctx)
	if err != nil {
		return backendError(err)
	}
	for {
		s.mu.Lock()
		done, changed := s.metaRev >= rev, s.waiters.channel()
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.Errorf(status.EtcdError, "sync with etcd: %v", ctx.Err())
		case <-time.After(100 * time.Millisecond):
			// The last revision may be a key no watch event reports
			// (outside the prefix): a progress report covers it.
			sy.RequestProgress(ctx)
		}
	}
}

// backendError reports a failure of the metadata backend to a client.
func backendError(err error) error {
	switch {
	case errors.Is(err, meta.ErrNameTaken):
		return status.Errorf(status.ObjectExists, "%v", err)
	case errors.Is(err, meta.ErrEtcd):
		return status.Errorf(status.EtcdError, "%v", err)
	}
	return status.Errorf(status.IOError, "metadata backend: %v", err)
}
