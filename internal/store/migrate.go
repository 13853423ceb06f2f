package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Migration support (docs/cluster-data-plane.md, "Migration"): the daemon
// copies the blobs of a remote persisted object into its own arena over the
// peer service, then stores a local copy of the tree that links the copies.

// RemoteBlob is a blob of a remote object's tree: its id and size on the
// instance that owns it.
type RemoteBlob struct {
	ID       ids.ObjectID
	Instance uint64
	Size     uint64
}

// MigrationSource returns the full tree of id and the blobs in it that are
// not local, in tree order without repeats. local is true when id is an
// object (or blob) of this store, which then needs no migration.
func (s *Store) MigrationSource(id ids.ObjectID) (tree []byte, blobs []RemoteBlob, local bool, err error) {
	s.mu.Lock()
	if s.existsLocked(id) {
		s.mu.Unlock()
		return nil, nil, true, nil
	}
	r, ok := s.remote[id]
	if !ok {
		s.mu.Unlock()
		return nil, nil, false, status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
	}
	tree = s.rtext.appendRemoteTreeLocked(nil, r, 0)
	s.mu.Unlock()
	seen := map[ids.ObjectID]bool{}
	if err := s.collectRemoteBlobs(tree, seen, &blobs, 0); err != nil {
		return nil, nil, false, err
	}
	return tree, blobs, false, nil
}

// treeNode is the part of a tree node migration reads.
type treeNode struct {
	ID         string `json:"id"`
	Typename   string `json:"typename"`
	Length     uint64 `json:"length"`
	InstanceID uint64 `json:"instance_id"`
}

func (s *Store) collectRemoteBlobs(tree []byte, seen map[ids.ObjectID]bool, out *[]RemoteBlob, depth int) error {
	if depth > maxTreeDepth {
		return status.Errorf(status.MetaTreeInvalid, "tree nests deeper than %d", maxTreeDepth)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(tree, &fields); err != nil {
		return status.Errorf(status.MetaTreeInvalid, "remote tree: %v", err)
	}
	var n treeNode
	_ = json.Unmarshal(tree, &n)
	if n.Typename == BlobTypename {
		id, err := ids.Parse(n.ID)
		if err != nil {
			return status.Errorf(status.MetaTreeInvalid, "remote blob id %q: %v", n.ID, err)
		}
		if !seen[id] && !s.isLocal(id) {
			seen[id] = true
			*out = append(*out, RemoteBlob{ID: id, Instance: n.InstanceID, Size: n.Length})
		}
		return nil
	}
	if n.Typename == "" {
		return status.Errorf(status.ObjectNotExists, "member %s of the tree is not known here", n.ID)
	}
	for _, raw := range fields {
		if len(raw) > 0 && raw[0] == '{' {
			if err := s.collectRemoteBlobs(raw, seen, out, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// CopyTree rewrites a remote tree for CreateData: every remote non-blob node
// loses its id, instance_id and transient fields (it becomes a new object,
// same signature), every blob becomes a link to its copy in copies, and local
// objects stay links.
func (s *Store) CopyTree(tree []byte, copies map[ids.ObjectID]ids.ObjectID) (json.RawMessage, error) {
	return s.copyTree(tree, copies, 0)
}

func (s *Store) copyTree(tree []byte, copies map[ids.ObjectID]ids.ObjectID, depth int) (json.RawMessage, error) {
	if depth > maxTreeDepth {
		return nil, status.Errorf(status.MetaTreeInvalid, "tree nests deeper than %d", maxTreeDepth)
	}
	var n treeNode
	if err := json.Unmarshal(tree, &n); err != nil {
		return nil, status.Errorf(status.MetaTreeInvalid, "remote tree: %v", err)
	}
	id, err := ids.Parse(n.ID)
	if err != nil {
		return nil, status.Errorf(status.MetaTreeInvalid, "tree id %q: %v", n.ID, err)
	}
	if n.Typename == BlobTypename {
		if c, ok := copies[id]; ok {
			id = c
		}
		return json.RawMessage(fmt.Sprintf(`{"id":%q}`, id.String())), nil
	}
	if s.isLocal(id) {
		return json.RawMessage(fmt.Sprintf(`{"id":%q}`, id.String())), nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(tree, &fields); err != nil {
		return nil, status.Errorf(status.MetaTreeInvalid, "remote tree: %v", err)
	}
	delete(fields, "id")
	delete(fields, "instance_id")
	delete(fields, "transient")
	for k, raw := range fields {
		if len(raw) > 0 && raw[0] == '{' {
			if fields[k], err = s.copyTree(raw, copies, depth+1); err != nil {
				return nil, err
			}
		}
	}
	return json.Marshal(fields)
}

// instanceLister is a backend that publishes its instances (meta.Etcd).
type instanceLister interface {
	Instances(ctx context.Context) (map[uint64]meta.InstanceInfo, error)
}

// PeerEndpoint returns the peer endpoint instance published in the metadata
// backend; an error when the backend has no instance list, the instance is
// gone or published none.
func (s *Store) PeerEndpoint(ctx context.Context, instance uint64) (string, error) {
	l, ok := s.meta.(instanceLister)
	if !ok {
		return "", status.Errorf(status.Invalid, "migrate: the metadata backend lists no instances")
	}
	insts, err := l.Instances(ctx)
	if err != nil {
		return "", backendError(err)
	}
	info, ok := insts[instance]
	if !ok {
		return "", status.Errorf(status.ObjectNotExists, "migrate: instance %d is not alive", instance)
	}
	if info.PeerEndpoint == "" {
		return "", status.Errorf(status.Invalid, "migrate: instance %d publishes no peer endpoint", instance)
	}
	return info.PeerEndpoint, nil
}

// isLocal reports whether id is an object or blob of this store (not a
// remote object's).
func (s *Store) isLocal(id ids.ObjectID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.existsLocked(id)
}
