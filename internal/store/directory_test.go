package store

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// The directory names one object per 4 KiB of arena (65,536 at least,
// 1,048,576 by default at most), or as many as the config asks.
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
		if got := s.dir.d.Entries(); got != c.want {
			t.Errorf("%+v: %d entries, want %d", c.cfg, got, c.want)
		}
		_ = s.Close()
	}
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
