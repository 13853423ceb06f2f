package shm

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The directory: what a get needs (id → tree and blob extents), published by
// the daemon in shared memory that clients map read-only, so a get of a
// sealed object needs no round trip (docs/design.md, "Gets without a round
// trip"). This is the one definition of its layout and of both sides of its
// protocol: the daemon's writer (Directory) and the client's reader
// (DirectoryView). Every word is a uint64 in native byte order, read and
// written with atomic operations only.
//
// The directory is its own memfd ("vineyard-directory"), sealed against
// shrinking and growing, mode 0400, sent to clients through a second fd
// opened O_RDONLY. A read-only fd alone would not keep a client of the
// daemon's user out: it owns the inode, so fchmod and an open of
// /proc/self/fd/N O_RDWR give it a writable fd. So once the daemon has
// mapped it, the memfd is also sealed F_SEAL_FUTURE_WRITE: no process (the
// daemon included) can map it writable or write(2) it any more; only the
// daemon's mapping made before the seal writes it (docs/security.md).
//
//	word 0  magic "v6ddir\x00\x01"
//	word 1  entries: number of entry slots, a power of two
//	word 2  offset of the record area, in bytes
//	word 3  size of the record area, in bytes
//	word 4  the daemon's life word (life.go)
//	at DirHeaderSize: entries × {seq, id, record offset, record length}
//	at the record area: records, each 8-byte aligned
//
// An entry slot's seq is 0 while it was never used, odd while the daemon
// writes it, even otherwise; it only grows. A live entry has a non-zero
// length; a retired one (a tombstone) has id and length 0. Entries are found
// by linear probing from the id's hash, at most DirMaxProbe slots, stopping
// at a never-used slot.
//
// A record is immutable while an entry names it:
//
//	word 0  id
//	word 1  number of blobs n
//	word 2  tree length in bytes
//	word 3  the tree's shape number (the daemon's, 0: none; internal/tree)
//	n × {blob id, arena offset, size}
//	the tree (the JSON get_data returns for the id), padded to 8 bytes
//
// Writer (the daemon, one at a time): a record is written before the entry
// that names it is published; publish and retire make seq odd, write the
// entry's words, then make seq even and larger. A record is reused only
// after the entry that named it was retired.
//
// Reader: load seq (odd: miss); read the entry's words and copy its record;
// load seq again: if it moved, the copy may be torn or stale: miss. Every
// offset read is checked against the mapping before use.
const (
	// DirHeaderSize is the size of the directory's header.
	DirHeaderSize = 64
	// DirEntrySize is the size of one entry slot.
	DirEntrySize = 32
	// DirMaxProbe bounds the slots a lookup or a publish visits.
	DirMaxProbe = 32
	// DirRecordHeader is the size of a record's fixed words.
	DirRecordHeader = 32
	// DirBlobSize is the size of one blob extent in a record.
	DirBlobSize = 24
	// DirHotRecords is the part of the record area, from its start, that
	// is resident from the directory's creation (with the header and the
	// entry slots): the records allocator reuses the lowest free offsets,
	// so records live there unless tens of thousands are published at
	// once (see hotLen).
	DirHotRecords = 4 << 20
)

// hotLen is the length, from the directory's start, of its hot part: the
// header, every entry slot and the first DirHotRecords of the record area.
// A publish writes an entry slot chosen by hash, so without it the first
// few thousand puts would each fault in a page of slots (15–30 µs on a VM).
func hotLen(recOff, recSize uint64) uint64 { return recOff + min(recSize, DirHotRecords) }

// DirMagic identifies the directory layout; its last byte is the layout's
// version. libv6d's reader for forked children (libv6d/forkread.c) has its
// own copy of the layout in libv6d/dirlayout.h, which the libv6d package
// checks against these constants when it compiles (forklayout.go), and
// refuses a directory whose magic differs, naming both versions.
const DirMagic = "v6ddir\x00\x02"

// DirMagicWord is DirMagic read as a little-endian word, as a reader in C
// compares it.
const DirMagicWord = 0x0200726964643676

// directoryName is the memfd name of the directory.
const directoryName = "vineyard-directory"

// DirBlob is one blob extent of a directory record.
type DirBlob struct {
	ID     uint64
	Offset uint64 // in the arena
	Size   uint64
}

