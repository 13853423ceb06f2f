package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// spillStore opens a store of size bytes spilling into a new directory.
func spillStore(t *testing.T, size uint64, dir string) *Store {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "spill")
	}
	s, err := New(Config{Size: size, SpillPath: dir, SpillWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(func() { checkInvariants(t, s) })
	return s
}

// spillObj is an object put by putSpill: one blob of n bytes.
type spillObj struct {
	id, blob ids.ObjectID
	n        uint64
	sum      uint32
}

// putSpill puts an object of one blob of n bytes derived from seed, and
// releases it (so it may spill).
func putSpill(t *testing.T, ss *Session, n uint64, seed int) spillObj {
	t.Helper()
	ext, err := ss.CreateBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	data := ss.Bytes(ext)
	for i := range data {
		data[i] = byte(i*7 + seed*13 + i>>9)
	}
	id := create(t, ss, fmt.Sprintf(`{"typename":"t","b":{"id":"%v"}}`, ext.ID), ext.ID)
	if err := ss.Release(ext.ID); err != nil {
		t.Fatal(err)
	}
	return spillObj{id: id, blob: ext.ID, n: n, sum: crc32.ChecksumIEEE(data)}
}

// getSpill gets o by round trip, checks its bytes and releases it.
func getSpill(t *testing.T, ss *Session, o spillObj) error {
	t.Helper()
	_, exts, _, err := ss.GetDataWithBuffers([]ids.ObjectID{o.id})
	if err != nil {
		return err
	}
	defer func() { _ = ss.Release(o.blob) }()
	if len(exts) != 1 || exts[0].ID != o.blob {
		return fmt.Errorf("extents %v", exts)
	}
	if sum := crc32.ChecksumIEEE(ss.Bytes(exts[0])); sum != o.sum {
		return fmt.Errorf("object %v: checksum %08x, want %08x", o.id, sum, o.sum)
	}
	return nil
}

func stateOf(s *Store, id ids.ObjectID) blobState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.blobs[id]; ok {
		return b.state
	}
	return stateFreed
}

func spillFileOf(s *Store, id ids.ObjectID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.blobs[id]
	return s.spill.files.name(id, b.gen)
}

// Four times the arena put through it, everything read back intact: puts
// wait while the spiller makes room, gets load.
func TestSpillFourTimesTheArena(t *testing.T) {
	const size = 4 << 20
	s := spillStore(t, size, "")
	ss := s.NewSession()
	defer ss.Close()
	var objs []spillObj
	for i := range 64 {
		objs = append(objs, putSpill(t, ss, 256<<10, i))
	}
	checkInvariants(t, s)
	st := s.SpillStats()
	if st.Blobs == 0 || st.Spilled == 0 {
		t.Fatalf("nothing spilled: %+v", st)
	}
	for _, o := range objs {
		if err := getSpill(t, ss, o); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, s)
	if st := s.SpillStats(); st.Loaded == 0 {
		t.Fatalf("nothing loaded: %+v", st)
	}
}

// A blob a session holds is never spilled, however full the arena.
func TestSpillNeverTakesHeldBlobs(t *testing.T) {
	s := spillStore(t, 4<<20, "")
	ss, other := s.NewSession(), s.NewSession()
	defer ss.Close()
	defer other.Close()
	held := putSpill(t, ss, 1<<20, 99)
	if _, _, _, err := other.GetDataWithBuffers([]ids.ObjectID{held.id}); err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		putSpill(t, ss, 256<<10, i)
	}
	if st := stateOf(s, held.blob); st != stateSealed {
		t.Fatalf("held blob is %v", st)
	}
	if err := getSpill(t, other, held); err != nil {
		t.Fatal(err)
	}
	// Released, it may go.
	_ = other.Release(held.blob)
	if err := ss.Evict([]ids.ObjectID{held.id}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(s, held.blob); st != stateSpilled {
		t.Fatalf("released blob is %v after evict", st)
	}
}

