package store

// ArenaFd returns the arena's read-write fd, for clients that create
// buffers. The store owns it; callers send it to clients but must not close
// it.
func (s *Store) ArenaFd() int { return s.arena.Fd() }

// ArenaReadOnlyFd returns the arena's read-only fd (shm.Arena.ReadOnlyFd),
// for clients that only read. The store owns it; callers send it to clients
// but must not close it.
func (s *Store) ArenaReadOnlyFd() int { return s.arena.ReadOnlyFd() }