// RecordSize returns the bytes of a record with a tree of treeLen bytes and
// n blobs.
func RecordSize(treeLen, n int) uint64 {
	return DirRecordHeader + uint64(n)*DirBlobSize + (uint64(treeLen)+7)&^7
}

func dirHash(id uint64) uint64 {
	id ^= id >> 33
	id *= 0xff51afd7ed558ccd
	id ^= id >> 33
	return id
}

// words returns b as uint64 words (b is page-aligned and a multiple of 8).
func words(b []byte) []uint64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
}

// Directory is the daemon's side of the directory: the memfd, its read-only
// fd for clients and the daemon's read-write mapping. Its methods are not
// safe for concurrent use: the store calls them under its lock. Records
// are placed by the caller (RecordArea gives the range).
type Directory struct {
	fd, rofd int
	data     []byte
	w        []uint64
	entries  uint64
	recOff   uint64
	recSize  uint64
	life     *lifeThread // holds the life word (Life); nil: none
}

// CreateDirectory makes a directory of entries slots (rounded up to a power
// of two) and a record area of recordBytes bytes. Its pages are allocated
// as they are written.
func CreateDirectory(entries, recordBytes uint64) (*Directory, error) {
	if entries == 0 || entries > 1<<24 || recordBytes == 0 || recordBytes > 1<<34 {
		return nil, fmt.Errorf("%w: directory of %d entries and %d record bytes", ErrBadSize, entries, recordBytes)
	}
	n := uint64(1)
	for n < entries {
		n <<= 1
	}
	recOff := (DirHeaderSize + n*DirEntrySize + pageSize - 1) &^ (pageSize - 1)
	recordBytes = (recordBytes + pageSize - 1) &^ (pageSize - 1)
	size := recOff + recordBytes
	fd, data, err := sealedMemfd(directoryName, size, unix.F_SEAL_FUTURE_WRITE)
	if err != nil {
		return nil, err
	}
	rofd, err := reopenReadOnly(fd)
	if err != nil {
		_ = unix.Munmap(data)
		unix.Close(fd)
		return nil, fmt.Errorf("shm: read-only reopen of the directory: %w", err)
	}
	d := &Directory{fd: fd, rofd: rofd, data: data, w: words(data), entries: n, recOff: recOff, recSize: recordBytes}
	// Resident before the first publish. Best effort: a failure (ENOMEM)
	// leaves the pages to first touch. Clients need no such step: a read
	// fault on a shared file mapping maps the pages around it that are
	// resident too (fault-around, 16 pages).
	_ = populate(data[:hotLen(recOff, recordBytes)])
	copy(data, DirMagic)
	atomic.StoreUint64(&d.w[1], n)
	atomic.StoreUint64(&d.w[2], recOff)
	atomic.StoreUint64(&d.w[3], recordBytes)
	return d, nil
}

// sealedMemfd creates a memfd of size bytes, mode 0400, mapped read-write,
// then sealed against shrinking and growing, with extra seals too (once
// mapped, so that F_SEAL_FUTURE_WRITE spares this mapping), and against
// further seals: the arena, the directory and the pin pages are all made by
// it. F_SEAL_FUTURE_WRITE needs Linux 5.1.
func sealedMemfd(name string, size uint64, extra int) (int, []byte, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) {
		// Kernels before 6.3 do not know MFD_NOEXEC_SEAL.
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, nil, fmt.Errorf("shm: memfd_create %s: %w", name, err)
	}
	fail := func(op string, err error) (int, []byte, error) {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("shm: %s of %s: %w", op, name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	if err := unix.Fchmod(fd, 0o400); err != nil {
		return fail("fchmod", err)
	}
	data, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, arenaSeals|extra); err != nil {
		_ = unix.Munmap(data)
		return fail("F_ADD_SEALS", err)
	}
	return fd, data, nil
}

// ReadOnlyFd returns the fd clients get (O_RDONLY), owned by the Directory.
func (d *Directory) ReadOnlyFd() int { return d.rofd }

// RecordArea returns the offset and size of the record area.
func (d *Directory) RecordArea() (off, size uint64) { return d.recOff, d.recSize }

// Entries returns the number of entry slots.
func (d *Directory) Entries() uint64 { return d.entries }

// Close unmaps the directory and closes its fds; clients keep their
// mappings.
func (d *Directory) Close() error {
	if d.data == nil {
		return nil
	}
	if d.life != nil {
		d.life.end()
		d.life = nil
	}
	err := unix.Munmap(d.data)
	unix.Close(d.fd)
	unix.Close(d.rofd)
	d.data, d.w = nil, nil
	return err
}

