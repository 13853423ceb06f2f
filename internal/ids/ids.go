// Package ids defines ObjectID, the 64-bit identifier of every object and blob,
// with upstream Vineyard's text form and generation scheme.
package ids

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// ObjectID identifies an object or a blob. Bit 63 set marks a blob.
type ObjectID uint64

const (
	// BlobBit is set in the id of every blob and clear in every other object id.
	BlobBit ObjectID = 1 << 63
	// EmptyBlob is the id of the zero-length blob; it owns no memory.
	EmptyBlob ObjectID = BlobBit
	// Invalid is never the id of a stored object (upstream's InvalidObjectID).
	Invalid ObjectID = ^ObjectID(0)
)

// ErrBadID is returned by Parse for text that is not an object id.
var ErrBadID = errors.New("ids: malformed object id")

// IsBlob reports whether id names a blob.
func (id ObjectID) IsBlob() bool { return id&BlobBit != 0 && id != Invalid }

// String returns the upstream text form "o%016x".
func (id ObjectID) String() string {
	var b [17]byte
	return string(id.AppendText(b[:0]))
}

// AppendText appends the "o%016x" form of id to dst.
func (id ObjectID) AppendText(dst []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, 'o')
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hex[(id>>uint(shift))&0xf])
	}
	return dst
}

// Parse reads an id in the "o%016x" form (upstream also accepts any leading
// character; so do we) or as a decimal number.
func Parse(s string) (ObjectID, error) {
	if s == "" {
		return 0, ErrBadID
	}
	if c := s[0]; c < '0' || c > '9' {
		if len(s) < 2 || len(s) > 17 {
			return 0, fmt.Errorf("%w: %q", ErrBadID, s)
		}
		v, err := strconv.ParseUint(s[1:], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %q", ErrBadID, s)
		}
		return ObjectID(v), nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrBadID, s)
	}
	return ObjectID(v), nil
}

// Generator makes fresh ids the way upstream does: 41 bits of milliseconds,
// 10 bits of instance id, 12 bits of sequence. A sequence overflow within one
// millisecond borrows from the next millisecond, so ids never repeat.
type Generator struct {
	instance uint64
	last     atomic.Uint64 // last value produced, without the blob bit
}

// NewGenerator returns a generator for the given instance.
func NewGenerator(instance uint64) *Generator {
	return &Generator{instance: instance & 0x3ff}
}

func (g *Generator) next() uint64 {
	for {
		ms := uint64(time.Now().UnixMilli()) & 0x1ffffffffff
		cand := ms<<22 | g.instance<<12
		last := g.last.Load()
		if cand <= last {
			cand = last + 1
			if cand&0xfff == 0 { // sequence wrapped: skip to the next millisecond slot
				cand = (last&^0xfff + 1<<22) | g.instance<<12
			}
		}
		cand &^= uint64(BlobBit)
		if g.last.CompareAndSwap(last, cand) {
			return cand
		}
	}
}

// BlobBlock reserves n consecutive fresh blob ids (1 <= n <= 4096) and
// returns the first: first, first+1, ..., first+n-1 are blob ids that the
// generator never returns again. They share one millisecond slot, so the
// instance bits of each are this generator's. A daemon hands such a block
// to a client that names its new blobs itself (a lease, internal/store).
func (g *Generator) BlobBlock(n int) ObjectID {
	if n < 1 || n > 0x1000 {
		panic("ids: BlobBlock of an impossible size")
	}
	for {
		ms := uint64(time.Now().UnixMilli()) & 0x1ffffffffff
		cand := ms<<22 | g.instance<<12
		last := g.last.Load()
		cand &^= uint64(BlobBit)
		if cand <= last {
			cand = last + 1
			if cand&0xfff == 0 || cand&0xfff+uint64(n) > 0x1000 { // would leave the slot: take the next whole
				cand = ((last>>22)+1)<<22 | g.instance<<12
			}
		}
		cand &^= uint64(BlobBit)
		end := cand + uint64(n) - 1
		if g.last.CompareAndSwap(last, end) {
			return ObjectID(cand) | BlobBit
		}
	}
}

// Object returns a fresh non-blob id.
func (g *Generator) Object() ObjectID { return ObjectID(g.next()) }

// Blob returns a fresh blob id.
func (g *Generator) Blob() ObjectID { return ObjectID(g.next()) | BlobBit }

// Signature returns a fresh signature value (upstream uses the same scheme).
func (g *Generator) Signature() uint64 { return g.next() }
