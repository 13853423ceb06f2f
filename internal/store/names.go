package store

import (
	"errors"
	"regexp"
	"sort"
	"strings"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/status"
)

// PutName associates name with a persisted, non-blob object; an existing name
// moves. The name is also written as "__name" into the object. The name is
// kept by the metadata backend.
func (s *Store) PutName(name string, id ids.ObjectID) error {
	if name == "" {
		return status.Errorf(status.Invalid, "name must not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id.IsBlob() {
		if _, ok := s.lookupBlobLocked(id); !ok {
			return status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
		}
		return status.Errorf(status.Invalid, "blobs cannot have name")
	}
	o, ok := s.objects[id]
	if !ok {
		if _, remote := s.remote[id]; remote {
			return s.putRemoteNameLocked(name, id)
		}
		return status.Errorf(status.ObjectNotExists, "object %v does not exist", id)
	}
	if !o.persisted {
		return status.Errorf(status.Invalid, "transient objects cannot have name, please persist it first")
	}
	old, err := s.meta.GetName(name)
	if err != nil && !errors.Is(err, meta.ErrNameNotFound) {
		return backendError(err)
	}
	if err := s.meta.PutName(name, id); err != nil {
		return backendError(err)
	}
	if prev, ok := s.objects[old]; ok && prev != o {
		s.unnameLocked(prev, name)
	}
	s.listNameLocked(o, name)
	o.setField("__name", name)
	o.encodeFields()
	_ = s.persistTreesLocked(o) // "__name" changed: written or queued (meta.Backend.Update)
	s.emitIDLocked(EventTreeChanged, o.id, 0)
	s.emitLocked(Event{Kind: EventNamed, ID: id, Name: name})
	return nil
}

// putRemoteNameLocked names the persisted object of another instance; its
// tree (and "__name") stays as its owner wrote it.
func (s *Store) putRemoteNameLocked(name string, id ids.ObjectID) error {
	old, err := s.meta.GetName(name)
	if err != nil && !errors.Is(err, meta.ErrNameNotFound) {
		return backendError(err)
	}
	if err := s.meta.PutName(name, id); err != nil {
		return backendError(err)
	}
	if prev, ok := s.objects[old]; ok {
		s.unnameLocked(prev, name)
	}
	s.emitLocked(Event{Kind: EventNamed, ID: id, Name: name})
	return nil
}

// unnameLocked takes name off local object o after the backend moved or
// dropped it: o's "__name" follows, and its persisted tree.
func (s *Store) unnameLocked(o *object, name string) {
	s.unlistNameLocked(o, name)
	o.refreshName()
	_ = s.persistTreesLocked(o) // "__name" changed: written or queued (meta.Backend.Update)
	s.emitIDLocked(EventTreeChanged, o.id, 0)
	s.emitLocked(Event{Kind: EventUnnamed, ID: o.id, Name: name})
}

// refreshName rewrites "__name" after a name left the object.
func (o *object) refreshName() {
	if len(o.names) == 0 {
		o.fields.del("__name")
	} else {
		for n := range o.names {
			o.setField("__name", n)
			break
		}
	}
	o.encodeFields()
}

// GetName resolves a name. It asks the backend without holding the store
// lock (names live in the backend; an etcd backend reads etcd).
func (s *Store) GetName(name string) (ids.ObjectID, error) {
	id, err := s.meta.GetName(name)
	if errors.Is(err, meta.ErrNameNotFound) {
		return 0, status.Errorf(status.ObjectNotExists, "failed to find name: %s", name)
	}
	if err != nil {
		return 0, backendError(err)
	}
	return id, nil
}

// DropName removes a name; an unknown name is not an error. Names are
// cluster-wide: when the backend cannot drop it (etcd away), DropName fails
// with EtcdError and nothing changes.
func (s *Store) DropName(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := s.meta.GetName(name)
	if errors.Is(err, meta.ErrNameNotFound) {
		return nil
	}
	if err != nil {
		return backendError(err)
	}
	if err := s.meta.DropName(name); err != nil {
		return backendError(err)
	}
	if o, ok := s.objects[id]; ok {
		s.unnameLocked(o, name)
		return nil
	}
	s.emitLocked(Event{Kind: EventUnnamed, ID: id, Name: name})
	return nil
}

// ListNames returns the names matching pattern, at most limit (0: all),
// sorted by name.
func (s *Store) ListNames(pattern string, regex bool, limit uint64) (map[string]ids.ObjectID, error) {
	match, err := compileMatcher(pattern, regex)
	if err != nil {
		return nil, err
	}
	all, err := s.meta.ListNames() // the backend's own locks only, like GetName
	if err != nil {
		return nil, backendError(err)
	}
	keys := make([]string, 0, len(all))
	for n := range all {
		if match(n) {
			keys = append(keys, n)
		}
	}
	sort.Strings(keys)
	if limit > 0 && uint64(len(keys)) > limit {
		keys = keys[:limit]
	}
	out := make(map[string]ids.ObjectID, len(keys))
	for _, k := range keys {
		out[k] = all[k]
	}
	return out, nil
}

// compileMatcher returns a full-match predicate for a glob or a regex.
func compileMatcher(pattern string, regex bool) (func(string) bool, error) {
	expr := pattern
	if !regex {
		expr = globToRegexp(pattern)
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, status.Errorf(status.Invalid, "bad pattern %q: %v", pattern, err)
	}
	return re.MatchString, nil
}

// globToRegexp translates fnmatch-style *, ? and [...] to a regexp.
func globToRegexp(glob string) string {
	var b strings.Builder
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(glob[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := glob[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// listNameLocked records that local object o lists name (its "__name"
// follows from o.names), in o.names and in the index a name change from
// the cluster consults (applyNameLocked), so that it touches only the
// objects that list the name, not every object.
func (s *Store) listNameLocked(o *object, name string) {
	if o.names == nil {
		o.names = map[string]struct{}{}
	}
	o.names[name] = struct{}{}
	by := s.listedBy[name]
	if by == nil {
		by = map[ids.ObjectID]struct{}{}
		s.listedBy[name] = by
	}
	by[o.id] = struct{}{}
}

// unlistNameLocked undoes listNameLocked.
func (s *Store) unlistNameLocked(o *object, name string) {
	delete(o.names, name)
	if by := s.listedBy[name]; by != nil {
		delete(by, o.id)
		if len(by) == 0 {
			delete(s.listedBy, name)
		}
	}
}