// WriteRecord writes the record of id at off (8-aligned, inside the record
// area, RecordSize bytes reserved by the caller, named by no live entry):
// its tree, the tree's shape number and its blobs.
func (d *Directory) WriteRecord(off uint64, id uint64, tree []byte, shape uint64, blobs []DirBlob) {
	w := d.w[off/8:]
	atomic.StoreUint64(&w[0], id)
	atomic.StoreUint64(&w[1], uint64(len(blobs)))
	atomic.StoreUint64(&w[2], uint64(len(tree)))
	atomic.StoreUint64(&w[3], shape)
	i := 4
	for _, b := range blobs {
		atomic.StoreUint64(&w[i], b.ID)
		atomic.StoreUint64(&w[i+1], b.Offset)
		atomic.StoreUint64(&w[i+2], b.Size)
		i += 3
	}
	var word [8]byte
	for len(tree) > 0 {
		n := copy(word[:], tree)
		clear(word[n:])
		atomic.StoreUint64(&w[i], *(*uint64)(unsafe.Pointer(&word)))
		tree = tree[n:]
		i++
	}
}

// entry returns the words of entry slot i.
func (d *Directory) entry(i uint64) []uint64 {
	at := (DirHeaderSize + i*DirEntrySize) / 8
	return d.w[at : at+4 : at+4]
}

// View returns a reader's view of the directory's own mapping, for the
// daemon to check what it published against what it would publish now
// (store.CheckInvariants).
func (d *Directory) View() (*DirectoryView, error) { return NewDirectoryView(d.data) }

// Publish makes an entry for id naming the record [off, off+size) and
// returns its slot, or false when no slot within DirMaxProbe is free. id
// must have no live entry.
func (d *Directory) Publish(id, off, size uint64) (uint64, bool) {
	h := dirHash(id)
	for p := uint64(0); p < DirMaxProbe; p++ {
		i := (h + p) & (d.entries - 1)
		e := d.entry(i)
		if atomic.LoadUint64(&e[3]) != 0 {
			continue
		}
		seq := atomic.LoadUint64(&e[0])
		atomic.StoreUint64(&e[0], seq+1)
		atomic.StoreUint64(&e[1], id)
		atomic.StoreUint64(&e[2], off)
		atomic.StoreUint64(&e[3], size)
		atomic.StoreUint64(&e[0], seq+2)
		return i, true
	}
	return 0, false
}

// Retire turns entry slot i into a tombstone. After it returns, a reader
// that validates a copy against the seq it read before sees the change.
func (d *Directory) Retire(i uint64) {
	e := d.entry(i)
	seq := atomic.LoadUint64(&e[0])
	atomic.StoreUint64(&e[0], seq+1)
	atomic.StoreUint64(&e[1], 0)
	atomic.StoreUint64(&e[2], 0)
	atomic.StoreUint64(&e[3], 0)
	atomic.StoreUint64(&e[0], seq+2)
}

// DirectoryView is a client's read-only view of a directory. It is safe
// for concurrent use; it owns nothing (the caller owns the mapping).
type DirectoryView struct {
	w       []uint64
	entries uint64
	recOff  uint64
	recEnd  uint64
}

// NewDirectoryView checks the header of a mapped directory.
func NewDirectoryView(b []byte) (*DirectoryView, error) {
	if len(b) < DirHeaderSize || string(b[:8]) != DirMagic {
		return nil, errors.New("shm: not a directory (bad magic)")
	}
	w := words(b)
	v := &DirectoryView{w: w, entries: atomic.LoadUint64(&w[1]), recOff: atomic.LoadUint64(&w[2])}
	size := atomic.LoadUint64(&w[3])
	n := uint64(len(b))
	if v.entries == 0 || v.entries&(v.entries-1) != 0 || v.entries > (n-DirHeaderSize)/DirEntrySize ||
		v.recOff < DirHeaderSize+v.entries*DirEntrySize || v.recOff%8 != 0 || v.recOff > n || size > n-v.recOff {
		return nil, errors.New("shm: directory header out of bounds")
	}
	v.recEnd = v.recOff + size
	return v, nil
}

