package client

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// mapped reports whether each page of b is mapped in this process
// (/proc/self/pagemap's present bit, readable without privileges).
func mapped(t *testing.T, b []byte) []bool {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	defer f.Close()
	pages := len(b) / 4096
	buf := make([]byte, 8*pages)
	if _, err := f.ReadAt(buf, int64(uintptr(unsafe.Pointer(&b[0]))/4096*8)); err != nil {
		t.Fatal(err)
	}
	out := make([]bool, pages)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(buf[8*i:])&(1<<63) != 0
	}
	return out
}

// requireMapped fails the test unless the pages of b are mapped, all but at
// most one in 64 (b starts at arena offset at, for the message). A read
// fault maps the resident pages around it, but fault-around only tries each
// page's lock and skips one held at that instant (by the daemon's pre-fault,
// say, or this guest's DAMON, which scans physical pages), so a page may
// stay unmapped until it is touched; a fresh-clone make test saw one such
// page once.
func requireMapped(t *testing.T, b []byte, at uint64, what string) {
	t.Helper()
	var missing []uint64
	pages := mapped(t, b)
	for i, m := range pages {
		if !m {
			missing = append(missing, at+uint64(i)*4096)
		}
	}
	if len(missing) > len(pages)/64 {
		t.Fatalf("%d of %d pages %s are not mapped, the first at %d", len(missing), len(pages), what, missing[0])
	}
}

