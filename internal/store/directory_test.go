package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
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

// When the directory has no room for an object, Config.DirectoryFull hears
// it once, with how many entries it holds; the object is still created
// and its gets take the round trip.
func TestDirectoryFullIsToldOnce(t *testing.T) {
	var calls, held int
	s, err := New(Config{Size: 1 << 20, DirectoryEntries: 64, DirectoryFull: func(entries int) {
		calls++
		held = entries
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ss := s.NewSession()
	defer ss.Close()
	var last ids.ObjectID
	for i := range 200 {
		c, err := ss.CreateData(json.RawMessage(fmt.Sprintf(`{"typename":"t","i":%d}`, i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		last = c.ID
	}
	if calls != 1 || held == 0 || held > 64 {
		t.Fatalf("DirectoryFull called %d times, with %d entries; want once, with 1 to 64", calls, held)
	}
	if _, _, err := s.GetData([]ids.ObjectID{last}); err != nil {
		t.Fatalf("an object past the full directory: %v", err)
	}
}