// Record is a copy of a directory record.
type Record struct {
	Tree  []byte
	Shape uint64 // the daemon's shape number of Tree (0: none)
	Blobs []DirBlob
	// Words is the copy Tree lies in (LookupInto's buffer, grown): the
	// caller passes it back for the next lookup.
	Words []uint64
}

// Lookup finds the entry of id and copies its record. It returns the entry
// slot and the seq the copy is valid for (see Seq), or false: no entry, an
// entry being written, or a copy the daemon changed meanwhile. maxRecord
// bounds the bytes copied.
func (v *DirectoryView) Lookup(id uint64, maxRecord uint64) (Record, uint64, uint64, bool) {
	return v.LookupInto(id, maxRecord, nil, nil)
}

// LookupInto is Lookup that copies the record into words and its blobs into
// blobs (both from their length 0, grown when too small), so that a caller
// that passes them back (Record.Words, Record.Blobs) allocates nothing per
// lookup. The Record's Tree and Blobs alias them.
func (v *DirectoryView) LookupInto(id uint64, maxRecord uint64, words []uint64, blobs []DirBlob) (Record, uint64, uint64, bool) {
	if id == 0 {
		return Record{}, 0, 0, false
	}
	h := dirHash(id)
	for p := uint64(0); p < DirMaxProbe; p++ {
		i := (h + p) & (v.entries - 1)
		at := (DirHeaderSize + i*DirEntrySize) / 8
		e := v.w[at : at+4 : at+4]
		seq := atomic.LoadUint64(&e[0])
		if seq == 0 {
			return Record{}, 0, 0, false // never used: the probe ends
		}
		if seq&1 != 0 {
			return Record{}, 0, 0, false // being written
		}
		if atomic.LoadUint64(&e[1]) != id {
			continue
		}
		off, size := atomic.LoadUint64(&e[2]), atomic.LoadUint64(&e[3])
		if size == 0 || size > maxRecord || size%8 != 0 || off%8 != 0 || off < v.recOff || off > v.recEnd || size > v.recEnd-off {
			return Record{}, 0, 0, false
		}
		rec, ok := v.copyRecord(off, size, id, words, blobs)
		if !ok || atomic.LoadUint64(&e[0]) != seq {
			return Record{}, 0, 0, false
		}
		return rec, i, seq, true
	}
	return Record{}, 0, 0, false
}

// copyRecord copies and decodes the record [off, off+size) into words and
// blobs (grown as needed); false when it does not parse (torn: the
// caller's seq check would fail too).
func (v *DirectoryView) copyRecord(off, size, id uint64, words []uint64, blobs []DirBlob) (Record, bool) {
	src := v.w[off/8 : (off+size)/8]
	buf := words[:0]
	if cap(buf) < len(src) {
		buf = make([]uint64, len(src))
	}
	buf = buf[:len(src)]
	for i := range src {
		buf[i] = atomic.LoadUint64(&src[i])
	}
	if len(buf) < DirRecordHeader/8 || buf[0] != id {
		return Record{}, false
	}
	n, treeLen := buf[1], buf[2]
	if n > (size-DirRecordHeader)/DirBlobSize || RecordSize(0, int(n))+((treeLen+7)&^7) != size {
		return Record{}, false
	}
	if uint64(cap(blobs)) < n {
		blobs = make([]DirBlob, n)
	}
	blobs = blobs[:n]
	for j := range blobs {
		blobs[j] = DirBlob{ID: buf[4+3*j], Offset: buf[5+3*j], Size: buf[6+3*j]}
	}
	all := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)*8)
	start := DirRecordHeader + n*DirBlobSize
	return Record{Tree: all[start : start+treeLen : start+treeLen], Shape: buf[3], Blobs: blobs, Words: buf}, true
}

// Seq returns the current seq of entry slot i (slot < entries).
func (v *DirectoryView) Seq(i uint64) uint64 {
	return atomic.LoadUint64(&v.w[(DirHeaderSize+i*DirEntrySize)/8])
}

