package store

import (
	"slices"
	"sort"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// idIndex keeps the ids of every object, blob (sealed or not) and remote
// object in order, so that a list visits them from the smallest up and stops
// after its limit (List): a list costs what it returns, not the size of the
// store. It follows the store's events (apply): an id joins when created
// (or a remote tree appears) and leaves when deleted. The maps stay the
// truth: a reader checks each id it visits against them, so the index may
// hold an id a moment longer, never miss one (CheckInvariants checks).
//
// Layout: sorted chunks of at most 2*idChunk ids, chunk i's all below chunk
// i+1's, with the last id of each in lasts (one array, so the binary search
// of an insert touches no chunk but its own). New ids mostly come in order
// (they carry the time), so an insert is usually an append to the last
// chunk; any other costs a search and a move of at most one chunk.
type idIndex struct {
	chunks [][]ids.ObjectID
	lasts  []ids.ObjectID
	n      int
}

const idChunk = 256

// apply follows one event of the store (events.go). s.mu is held.
func (x *idIndex) apply(s *Store, e Event) {
	switch e.Kind {
	case EventCreated:
		x.insert(e.ID)
	case EventTreeChanged:
		if e.Flags&FlagRemote != 0 {
			if _, ok := s.remote[e.ID]; ok {
				x.insert(e.ID)
			}
		}
	case EventDeleted:
		x.remove(e.ID)
	}
}

// chunkOf returns the first chunk whose last id is >= id (len(chunks) when
// id is above them all).
func (x *idIndex) chunkOf(id ids.ObjectID) int {
	if n := len(x.lasts); n == 0 || id > x.lasts[n-1] {
		return n
	}
	return sort.Search(len(x.lasts), func(i int) bool { return x.lasts[i] >= id })
}

// insert adds id; an id already in is left.
func (x *idIndex) insert(id ids.ObjectID) {
	ci := x.chunkOf(id)
	if ci == len(x.chunks) {
		if ci == 0 || len(x.chunks[ci-1]) >= 2*idChunk {
			x.chunks = append(x.chunks, make([]ids.ObjectID, 0, 2*idChunk))
			x.lasts = append(x.lasts, id)
			ci++
		}
		ci--
		x.chunks[ci] = append(x.chunks[ci], id)
		x.lasts[ci] = id
		x.n++
		return
	}
	c := x.chunks[ci]
	j, found := slices.BinarySearch(c, id)
	if found {
		return
	}
	c = slices.Insert(c, j, id)
	x.n++
	if len(c) <= 2*idChunk {
		x.chunks[ci] = c
		return
	}
	right := append(make([]ids.ObjectID, 0, 2*idChunk), c[idChunk:]...)
	x.chunks[ci] = c[:idChunk]
	x.lasts[ci] = c[idChunk-1]
	x.chunks = slices.Insert(x.chunks, ci+1, right)
	x.lasts = slices.Insert(x.lasts, ci+1, right[len(right)-1])
}

// remove takes id out; an id not in is ignored. A chunk that empties goes,
// one that shrinks below a quarter merges into its successor when they fit
// one chunk.
func (x *idIndex) remove(id ids.ObjectID) {
	ci := x.chunkOf(id)
	if ci == len(x.chunks) {
		return
	}
	c := x.chunks[ci]
	j, found := slices.BinarySearch(c, id)
	if !found {
		return
	}
	c = slices.Delete(c, j, j+1)
	x.n--
	switch {
	case len(c) == 0:
		x.chunks = slices.Delete(x.chunks, ci, ci+1)
		x.lasts = slices.Delete(x.lasts, ci, ci+1)
		return
	case len(c) < idChunk/4 && ci+1 < len(x.chunks) && len(c)+len(x.chunks[ci+1]) <= idChunk:
		next := x.chunks[ci+1]
		x.chunks[ci+1] = append(c, next...)
		x.chunks = slices.Delete(x.chunks, ci, ci+1)
		x.lasts = slices.Delete(x.lasts, ci, ci+1)
		return
	}
	x.chunks[ci] = c
	x.lasts[ci] = c[len(c)-1]
}

// scan calls fn with the ids from `from` up, in order, at most `most` of
// them or until fn returns false, and returns the id to resume from and
// whether the index was exhausted.
func (x *idIndex) scan(from ids.ObjectID, most int, fn func(ids.ObjectID) bool) (next ids.ObjectID, end bool) {
	ci := x.chunkOf(from)
	if ci == len(x.chunks) {
		return from, true
	}
	c := x.chunks[ci]
	j, _ := slices.BinarySearch(c, from)
	for visited := 0; ; visited++ {
		if j == len(c) {
			if ci++; ci == len(x.chunks) {
				return from, true
			}
			c, j = x.chunks[ci], 0
		}
		if visited == most {
			return c[j], false
		}
		id := c[j]
		j++
		if id == ids.Invalid {
			return id, true
		}
		from = id + 1
		if !fn(id) {
			return from, false
		}
	}
}

// checkIDIndexLocked reports an object, blob or remote object the index
// lacks, and a count that is not its size.
func (part *checker) checkIDIndexLocked(fail func(string, ...any)) {
	s := part.s
	x := &s.idx
	n := 0
	for i, c := range x.chunks {
		n += len(c)
		if len(c) == 0 || !slices.IsSorted(c) || x.lasts[i] != c[len(c)-1] || (i > 0 && c[0] <= x.lasts[i-1]) {
			fail("id index: chunk %d is empty, unsorted or out of order", i)
		}
	}
	if n != x.n {
		fail("id index: counts %d ids, holds %d", x.n, n)
	}
	has := func(id ids.ObjectID) bool {
		ci := x.chunkOf(id)
		if ci == len(x.chunks) {
			return false
		}
		_, ok := slices.BinarySearch(x.chunks[ci], id)
		return ok
	}
	for id := range s.objects {
		if !has(id) {
			fail("id index: object %v missing", id)
		}
	}
	for id := range s.blobs {
		if id != ids.EmptyBlob && !has(id) {
			fail("id index: blob %v missing", id)
		}
	}
	for id := range s.remote {
		if !has(id) {
			fail("id index: remote object %v missing", id)
		}
	}
}
