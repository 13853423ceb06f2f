package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestDirectoryPublishLookupRetire(t *testing.T) {
	d, err := CreateDirectory(16, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := Map(d.ReadOnlyFd(), uint64(len(d.data)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v, err := NewDirectoryView(m.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	recOff, _ := d.RecordArea()
	tree := []byte(`{"id":"o0000000000000007","typename":"t"}`)
	blobs := []DirBlob{{ID: 1<<63 | 5, Offset: 4096, Size: 10}}
	size := RecordSize(len(tree), len(blobs))
	d.WriteRecord(recOff, 7, tree, 42, blobs)
	slot, ok := d.Publish(7, recOff, size)
	if !ok {
		t.Fatal("publish failed")
	}
	rec, got, seq, ok := v.Lookup(7, 1<<16)
	if !ok || got != slot || !bytes.Equal(rec.Tree, tree) || rec.Shape != 42 || len(rec.Blobs) != 1 || rec.Blobs[0] != blobs[0] {
		t.Fatalf("lookup = %+v %d %v", rec, got, ok)
	}
	if _, _, _, ok := v.Lookup(8, 1<<16); ok {
		t.Fatal("found an id never published")
	}
	if _, _, _, ok := v.Lookup(7, size-8); ok {
		t.Fatal("copied a record over the limit")
	}
	// A reader that validates after a retire sees the change.
	d.Retire(slot)
	if v.Seq(slot) == seq {
		t.Fatal("retire did not move seq")
	}
	if _, _, _, ok := v.Lookup(7, 1<<16); ok {
		t.Fatal("found a retired id")
	}
	// The tombstone is reused, and a lookup probes past it.
	d.WriteRecord(recOff, 9, tree, 0, nil)
	if _, ok := d.Publish(9, recOff, RecordSize(len(tree), 0)); !ok {
		t.Fatal("publish after retire failed")
	}
	// Records whose words do not parse are misses, never panics.
	d.WriteRecord(recOff, 9, tree, 0, nil)
	d.w[recOff/8+2] = 1 << 40 // tree length past the record
	if _, _, _, ok := v.Lookup(9, 1<<16); ok {
		t.Fatal("a corrupt record was returned")
	}
}

func TestDirectoryProbeBound(t *testing.T) {
	d, err := CreateDirectory(DirMaxProbe*2, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	full := 0
	for id := uint64(1); id <= DirMaxProbe*2+10; id++ {
		if _, ok := d.Publish(id, 0, 8); !ok {
			full++
		}
	}
	if full == 0 {
		t.Fatal("a table with more ids than slots took them all")
	}
}

func TestDirectoryViewRejectsBadHeaders(t *testing.T) {
	if _, err := NewDirectoryView(make([]byte, 4096)); err == nil {
		t.Fatal("accepted a page without the magic")
	}
	b := make([]byte, 4096)
	copy(b, DirMagic)
	words(b)[1] = 3 // not a power of two
	if _, err := NewDirectoryView(b); err == nil {
		t.Fatal("accepted a bad entry count")
	}
}

// pinPage makes a pin page and the client's view of it, both closed at the
// end of the test.
func pinPage(t *testing.T) (*PinPage, *PinView, *Mapping) {
	t.Helper()
	p, fd, err := CreatePinPage()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	m, err := Map(fd, PinPageSize, true)
	_ = unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	v, err := NewPinView(m.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return p, v, m
}

func TestPinPage(t *testing.T) {
	p, v, m := pinPage(t)
	a, _ := v.Set(11)
	b, _ := v.Set(12)
	seen := map[uint64]bool{}
	p.Find(NewPinIDs([]uint64{11, 12, 13}), func(_, id uint64) { seen[id] = true })
	if !seen[11] || !seen[12] || len(seen) != 2 {
		t.Fatalf("scan saw %v", seen)
	}
	v.Clear(a)
	clear(seen)
	many := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 11, 12} // more than 8: looked up in a set
	p.Find(NewPinIDs(many), func(_, id uint64) { seen[id] = true })
	if seen[11] || !seen[12] {
		t.Fatalf("scan after clear saw %v", seen)
	}
	v.Clear(b)
	for range v.TakeableSlots() {
		if _, ok := v.Set(1); !ok {
			t.Fatal("a free slot was refused")
		}
	}
	if _, ok := v.Set(1); ok {
		t.Fatal("more slots than the page has")
	}
	// The daemon never reads past the page, whatever the client's hint.
	words(m.Bytes())[0] = 1 << 40
	n := 0
	p.Find(NewPinIDs([]uint64{1}), func(uint64, uint64) { n++ })
	if n != PinSlots-(ForkWordsEnd-ForkSlotFirst) { // the children's slots are not the client's
		t.Fatalf("scanned %d slots", n)
	}
}

// The client counts pipelined puts and sleeps on the handled word; the
// daemon's SetHandled, then WakeHandled, wakes it. Neither touches a slot.
func TestPinPagePipelineWords(t *testing.T) {
	p, v, _ := pinPage(t)
	v.Submit()
	v.Submit()
	if p.Submitted() != 2 || v.Submitted() != 2 || v.Handled() != 0 {
		t.Fatalf("submitted %d/%d, handled %d", p.Submitted(), v.Submitted(), v.Handled())
	}
	addr, val, done := v.BeginWait(1)
	if done {
		t.Fatal("BeginWait reported a put the daemon did not handle")
	}
	start := time.Now()
	SleepHandled(addr, val, 10*time.Millisecond) // nobody wakes it
	if time.Since(start) < 10*time.Millisecond || v.Handled() != 0 {
		t.Fatal("the sleep ended before its timeout with nothing handled")
	}
	v.EndWait()
	if addr := p.SetHandled(1); addr != nil {
		t.Fatal("SetHandled asks for a wake with nobody waiting")
	}
	if _, _, done := v.BeginWait(1); !done {
		t.Fatal("BeginWait waits for a put the daemon handled")
	}
	woke := make(chan bool)
	go func() {
		// A futex sleep may end early (a signal: Go preempts with SIGURG),
		// so the waiter loops, as the client's does.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			addr, val, done := v.BeginWait(2)
			if done {
				break
			}
			SleepHandled(addr, val, time.Until(deadline))
			v.EndWait()
		}
		woke <- v.Handled() >= 2
	}()
	for since := time.Now(); atomic.LoadUint64(&v.w[len(v.w)-endWaiting]) == 0; { // the waiter is about to sleep
		if time.Since(since) > 30*time.Second {
			t.Fatal("the waiter never announced itself")
		}
		time.Sleep(time.Millisecond)
	}
	wake := p.SetHandled(2)
	if wake == nil {
		t.Fatal("SetHandled does not wake a waiter")
	}
	WakeHandled(wake)
	select {
	case ok := <-woke:
		if !ok {
			t.Fatal("the waiter woke without seeing the count")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	n := 0
	p.Find(NewPinIDs([]uint64{1}), func(uint64, uint64) { n++ })
	if n != 0 {
		t.Fatalf("the pipeline words show as %d pins", n)
	}
}

// residentPages returns how many pages of b are in memory (mincore).
func residentPages(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+int(pageSize)-1)/int(pageSize))
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// The directory's hot part (header, entry slots, the start of the record
// area) is resident from creation, the rest is not.
func TestDirectoryHotPart(t *testing.T) {
	d, err := CreateDirectory(1<<16, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	recOff, recSize := d.RecordArea()
	hot := hotLen(recOff, recSize)
	if hot != recOff+DirHotRecords || hot%pageSize != 0 {
		t.Fatalf("hot part of %d bytes, record area at %d", hot, recOff)
	}
	if n, want := residentPages(t, d.data[:hot]), int(hot/pageSize); n != want {
		t.Fatalf("%d of the %d pages of the hot part are resident", n, want)
	}
	if n := residentPages(t, d.data[hot:hot+(1<<20)]); n != 0 {
		t.Fatalf("%d pages past the hot part are resident", n)
	}
}

// Slots are taken lowest first, cleared ones again before new ones, so the
// hint (and the page memory the client touches) stays at the most pins held
// at once; the daemon's Holds follows one slot.
func TestPinSlotsLowestFirst(t *testing.T) {
	p, v, _ := pinPage(t)
	var got []uint64
	for id := uint64(1); id <= 3; id++ {
		i, ok := v.Set(100 + id)
		if !ok {
			t.Fatal("refused")
		}
		got = append(got, i)
	}
	v.Clear(got[1])
	again, _ := v.Set(200)
	if !slices.Equal(got, []uint64{1, 2, 3}) || again != 2 || v.InUse() != 3 || v.hint != 4 {
		t.Fatalf("slots %v, then %d; in use %d, hint %d", got, again, v.InUse(), v.hint)
	}
	if !p.Holds(2, 200) || p.Holds(2, 102) || p.Holds(0, 0) || p.Holds(PinSlots+1, 0) {
		t.Fatal("Holds does not follow slot 2")
	}
}

// A client maps pin pages of other sizes (a daemon of another version) with
// the daemon's words at the page's end; it refuses sizes that are not one.
func TestPinViewOtherSizes(t *testing.T) {
	for _, size := range []int{MinPinPageSize, 64 << 10, PinPageSize} {
		b := make([]byte, size)
		v, err := NewPinView(b)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		w := words(b)
		n := len(w)
		v.Submit()
		w[n-3] = 7 // the daemon's handled count
		w[n-1] = 1 // revoked
		if w[n-4] != 1 || v.Handled() != 7 || !v.Revoked() || v.Slots() != n-5 {
			t.Fatalf("%d bytes: submitted at %v, handled %d, revoked %v, %d slots", size, w[n-5:], v.Handled(), v.Revoked(), v.Slots())
		}
		for range v.TakeableSlots() {
			if _, ok := v.Set(1); !ok {
				t.Fatalf("%d bytes: a free slot was refused", size)
			}
		}
		if _, ok := v.Set(1); ok || w[n-5] != 1 || w[n-4] != 1 {
			t.Fatalf("%d bytes: the slots ran into the words after them", size)
		}
	}
	for _, size := range []int{0, MinPinPageSize - 8, MinPinPageSize + 4, MaxPinPageSize + 8} {
		if _, err := NewPinView(make([]byte, size)); err == nil {
			t.Errorf("a pin page of %d bytes was taken", size)
		}
	}
}

// BenchmarkPinPageFind is a delete's read of a page holding 60,000 pins
// (docs/performance.md, "December 5").
func BenchmarkPinPageFind(b *testing.B) {
	p, fd, err := CreatePinPage()
	if err != nil {
		b.Fatal(err)
	}
	_ = unix.Close(fd)
	defer p.Close()
	v, err := NewPinView(p.data)
	if err != nil {
		b.Fatal(err)
	}
	for i := range uint64(60_000) {
		v.Set(i + 1000)
	}
	for b.Loop() {
		p.Find(NewPinIDs([]uint64{5}), func(uint64, uint64) { b.Fatal("found") })
	}
}

// TestDirectoryCannotBeMadeWritable: a process holding the read-only fd
// clients get owns the memfd's inode (same user), so it can fchmod it and
// reopen it read-write through /proc; the F_SEAL_FUTURE_WRITE seal still
// refuses it a writable shared mapping and write(2), while the daemon's
// mapping made before the seal keeps writing.
func TestDirectoryCannotBeMadeWritable(t *testing.T) {
	d, err := CreateDirectory(64, 1<<12)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ro := d.ReadOnlyFd()
	if err := unix.Fchmod(ro, 0o600); err != nil {
		t.Fatal(err)
	}
	rw, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", ro), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("reopen read-write: %v (the seal is what this test checks; the open itself works)", err)
	}
	defer unix.Close(rw)
	size := int(d.recOff + d.recSize)
	if m, err := unix.Mmap(rw, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		m[0] = 'X'
		_ = unix.Munmap(m)
		t.Fatal("a writable shared mapping of the directory was made")
	} else if !errors.Is(err, unix.EPERM) {
		t.Fatalf("mmap: %v, want EPERM", err)
	}
	if _, err := unix.Pwrite(rw, []byte("X"), 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("pwrite: %v, want EPERM", err)
	}
	// A read-only shared mapping of the read-write fd cannot be made
	// writable either.
	m, err := unix.Mmap(rw, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(m) }()
	if err := unix.Mprotect(m, unix.PROT_READ|unix.PROT_WRITE); err == nil {
		t.Fatal("mprotect made a read-only mapping of the directory writable")
	}
	if string(m[:len(DirMagic)]) != DirMagic {
		t.Fatalf("magic %q", m[:len(DirMagic)])
	}
	// The daemon's mapping still writes, and readers see it.
	d.data[pageSize] = 7
	if m[pageSize] != 7 {
		t.Fatal("the daemon's write is not seen")
	}
}

// The client never takes the forked children's slots, and its hint only
// grows: a child's larger hint survives the client's next pin.
func TestPinViewLeavesForkSlots(t *testing.T) {
	b := make([]byte, PinPageSize)
	v, err := NewPinView(b)
	if err != nil {
		t.Fatal(err)
	}
	w := words(b)
	atomic.StoreUint64(&w[0], ForkSlotLast+1) // a child pinned its last slot
	atomic.StoreUint64(&w[ForkSlotLast], 77)
	if i, _ := v.Set(5); i != 1 || atomic.LoadUint64(&w[0]) != ForkSlotLast+1 {
		t.Fatalf("slot %d, hint %d: the client lowered a child's hint", i, w[0])
	}
	for range v.TakeableSlots() - 1 {
		i, ok := v.Set(9)
		if !ok {
			t.Fatal("a free slot was refused")
		}
		if i >= ForkSlotFirst && i < ForkWordsEnd {
			t.Fatalf("the client took the children's slot %d", i)
		}
	}
	if w[ForkSlotLast] != 77 || w[ForkSlotFirst] != 0 || w[ForkWordsEnd-1] != 0 || v.InUse() != v.TakeableSlots() {
		t.Fatalf("children's slots %d %d, in use %d of %d", w[ForkSlotFirst], w[ForkSlotLast], v.InUse(), v.TakeableSlots())
	}
	if binary.LittleEndian.Uint64([]byte(DirMagic)) != DirMagicWord {
		t.Fatalf("DirMagicWord %#x is not DirMagic %q", uint64(DirMagicWord), DirMagic)
	}
}
