package store

// Counts are how many things the store holds, for metrics.
type Counts struct {
	Objects int // live non-blob objects of this instance
	Blobs   int // live blobs, sealed or not
	Zombies int // deleted blobs whose memory a reference still holds
	Remote  int // persisted objects of other instances known here
	// Directory is the directory's published entries: the objects and
	// blobs clients get without a round trip.
	Directory int
}

// Counts returns what the store holds now (under its lock: for a scrape,
// not the request path).
func (s *Store) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Counts{Objects: len(s.objects), Blobs: len(s.blobs), Zombies: len(s.zombies), Remote: len(s.remote)}
	if s.dir != nil {
		c.Directory = len(s.dir.entries)
	}
	return c
}
