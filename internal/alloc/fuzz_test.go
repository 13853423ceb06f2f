package alloc

import (
	"errors"
	"math"
	"testing"
)

// FuzzAllocator reads its input as a capacity (2 bytes) followed by 3-byte
// operations and checks every invariant after each one: alignment, no
// overlap, bounds, accounting, exact tiling by live and free extents, full
// coalescing, best-fit placement, and that the whole arena is one extent
// again once everything is freed.
//
// Operation bytes (op, x, y), with v = x | y<<8 and n = op>>2 (0..63):
//
//	op%4 == 0: Alloc(v % 1024)            small, including 0
//	op%4 == 1: Alloc(v*64 + n)            large, past capacity; n == 63 → MaxUint64
//	op%4 == 2: Free(live[v % len])        n == 63 or nothing live → an unknown offset
//	op%4 == 3: Shrink(live[v % len], s)   s = size*n/63; n == 0 → 0, n == 63 → size+1
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{0x00, 0x02, 0, 10, 0, 0, 20, 0, 0, 30, 0, 2, 1, 0, 0, 40, 0, 2, 0, 0})
	f.Add([]byte{0xff, 0xff, 1, 0, 1, 1, 0, 2, 1, 0, 3, 2, 0, 0, 2, 1, 0, 2, 2, 0})
	f.Add([]byte{0x10, 0x00, 0, 63, 0, 0, 63, 0, 0, 63, 0, 3 | 20<<2, 0, 0, 3 | 1<<2, 1, 0, 2, 2, 0})
	f.Add([]byte{0x41, 0x00, 1, 0xff, 0xff, 1 | 63<<2, 0, 0, 2 | 63<<2, 5, 5, 3, 0, 0, 0, 0, 0})
	f.Add([]byte{0x00, 0x01, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 4, 0, 2, 1, 0, 2, 2, 0, 2, 0, 0, 3 | 62<<2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		capacity := (uint64(data[0]) | uint64(data[1])<<8) * 8
		a := New(capacity)
		live := map[uint64]uint64{}
		var offs []uint64
		for ops := data[2:]; len(ops) >= 3; ops = ops[3:] {
			op, v := ops[0], uint64(ops[1])|uint64(ops[2])<<8
			n := uint64(op >> 2)
			switch op % 4 {
			case 0, 1:
				size := v % 1024
				if op%4 == 1 {
					size = v*64 + n
					if n == 63 {
						size = math.MaxUint64
					}
				}
				want, fits := bestFit(freeExtents(a), size)
				off, err := a.Alloc(size)
				switch {
				case size == 0 || size > a.Capacity():
					if !errors.Is(err, ErrBadSize) {
						t.Fatalf("Alloc(%d) on capacity %d = %d, %v; want ErrBadSize", size, a.Capacity(), off, err)
					}
				case !fits:
					if !errors.Is(err, ErrNotEnoughMemory) {
						t.Fatalf("Alloc(%d) = %d, %v; want ErrNotEnoughMemory", size, off, err)
					}
				case err != nil || off != want:
					t.Fatalf("Alloc(%d) = %d, %v; best fit is %d", size, off, err, want)
				default:
					if off+roundUp(size) > a.Capacity() {
						t.Fatalf("Alloc(%d) = %d, past capacity %d", size, off, a.Capacity())
					}
					live[off] = roundUp(size)
					offs = append(offs, off)
				}
			case 2:
				if len(offs) == 0 || n == 63 {
					off := v * 8
					if _, ok := live[off]; ok {
						off++
					}
					if err := a.Free(off); !errors.Is(err, ErrUnknownOffset) {
						t.Fatalf("Free(%d) of no allocation = %v, want ErrUnknownOffset", off, err)
					}
					break
				}
				i := int(v % uint64(len(offs)))
				if err := a.Free(offs[i]); err != nil {
					t.Fatalf("Free(%d): %v", offs[i], err)
				}
				delete(live, offs[i])
				offs[i] = offs[len(offs)-1]
				offs = offs[:len(offs)-1]
			case 3:
				if len(offs) == 0 {
					break
				}
				off := offs[v%uint64(len(offs))]
				size := live[off]
				newSize := size * n / 63
				if n == 63 {
					newSize = size + 1
				}
				err := a.Shrink(off, newSize)
				if newSize == 0 || newSize > size {
					if !errors.Is(err, ErrBadSize) {
						t.Fatalf("Shrink(%d, %d) of %d bytes = %v, want ErrBadSize", off, newSize, size, err)
					}
					break
				}
				if err != nil {
					t.Fatalf("Shrink(%d, %d) of %d bytes: %v", off, newSize, size, err)
				}
				live[off] = roundUp(newSize)
			}
			checkInvariants(t, a, live)
		}
		for _, off := range offs {
			if err := a.Free(off); err != nil {
				t.Fatalf("Free(%d): %v", off, err)
			}
			delete(live, off)
		}
		checkInvariants(t, a, live)
		if a.Used() != 0 {
			t.Fatalf("Used() = %d after freeing everything", a.Used())
		}
		if a.Capacity() > 0 {
			if off, err := a.Alloc(a.Capacity()); err != nil || off != 0 {
				t.Fatalf("Alloc(capacity) after freeing everything = %d, %v", off, err)
			}
		}
	})
}