// A blob a client pinned in its pin page (a directory get) is not spilled.
func TestSpillNeverTakesPinnedBlobs(t *testing.T) {
	s := spillStore(t, 4<<20, "")
	ss, reader := s.NewSession(), s.NewSession()
	defer ss.Close()
	defer reader.Close()
	pins, _ := pinView(t, reader)
	o := putSpill(t, ss, 64<<10, 1)
	slot, ok := pins.Set(uint64(o.id))
	if !ok {
		t.Fatal("no pin slot")
	}
	if err := ss.Evict([]ids.ObjectID{o.id}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(s, o.blob); st != stateSealed {
		t.Fatalf("pinned blob is %v after evict", st)
	}
	if !published(s, o.id) {
		t.Fatal("the pinned object is no longer published")
	}
	pins.Clear(slot)
	if err := ss.Evict([]ids.ObjectID{o.id}); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(s, o.blob); st != stateSpilled {
		t.Fatalf("unpinned blob is %v after evict", st)
	}
	if published(s, o.id) || published(s, o.blob) {
		t.Fatal("a spilled object is still published")
	}
	if err := getSpill(t, reader, o); err != nil {
		t.Fatal(err)
	}
	if !published(s, o.id) {
		t.Fatal("the loaded object is not published again")
	}
}

// Concurrent gets of one spilled object load it once, and all see its bytes.
func TestSpillConcurrentGetsLoadOnce(t *testing.T) {
	s := spillStore(t, 4<<20, "")
	ss := s.NewSession()
	defer ss.Close()
	o := putSpill(t, ss, 1<<20, 5)
	if err := ss.Evict([]ids.ObjectID{o.id}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := s.NewSession()
			defer g.Close()
			errs <- getSpill(t, g, o)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := s.SpillStats(); st.Loaded != 1 {
		t.Fatalf("loaded %d times", st.Loaded)
	}
}

// A spill file removed or changed: the get fails with IOError naming it,
// never wrong bytes, and nothing else is lost.
func TestSpillFileFaults(t *testing.T) {
	s := spillStore(t, 4<<20, "")
	ss := s.NewSession()
	defer ss.Close()
	for name, damage := range map[string]func(path string) error{
		"removed": os.Remove,
		"corrupt": func(path string) error {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte{0xff, 0x00, 0x55}, spillHeaderSize+1000)
			return err
		},
		"cut": func(path string) error { return os.Truncate(path, spillHeaderSize+10) },
	} {
		t.Run(name, func(t *testing.T) {
			o := putSpill(t, ss, 64<<10, 3)
			good := putSpill(t, ss, 64<<10, 4)
			if err := ss.Evict([]ids.ObjectID{o.id, good.id}); err != nil {
				t.Fatal(err)
			}
			if err := damage(spillFileOf(s, o.blob)); err != nil {
				t.Fatal(err)
			}
			err := getSpill(t, ss, o)
			if status.CodeOf(err) != status.IOError {
				t.Fatalf("get of a %s spill file: %v", name, err)
			}
			if err := getSpill(t, ss, o); status.CodeOf(err) != status.IOError { // and again
				t.Fatalf("second get of a %s spill file: %v", name, err)
			}
			if err := getSpill(t, ss, good); err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, s)
			s.Delete([]ids.ObjectID{o.id}, DeleteOptions{Deep: true})
			checkInvariants(t, s)
		})
	}
}

// Deleting a spilled object removes its file; a daemon's stale files are
// removed at start, other files left alone.
func TestSpillFilesRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "o8000000000000abc.7.spill")
	mine := filepath.Join(dir, "notes.txt")
	for _, p := range []string{stale, mine} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := spillStore(t, 4<<20, dir)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale spill file: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatalf("a file not ours: %v", err)
	}
	ss := s.NewSession()
	defer ss.Close()
	o := putSpill(t, ss, 64<<10, 3)
	if err := ss.Evict([]ids.ObjectID{o.id}); err != nil {
		t.Fatal(err)
	}
	path := spillFileOf(s, o.blob)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("spill file mode %v", fi.Mode())
	}
	s.Delete([]ids.ObjectID{o.id}, DeleteOptions{Deep: true})
	waitGone(t, path)
	if st := s.SpillStats(); st.Blobs != 0 || st.Bytes != 0 {
		t.Fatalf("after delete: %+v", st)
	}
}