// prefaulting starts a daemon with an arena of size bytes that keeps ahead
// bytes pre-faulted, connects a client, maps the arena with a first 4 KiB
// create (its pre-touch may end before the daemon's pre-fault got far: it
// waits only so long), and waits until the daemon published ahead bytes
// pre-faulted. It returns the server, the client, its arena, that blob
// (still unsealed) and the published pre-faulted end.
func prefaulting(t *testing.T, size, ahead uint64) (*server.Server, *Client, *arena, ids.ObjectID, uint64) {
	t.Helper()
	srv, err := server.Start(server.Config{Socket: filepath.Join(t.TempDir(), "s.sock"), Size: size, PrefaultAhead: int64(ahead)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c := connect(t, srv)
	first, _, err := c.CreateBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	a := c.w.regions[firstRegion(c)]
	return srv, c, a, first, waitPrefaulted(t, a, ahead)
}

func TestPretouchMapsPrefaultedPages(t *testing.T) {
	const ahead = 8 << 20
	// p0 is published before the large create: there for the pre-touch from its start.
	_, c, a, first, p0 := prefaulting(t, 32<<20, ahead)
	if err := c.Abort(first); err != nil {
		t.Fatal(err)
	}

	id, data, err := c.CreateBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	pre := waitPretouchEnd(t, a)
	if pre < p0 {
		t.Fatalf("the pre-touch stopped at %d, below the pre-faulted end %d", pre, p0)
	}
	arenas.mu.Lock()
	end := a.created
	arenas.mu.Unlock()
	if pre <= end {
		t.Fatalf("nothing pre-touched: created up to %d, touched up to %d", end, pre)
	}
	arenas.mu.Lock()
	rw := a.rwB
	arenas.mu.Unlock()
	from := (end + 4095) &^ 4095
	requireMapped(t, rw[from:pre&^4095], from, fmt.Sprintf("below the pre-touched end %d", pre))
	// The pages above stay unmapped: the pre-touch never maps (nor
	// allocates) what the daemon did not pre-fault.
	if hi := (pre + 4095) &^ 4095; hi+4096 <= uint64(len(rw)) {
		for i, m := range mapped(t, rw[hi:min(hi+(1<<20), uint64(len(rw)))]) {
			if m {
				t.Fatalf("page at %d, above the pre-faulted end, is mapped", hi+uint64(i)*4096)
			}
		}
	}
	if err := c.Abort(id); err != nil {
		t.Fatal(err)
	}
	_ = data
}

// TestPretouchSkipsMemoryBelowTheMark: what a process maps ahead is the
// pre-faulted, never-used memory above the daemon's high-water mark, not the
// memory other processes' blobs hold below it (a process whose own blobs lie
// low would otherwise map everything up to the mark).
func TestPretouchSkipsMemoryBelowTheMark(t *testing.T) {
	needAccel(t, AccelLease) // a blob below the mark: in the lease
	const ahead = 8 << 20
	srv, c, a, small, _ := prefaulting(t, 64<<20, ahead)
	// A blob another client sealed (for this test, another process's: its
	// pages are pre-faulted and never written here): the seal raises the
	// daemon's high-water mark past it.
	c2 := connect(t, srv)
	other, otherData, err := c2.CreateBuffer(6 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Seal(other); err != nil {
		t.Fatal(err)
	}
	mark := uint64(uintptr(unsafe.Pointer(&otherData[0]))-uintptr(unsafe.Pointer(&a.rwB[0]))) + uint64(len(otherData))
	var hwm uint64
	for deadline := time.Now().Add(30 * time.Second); hwm < mark; time.Sleep(time.Millisecond) {
		arenas.mu.Lock()
		hwm = a.headerWordLocked(shm.HeaderHighWaterOffset)
		arenas.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("the daemon published a high-water mark of %d, below %d", hwm, mark)
		}
	}
	// Forget that this process created blobs up there.
	waitPretouchEnd(t, a)
	arenas.mu.Lock()
	a.created, a.touched = 0, 0
	rw := a.rwB
	arenas.mu.Unlock()
	if err := c.Abort(small); err != nil {
		t.Fatal(err)
	}
	// Unmap (not free) what the earlier pre-touches mapped below the mark.
	if err := unix.Madvise(rw[4096:hwm&^4095], unix.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	low, data, err := c.CreateBuffer(64 << 10) // in this client's lease, below the mark
	if err != nil {
		t.Fatal(err)
	}
	lowEnd := uint64(uintptr(unsafe.Pointer(&data[0]))-uintptr(unsafe.Pointer(&rw[0]))) + uint64(len(data))
	if lowEnd >= hwm {
		t.Fatalf("the new blob ends at %d, not below the mark %d", lowEnd, hwm)
	}
	touched := waitPretouchEnd(t, a)
	above := (hwm + 2*faultAround) &^ 4095
	if touched < above+faultAround {
		t.Fatalf("the pre-touch mapped up to %d, not above the mark %d", touched, hwm)
	}
	requireMapped(t, rw[above:touched&^4095], above, fmt.Sprintf("above the mark and below the pre-touched end %d", touched))
	// Below the fault-around window the mark lies in (a read maps the
	// resident pages of its whole window) and above the new blob's windows.
	from := (lowEnd + 2*faultAround) &^ 4095
	to := hwm &^ (faultAround - 1)
	if to <= from {
		t.Fatalf("no memory between the blob (%d) and the mark (%d)", lowEnd, hwm)
	}
	for i, m := range mapped(t, rw[from:to]) {
		if m {
			t.Fatalf("page at %d, below the high-water mark %d and in another's blob, was pre-touched", from+uint64(i)*4096, hwm)
		}
	}
	if err := c.Abort(low); err != nil {
		t.Fatal(err)
	}
	if err := c2.Release(other); err != nil {
		t.Fatal(err)
	}
}

// TestPretouchMapsAtMostPretouchMost: however large the daemon's reserve,
// a process maps at most pretouchMost past the mark or its blobs.
func TestPretouchMapsAtMostPretouchMost(t *testing.T) {
	defer func(most uint64) { pretouchMost = most }(pretouchMost)
	pretouchMost = 2 << 20
	const ahead = 8 << 20
	_, c, a, first, _ := prefaulting(t, 32<<20, ahead)
	waitPretouchEnd(t, a)
	arenas.mu.Lock()
	a.touched = 0 // as if nothing were mapped yet
	arenas.mu.Unlock()
	id, _, err := c.CreateBuffer(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	touched := waitPretouchEnd(t, a)
	arenas.mu.Lock()
	base := a.pretouchBaseLocked()
	arenas.mu.Unlock()
	if touched > base+pretouchMost || touched < base+pretouchMost/2 {
		t.Fatalf("mapped up to %d from %d: want up to %d (the reserve ends at %d)", touched, base, base+pretouchMost, ahead)
	}
	for _, b := range []ids.ObjectID{first, id} {
		if err := c.Abort(b); err != nil {
			t.Fatal(err)
		}
	}
}

// waitPretouchEnd waits until a's pre-touch is not running and returns how
// far it mapped.
func waitPretouchEnd(t *testing.T, a *arena) uint64 {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		arenas.mu.Lock()
		touching, touched := a.touching, a.touched
		arenas.mu.Unlock()
		if !touching {
			return touched
		}
		if time.Now().After(deadline) {
			t.Fatal("the pre-touch does not end")
		}
	}
}

// waitPrefaulted waits until the daemon published a pre-faulted end of at
// least want in a's header, and returns it.
func waitPrefaulted(t *testing.T, a *arena, want uint64) uint64 {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		arenas.mu.Lock()
		p := a.prefaultedLocked()
		arenas.mu.Unlock()
		if p >= want {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon pre-faulted up to %d", p)
		}
	}
}

// firstRegion returns the key of one region the client mapped.
func firstRegion(c *Client) int {
	for k := range c.w.regions {
		return k
	}
	return -1
}

// TestPrefaultKeepsDataIntact runs puts, cross-client reads with checksums,
// deletes (some trimming) and MemoryTrim while the daemon pre-faults and the
// clients pre-touch: neither may change a byte anyone wrote.
func TestPrefaultKeepsDataIntact(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Start(server.Config{Socket: filepath.Join(dir, "s.sock"), Size: 48 << 20, PrefaultAhead: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const workers, rounds = 3, 40
	errs := make(chan error, workers)
	for w := range workers {
		wc, rc := connect(t, srv), connect(t, srv)
		go func() {
			errs <- func() error {
				for r := range rounds {
					size := uint64(64<<10) << (r % 6) // 64 KiB … 2 MiB
					id, buf, err := wc.CreateBuffer(size)
					if err != nil {
						return err
					}
					seed := byte(w*31 + r)
					for i := range buf {
						buf[i] = seed + byte(i>>12)
					}
					tree := fmt.Sprintf(`{"typename":"vineyard::Tensor<uint8>","shape_":"[%d]","buffer_":{"id":"%v"}}`, size, id)
					oid, _, err := wc.CreateMetadata([]byte(tree), []ids.ObjectID{id})
					if err != nil {
						return err
					}
					if err := wc.Release(id); err != nil {
						return err
					}
					got, err := rc.GetBuffers([]ids.ObjectID{id}, false)
					if err != nil {
						return err
					}
					for i, b := range got[0] {
						if b != seed+byte(i>>12) {
							return fmt.Errorf("worker %d round %d: byte %d is %d, want %d", w, r, i, b, seed+byte(i>>12))
						}
					}
					if err := rc.Release(id); err != nil {
						return err
					}
					if _, err := wc.Delete([]ids.ObjectID{oid}, true, true, r%3 == 0); err != nil {
						return err
					}
					if r%10 == 9 {
						if _, err := wc.MemoryTrim(); err != nil {
							return err
						}
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestPretouchMapsABlobBeforeItsCopy(t *testing.T) {
	const ahead = 16 << 20
	_, c, a, first, _ := prefaulting(t, 64<<20, ahead)
	if err := c.Abort(first); err != nil {
		t.Fatal(err)
	}
	id, data, err := c.CreateBuffer(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	waitPretouchEnd(t, a)
	// The background pre-touch mapped the blob's pages; unmap them here
	// (MADV_DONTNEED on a shared mapping keeps the pages resident).
	body := data[4096:]
	if err := unix.Madvise(body, unix.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	for i, m := range mapped(t, body) {
		if m {
			t.Fatalf("page %d of the new blob is mapped before Pretouch", i)
		}
	}
	if err := Pretouch(uintptr(unsafe.Pointer(&body[0])), uint64(len(body))); err != nil {
		t.Fatal(err)
	}
	requireMapped(t, body, 0, "of the blob after Pretouch (fault-around off?)")
	for i := range data {
		data[i] = byte(i >> 12)
	}
	if err := c.Seal(id); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBuffers([]ids.ObjectID{id}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range got[0] {
		if b != byte(i>>12) {
			t.Fatalf("byte %d is %d after the copy", i, b)
		}
	}

	// Ranges that are not a writable arena mapping of this process fail and
	// read nothing; an empty range is fine.
	heap := make([]byte, 1<<20)
	arenas.mu.Lock()
	rw := a.rwB
	arenas.mu.Unlock()
	for name, r := range map[string][]byte{"heap": heap, "past the end": rw[len(rw)-4096:], "read-only view": got[0]} {
		n := uint64(len(r))
		if name == "past the end" {
			n += 4096
		}
		if err := Pretouch(uintptr(unsafe.Pointer(&r[0])), n); status.CodeOf(err) != status.Invalid {
			t.Errorf("%s: %v, want Invalid", name, err)
		}
	}
	if err := Pretouch(uintptr(unsafe.Pointer(&heap[0])), 0); err != nil {
		t.Errorf("empty range: %v", err)
	}
}

// threadNice returns the nice value of the calling thread (-100 when it
// cannot be read).
func threadNice() int {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		return -100
	}
	return 20 - prio // the system call's value, not glibc's
}

// The pre-touch lowers its thread's priority only when NiceEnv asks: the
// library must not renice threads of its host process by default.
func TestPretouchThreadKeepsItsPriorityUnlessAsked(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want func(before int) int
	}{
		{"", func(before int) int { return before }},
		{"0", func(before int) int { return before }},
		{"1", func(int) int { return 19 }},
	} {
		t.Run("env="+tc.env, func(t *testing.T) {
			t.Setenv(NiceEnv, tc.env)
			done := make(chan [2]int)
			go func() {
				// The thread ends with this goroutine (locked, never
				// unlocked), so a lowered priority is never reused.
				runtime.LockOSThread()
				before := threadNice()
				pretouchThread()
				done <- [2]int{before, threadNice()}
			}()
			got := <-done
			if got[0] == -100 || got[1] == -100 {
				t.Fatal("getpriority failed")
			}
			if want := tc.want(got[0]); got[1] != want {
				t.Fatalf("%s=%q: the thread's nice went from %d to %d, want %d", NiceEnv, tc.env, got[0], got[1], want)
			}
		})
	}
}