// Pin slots: one pin page per connection, its own memfd ("vineyard-pins"), that
// the daemon creates and maps, and the connection's client maps writable.
// Word 0 is the client's hint: no slot at or above it is in use (the daemon
// clamps it); words 1..PinSlots are slots holding the id of an object or
// blob the client pinned, 0 when free. Three words serve pipelined puts
// (docs/design.md, "Pipelined puts"): submitted, the puts the client sent
// (it adds one before it writes each, so a daemon that cannot find an id
// waits for the connections whose count is ahead of what it handled);
// handled, the daemon's count of those it handled, whose first 4 bytes are
// a futex; and waiting, the client's threads asleep on that futex, so the
// daemon wakes them only then. The last word is the daemon's: not 0 once
// the daemon no longer honours the page's pins (the connection closed on
// its side), so the client must stop answering gets from the directory.
// The client stores a slot, then loads the entry's seq (both atomic, so
// sequentially consistent); the daemon retires an entry, then loads the
// slots: either the client sees the new seq and does not use the pin, or
// the daemon sees the pin.
const (
	// PinPageSize is the size of the pin pages this daemon makes: 65,531
	// slots, so that a process holding tens of thousands of got values
	// still gets without a round trip. The memfd's pages are allocated as slots are first
	// used (lowest first), and the daemon reads slots only up to the
	// client's hint, so an idle connection costs two pages whatever the size.
	PinPageSize = 512 << 10
	// PinSlots is the number of slots of a pin page of PinPageSize.
	PinSlots = PinPageSize/8 - pinTail
	// ClientPinSlots is how many of them a client's PinView takes: all
	// but the forked children's and their owner words (ForkSlotFirst).
	ClientPinSlots = PinSlots - (ForkWordsEnd - ForkSlotFirst)
	// MinPinPageSize and MaxPinPageSize bound the pages a client accepts: a
	// daemon of another version may make pages of another size, whose
	// words the client then places from the page's end as the daemon does.
	MinPinPageSize = 4 << 10
	MaxPinPageSize = 64 << 20
	// ForkSlotFirst to ForkSlotLast are the slots readers in forked
	// children of the client's process use (libv6d/forkread.c,
	// docs/design.md "Reading in a forked child"); the word ForkPidOffset
	// slots after each holds the process id of the child that owns it, 0
	// when free. A child takes a slot by a compare-and-swap of its owner
	// word from 0 (or from a dead process's id) to its own, raises the
	// hint, stores the id; it releases by storing 0 in the slot, then in
	// the owner word. The client's PinView never takes any of these words.
	// The slots end below 1024, so that a page whose children pinned is
	// still one a delete reads at once (store's pinScanNow); the owner
	// words above are read as slots only by a delete of a page whose
	// client holds more, and hold no object's id. A page too small for
	// them (under ForkWordsEnd+pinTail words) serves no child.
	ForkSlotFirst = 768
	ForkSlotLast  = 1023
	ForkPidOffset = ForkSlotLast - ForkSlotFirst + 1
	ForkWordsEnd  = ForkSlotLast + ForkPidOffset + 1 // the first word after the owner words
	// pinTail is the number of words that are not slots: the hint, and
	// the four after the slots, which both sides place from the page's end
	// whatever its size (words(page)[len-k] for k below).
	pinTail = 5
	// The last four words: the client's pipelined puts submitted, the
	// daemon's count handled, the client's threads waiting for it and the
	// daemon's revoked flag.
	endSubmitted = 4
	endHandled   = 3
	endWaiting   = 2
	endRevoked   = 1
)

// pinsName is the memfd name of a pin page.
const pinsName = "vineyard-pins"

// PinPage is the daemon's mapping of one connection's pin page.
type PinPage struct {
	w    []uint64
	data []byte
}

// CreatePinPage makes a pin page and returns it and its read-write fd,
// which the caller sends to the client and then closes.
func CreatePinPage() (*PinPage, int, error) {
	fd, data, err := sealedMemfd(pinsName, PinPageSize, 0)
	if err != nil {
		return nil, -1, err
	}
	return &PinPage{w: words(data), data: data}, fd, nil
}

// PinIDs are the ids a delete looks for in every pin page (PinPage.Find),
// made once per delete: up to 8 compared in turn, more looked up in a set.
type PinIDs struct {
	few []uint64
	set map[uint64]struct{}
}

// NewPinIDs makes the PinIDs of idl.
func NewPinIDs(idl []uint64) PinIDs {
	if len(idl) <= 8 {
		return PinIDs{few: idl}
	}
	set := make(map[uint64]struct{}, len(idl))
	for _, id := range idl {
		set[id] = struct{}{}
	}
	return PinIDs{set: set}
}

