package store

import (
	"runtime"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// listBatch is how many ids List visits per hold of the store lock.
const listBatch = 1024

// List returns {"o…": tree} of objects (and sealed blobs) whose typename
// matches, ordered by id, at most limit (0: all).
//
// It walks the ordered index of ids (idindex.go) from the smallest up and
// stops at the limit, so a list costs what it returns plus the ids whose
// typename does not match; it visits them in batches of listBatch and
// releases the store lock between batches, so other clients are served
// while a large store is listed (as Clear does). An object created or
// deleted while a list runs may or may not be in it; every tree in it is
// whole, as it was when its batch ran.
func (s *Store) List(pattern string, regex bool, limit uint64) ([]byte, error) {
	match, err := compileMatcher(pattern, regex)
	if err != nil {
		return nil, err
	}
	matchBlobs := match(BlobTypename)
	// Typenames repeat: each is matched once per list.
	matched := map[string]bool{}
	matches := func(typename string) bool {
		m, ok := matched[typename]
		if !ok {
			m = match(typename)
			if len(matched) < 4096 {
				matched[typename] = m
			}
		}
		return m
	}
	out := make([]byte, 0, 256)
	out = append(out, '{')
	var found uint64
	visit := func(id ids.ObjectID) bool {
		s.listSeen++
		if id.IsBlob() {
			if !matchBlobs {
				return false // the blobs come last: nothing more to match
			}
			if b, ok := s.blobs[id]; !ok || b.state == stateUnsealed {
				return true
			}
		} else if o, ok := s.objects[id]; ok {
			if !matches(o.typename) {
				return true
			}
		} else if r, ok := s.remote[id]; !ok || !matches(r.typename) {
			return true
		}
		if found > 0 {
			out = append(out, ',')
		}
		found++
		out = append(out, '"')
		out = id.AppendText(out)
		out = append(out, '"', ':')
		out = s.text.appendTreeLocked(out, id)
		if err = s.checkReplyLocked(uint64(len(out))); err != nil {
			return false
		}
		return limit == 0 || found < limit
	}
	from := ids.ObjectID(0)
	for {
		s.mu.Lock()
		next, end := s.idx.scan(from, listBatch, visit)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if end || next == from || (limit > 0 && found >= limit) || (!matchBlobs && next.IsBlob()) {
			break
		}
		from = next
		if s.listHook != nil {
			s.listHook()
		}
		runtime.Gosched()
	}
	return append(out, '}'), nil
}
