package store

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/shm"
)

// The directory names one object per 4 KiB of arena (65,536 at least,
// 1,048,576 by default at most), or as many as the config asks; clients
// read the count from its header.
func TestDirectoryEntriesFollowTheArena(t *testing.T) {
	for size, want := range map[uint64]uint64{1 << 20: 1 << 16, 256 << 20: 1 << 16, 1 << 30: 1 << 18,
		3 << 30: 3 << 18, 64 << 30: 1 << 20} {
		if got := DirectoryEntriesFor(size); got != want {
			t.Errorf("DirectoryEntriesFor(%d) = %d, want %d", size, got, want)
		}
	}
	for _, c := range []struct {
		cfg  Config
		want uint64
	}{
		{Config{Size: 1 << 30}, 1 << 18},
		{Config{Size: 1 << 20, DirectoryEntries: 3000}, 4096}, // a power of two
	} {
		s, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := directoryEntries(t, s); got != c.want {
			t.Errorf("%+v: %d entries, want %d", c.cfg, got, c.want)
		}
		_ = s.Close()
	}
}

// directoryEntries maps the store's directory as a client does and returns
// its entry count.
func directoryEntries(t *testing.T, s *Store) uint64 {
	t.Helper()
	fd := s.DirectoryFd()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(b) }()
	if _, err := shm.NewDirectoryView(b); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[8:16]) // header word 1
}