// Find calls fn with the slot number and value of every slot holding one of
// ids, reading each slot once: a delete's look for pins of what it deletes,
// which reads every slot up to the client's hint, so its loop makes no call
// per slot (a closure per slot took 320 µs for a page of 60,000 pins, the
// loop 30-60 µs).
func (p *PinPage) Find(ids PinIDs, fn func(slot, id uint64)) {
	if p == nil || p.w == nil || (len(ids.few) == 0 && len(ids.set) == 0) {
		return
	}
	limit := min(atomic.LoadUint64(&p.w[0]), PinSlots)
	w := p.w[:limit+1]
	for i := uint64(1); i <= limit; i++ {
		v := atomic.LoadUint64(&w[i])
		if v == 0 {
			continue
		}
		if ids.set != nil {
			if _, ok := ids.set[v]; ok {
				fn(i, v)
			}
			continue
		}
		for _, id := range ids.few {
			if v == id {
				fn(i, v)
				break
			}
		}
	}
}

// Hint returns how many slots the client says it used (the page's first
// word, which it writes), at most PinSlots: what Find reads.
func (p *PinPage) Hint() uint64 {
	if p == nil || p.w == nil {
		return 0
	}
	return min(atomic.LoadUint64(&p.w[0]), PinSlots)
}

// Holds reports whether slot holds id now: a hold made from a pin seen in
// a slot (Find) lasts while the slot keeps the id, one load, not a read of
// the page.
func (p *PinPage) Holds(slot, id uint64) bool {
	if p == nil || p.w == nil || slot < 1 || slot > PinSlots {
		return false
	}
	return atomic.LoadUint64(&p.w[slot]) == id
}

// Revoke marks the page revoked (PinView.Revoked): from now on the client
// answers no get from the directory.
func (p *PinPage) Revoke() {
	if p != nil && p.w != nil {
		atomic.StoreUint64(&p.w[len(p.w)-endRevoked], 1)
	}
}

// Submitted returns the number of pipelined puts the client says it sent
// (the client writes it: a number, never trusted beyond a bounded wait).
func (p *PinPage) Submitted() uint64 {
	if p == nil || p.w == nil {
		return 0
	}
	return atomic.LoadUint64(&p.w[len(p.w)-endSubmitted])
}

// SetHandled publishes n, the pipelined puts the daemon handled, and
// returns the address to wake (WakeHandled) when client threads wait for
// it (PinView.BeginWait), else nil.
func (p *PinPage) SetHandled(n uint64) *uint32 {
	if p == nil || p.w == nil {
		return nil
	}
	atomic.StoreUint64(&p.w[len(p.w)-endHandled], n)
	if atomic.LoadUint64(&p.w[len(p.w)-endWaiting]) == 0 { // after the store: see BeginWait
		return nil
	}
	return (*uint32)(unsafe.Pointer(&p.w[len(p.w)-endHandled]))
}

// WakeHandled wakes the threads waiting on the handled word at addr (from
// SetHandled). It only makes a system call, so it may run without the
// lock that keeps the page mapped: on an unmapped address the kernel
// returns an error instead of faulting.
func WakeHandled(addr *uint32) {
	if addr != nil {
		futexWake(addr)
	}
}

// Close revokes the page and unmaps it.
func (p *PinPage) Close() {
	if p != nil && p.data != nil {
		p.Revoke()
		_ = unix.Munmap(p.data)
		p.data, p.w = nil, nil
	}
}

// PinView is the client's writable mapping of its pin page. Its methods are
// not safe for concurrent use (the client calls them under its lock).
type PinView struct {
	w    []uint64
	hint uint64
	// Slots are taken lowest first: next is the lowest never taken, free
	// the ones cleared since (taken again first, last cleared first). The
	// page's memory is then allocated only as far as the client ever
	// pinned at once.
	next uint64
	free []uint64
}

// NewPinView wraps a writable mapping of a pin page. The page may have any
// size from MinPinPageSize to MaxPinPageSize that is a whole number of
// words (a daemon of another version may make another size): its last
// words are placed from its end, as the daemon places them.
func NewPinView(b []byte) (*PinView, error) {
	if len(b) < MinPinPageSize || len(b) > MaxPinPageSize || len(b)%8 != 0 {
		return nil, fmt.Errorf("shm: a pin page of %d bytes (want a multiple of 8 from %d to %d)",
			len(b), MinPinPageSize, MaxPinPageSize)
	}
	return &PinView{w: words(b), next: 1}, nil
}