// waitGone waits for the spiller to remove path (it does, outside the
// store's lock, after the delete).
func waitGone(t *testing.T, path string) {
	t.Helper()
	for range 2000 {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s was not removed", path)
}

// The spill directory is checked as the socket's is.
func TestSpillDirectoryChecked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Size: 1 << 20, SpillPath: dir}); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("world-writable spill directory: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Size: 1 << 20, SpillPath: file}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("spill path of a file: %v", err)
	}
	if _, err := New(Config{Size: 1 << 20, SpillPath: t.TempDir(), SpillLowerRate: 0.9, SpillUpperRate: 0.5}); err == nil {
		t.Fatal("lower rate above upper accepted")
	}
	fresh := filepath.Join(t.TempDir(), "a", "b")
	s, err := New(Config{Size: 1 << 20, SpillPath: fresh})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created spill directory: %v %v", fi, err)
	}
}

// When what is held fills the arena, a put fails at once with
// NotEnoughMemory naming the spill directory's state.
func TestSpillPutFailsWhenAllIsHeld(t *testing.T) {
	s := spillStore(t, 1<<20, "")
	ss := s.NewSession()
	defer ss.Close()
	if _, err := ss.CreateBuffer(900 << 10); err != nil {
		t.Fatal(err)
	}
	_, err := ss.CreateBuffer(512 << 10)
	if status.CodeOf(err) != status.NotEnoughMemory || !strings.Contains(err.Error(), "spill directory") {
		t.Fatalf("put over held memory: %v", err)
	}
}

// A full disk: spilling pauses, the put fails with the write's error, and
// nothing stored is lost.
func TestSpillDiskFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	s := spillStore(t, 2<<20, dir)
	ss := s.NewSession()
	defer ss.Close()
	var objs []spillObj
	for i := range 6 {
		objs = append(objs, putSpill(t, ss, 256<<10, i))
	}
	// Writes past a file size limit fail (EFBIG) as on a full disk
	// (ENOSPC); Go ignores SIGXFSZ.
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 64 << 10
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	_, err := ss.CreateBuffer(1 << 20)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if status.CodeOf(err) != status.NotEnoughMemory || !strings.Contains(err.Error(), "spilling is paused") {
		t.Fatalf("put with spilling failing: %v", err)
	}
	for _, o := range objs {
		if err := getSpill(t, ss, o); err != nil {
			t.Fatal(err)
		}
	}
}

// Several sessions put, get, evict and delete at once in a small arena:
// every get sees its bytes, and the bookkeeping holds.
func TestSpillStress(t *testing.T) {
	s := spillStore(t, 2<<20, "")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss := s.NewSession()
			defer ss.Close()
			var mine []spillObj
			for i := range 150 {
				switch {
				case i%7 == 3 && len(mine) > 0:
					o := mine[0]
					mine = mine[1:]
					s.Delete([]ids.ObjectID{o.id}, DeleteOptions{Deep: true})
				case i%5 == 2 && len(mine) > 0:
					if err := ss.Evict([]ids.ObjectID{mine[len(mine)/2].id}); err != nil {
						errs <- err
						return
					}
				case i%3 == 1 && len(mine) > 0:
					if err := getSpill(t, ss, mine[i%len(mine)]); err != nil {
						errs <- err
						return
					}
				default:
					mine = append(mine, putSpill(t, ss, uint64(16<<10+(i*w*7919)%(200<<10)), w*1000+i))
				}
			}
			for _, o := range mine {
				if err := getSpill(t, ss, o); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkInvariants(t, s)
}

// A put whose bytes are free but not in one piece (below the lower mark)
// still gets them: the spiller goes on until they are.
func TestSpillMakesRoomInOnePiece(t *testing.T) {
	s, err := New(Config{Size: 1 << 20, SpillPath: filepath.Join(t.TempDir(), "spill"), SpillLowerRate: 0.6, SpillUpperRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ss := s.NewSession()
	defer ss.Close()
	var objs []spillObj
	for i := range 10 {
		objs = append(objs, putSpill(t, ss, 96<<10, i))
	}
	for i := 0; i < len(objs); i += 2 {
		s.Delete([]ids.ObjectID{objs[i].id}, DeleteOptions{Deep: true})
	}
	if used, _ := s.Usage(); used > 600<<10 {
		t.Fatalf("used %d: above the lower mark", used)
	}
	if _, err := ss.CreateBuffer(200 << 10); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(objs); i += 2 {
		if err := getSpill(t, ss, objs[i]); err != nil {
			t.Fatal(err)
		}
	}
	checkInvariants(t, s)
}