// Set takes a free slot, stores id in it and returns its number, or false
// when every slot is taken.
func (v *PinView) Set(id uint64) (uint64, bool) {
	var i uint64
	switch {
	case len(v.free) > 0:
		i = v.free[len(v.free)-1]
		v.free = v.free[:len(v.free)-1]
	case v.next <= uint64(v.Slots()):
		i = v.next
		if i == ForkSlotFirst {
			i = ForkWordsEnd // the forked children's slots and owner words
		}
		v.next = i + 1
		if i > uint64(v.Slots()) {
			return 0, false
		}
	default:
		return 0, false
	}
	if i >= v.hint {
		v.hint = i + 1
		raiseHint(&v.w[0], v.hint) // before the slot: the daemon reads the hint first
	}
	atomic.StoreUint64(&v.w[i], id)
	return i, true
}

// raiseHint makes the hint word at least h. Forked children of the
// client's process raise it too (libv6d/forkread.c), so it only grows, by
// compare-and-swap: a plain store could lower a child's hint and hide its
// pin from a delete.
func raiseHint(w *uint64, h uint64) {
	for {
		old := atomic.LoadUint64(w)
		if old >= h || atomic.CompareAndSwapUint64(w, old, h) {
			return
		}
	}
}

// Clear frees slot i.
func (v *PinView) Clear(i uint64) {
	atomic.StoreUint64(&v.w[i], 0)
	v.free = append(v.free, i)
}

// Revoked reports whether the daemon dropped the page: its pins protect
// nothing any more.
func (v *PinView) Revoked() bool { return atomic.LoadUint64(&v.w[len(v.w)-endRevoked]) != 0 }

// Submit counts one more pipelined put, the caller then writes it, and
// returns the count with it.
func (v *PinView) Submit() uint64 { return atomic.AddUint64(&v.w[len(v.w)-endSubmitted], 1) }

// Submitted returns the pipelined puts this client counted.
func (v *PinView) Submitted() uint64 { return atomic.LoadUint64(&v.w[len(v.w)-endSubmitted]) }

// Handled returns the pipelined puts the daemon says it handled.
func (v *PinView) Handled() uint64 { return atomic.LoadUint64(&v.w[len(v.w)-endHandled]) }

// BeginWait announces a thread about to wait until the daemon handled at
// least target pipelined puts, and returns the futex word and the value to
// sleep on (SleepHandled); done, with nobody announced, when it handled
// them already. The waiter stores its count in the waiting word, then
// loads handled; the daemon stores handled, then loads waiting (all
// sequentially consistent): either the waiter sees the new count, or the
// daemon sees the waiter and wakes it; a wake between the load and the
// sleep makes the futex's value differ, and the sleep returns at once.
// EndWait withdraws the announcement.
func (v *PinView) BeginWait(target uint64) (addr *uint32, val uint32, done bool) {
	if v.Handled() >= target {
		return nil, 0, true
	}
	atomic.AddUint64(&v.w[len(v.w)-endWaiting], 1)
	h := v.Handled()
	if h >= target {
		v.EndWait()
		return nil, 0, true
	}
	return (*uint32)(unsafe.Pointer(&v.w[len(v.w)-endHandled])), uint32(h), false
}

// EndWait withdraws a waiter BeginWait announced.
func (v *PinView) EndWait() { atomic.AddUint64(&v.w[len(v.w)-endWaiting], ^uint64(0)) }

// SleepHandled sleeps while the futex word at addr (from BeginWait) holds
// val, for at most timeout. It only makes a system call, so the caller
// need not keep the page mapped meanwhile: on an unmapped address the
// kernel returns an error instead of faulting.
func SleepHandled(addr *uint32, val uint32, timeout time.Duration) { futexWait(addr, val, timeout) }

// InUse returns the number of slots taken (tests).
func (v *PinView) InUse() int {
	n := int(v.next-1) - len(v.free)
	if v.next > ForkWordsEnd {
		n -= ForkWordsEnd - ForkSlotFirst // skipped: the children's
	}
	return n
}

// Slots returns the number of slots of the page, the forked children's
// included (TakeableSlots: without them).
func (v *PinView) Slots() int { return len(v.w) - pinTail }

// TakeableSlots returns the number of slots Set can take.
func (v *PinView) TakeableSlots() int {
	n := v.Slots()
	if n >= ForkSlotFirst {
		n -= min(n+1, ForkWordsEnd) - ForkSlotFirst
	}
	return n
}
