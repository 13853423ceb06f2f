package alloc

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

type extent struct{ off, size uint64 }

func freeExtents(a *Allocator) []extent {
	var out []extent
	a.FreeExtents(func(off, size uint64) { out = append(out, extent{off, size}) })
	return out
}

// checkInvariants verifies a against live, the caller's record of what it
// allocated (offset → rounded size).
func checkInvariants(t testing.TB, a *Allocator, live map[uint64]uint64) {
	t.Helper()
	var sum uint64
	all := make([]extent, 0, len(live))
	for off, size := range live {
		if off%Alignment != 0 || size%Alignment != 0 || size == 0 {
			t.Fatalf("live allocation [%d, +%d) is not %d-aligned", off, size, Alignment)
		}
		if got, ok := a.SizeOf(off); !ok || got != size {
			t.Fatalf("SizeOf(%d) = %d, %v; want %d, true", off, got, ok, size)
		}
		sum += size
		all = append(all, extent{off, size})
	}
	if a.Used() != sum {
		t.Fatalf("Used() = %d, want the sum of live sizes %d", a.Used(), sum)
	}
	if a.Live() != len(live) {
		t.Fatalf("Live() = %d, want %d", a.Live(), len(live))
	}
	free := freeExtents(a)
	var largest uint64
	for i, e := range free {
		if e.off%Alignment != 0 || e.size%Alignment != 0 || e.size == 0 {
			t.Fatalf("free extent [%d, +%d) is not %d-aligned", e.off, e.size, Alignment)
		}
		if i > 0 {
			prev := free[i-1]
			if prev.off >= e.off {
				t.Fatalf("FreeExtents not ascending: %v then %v", prev, e)
			}
			if prev.off+prev.size == e.off {
				t.Fatalf("free extents %v and %v are adjacent (not coalesced)", prev, e)
			}
		}
		largest = max(largest, e.size)
	}
	if a.LargestFree() != largest {
		t.Fatalf("LargestFree() = %d, want %d", a.LargestFree(), largest)
	}
	if a.bySize.Len() != len(free) || len(a.freeByEnd) != len(free) {
		t.Fatalf("indexes disagree: %d by size, %d by end, %d by offset",
			a.bySize.Len(), len(a.freeByEnd), len(free))
	}
	// Live and free extents must tile [0, capacity) exactly.
	all = append(all, free...)
	slices.SortFunc(all, func(x, y extent) int {
		switch {
		case x.off < y.off:
			return -1
		case x.off > y.off:
			return 1
		}
		return 0
	})
	var next uint64
	for _, e := range all {
		if e.off != next {
			t.Fatalf("extent at %d, want one at %d (overlap or gap)", e.off, next)
		}
		next = e.off + e.size
	}
	if next != a.Capacity() {
		t.Fatalf("extents end at %d, capacity is %d", next, a.Capacity())
	}
}

// bestFit is the brute-force answer Alloc(size) must give.
func bestFit(free []extent, size uint64) (uint64, bool) {
	rs := roundUp(size)
	best, found := extent{}, false
	for _, e := range free {
		if e.size >= rs && (!found || e.size < best.size) {
			best, found = e, true
		}
	}
	return best.off, found
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		capacity, want uint64
	}{
		{0, 0},
		{63, 0},
		{64, 64},
		{100, 64},
		{1 << 30, 1 << 30},
		{math.MaxUint64, math.MaxUint64 &^ 63},
	} {
		t.Run(fmt.Sprint(tc.capacity), func(t *testing.T) {
			a := New(tc.capacity)
			if a.Capacity() != tc.want {
				t.Fatalf("Capacity() = %d, want %d", a.Capacity(), tc.want)
			}
			checkInvariants(t, a, nil)
			if tc.want > 0 {
				off, err := a.Alloc(tc.want)
				if err != nil || off != 0 {
					t.Fatalf("Alloc(capacity) = %d, %v", off, err)
				}
			}
		})
	}
}

func TestAlloc(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity uint64
		sizes    []uint64
		offsets  []uint64 // want; ignored where err is set
		errIdx   int      // index of the first size that fails, or -1
		errIs    []error
	}{
		{"rounding", 1024, []uint64{1, 64, 65, 200}, []uint64{0, 64, 128, 256}, -1, nil},
		{"exact fill", 256, []uint64{128, 128}, []uint64{0, 128}, -1, nil},
		{"exhausted", 256, []uint64{128, 128, 1}, []uint64{0, 128}, 2, []error{ErrNotEnoughMemory}},
		{"zero", 256, []uint64{0}, nil, 0, []error{ErrBadSize}},
		{"over capacity", 256, []uint64{257}, nil, 0, []error{ErrBadSize, ErrNotEnoughMemory}},
		{"max uint64", 256, []uint64{math.MaxUint64}, nil, 0, []error{ErrBadSize, ErrNotEnoughMemory}},
		{"rounded over remaining", 256, []uint64{192, 65}, []uint64{0}, 1, []error{ErrNotEnoughMemory}},
		{"empty arena", 0, []uint64{1}, nil, 0, []error{ErrBadSize, ErrNotEnoughMemory}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.capacity)
			live := map[uint64]uint64{}
			for i, size := range tc.sizes {
				off, err := a.Alloc(size)
				if i == tc.errIdx {
					for _, want := range tc.errIs {
						if !errors.Is(err, want) {
							t.Fatalf("Alloc(%d) error = %v, want %v", size, err, want)
						}
					}
					break
				}
				if err != nil {
					t.Fatalf("Alloc(%d): %v", size, err)
				}
				if off != tc.offsets[i] {
					t.Fatalf("Alloc(%d) = %d, want %d", size, off, tc.offsets[i])
				}
				live[off] = roundUp(size)
				checkInvariants(t, a, live)
			}
			checkInvariants(t, a, live)
		})
	}
}

func TestNotEnoughMemoryMessage(t *testing.T) {
	a := New(1024)
	if _, err := a.Alloc(1000); err != nil {
		t.Fatal(err)
	}
	_, err := a.Alloc(100)
	want := "alloc: not enough memory: failed to allocate 100 bytes: 1024 of 1024 bytes in use"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

func TestBestFit(t *testing.T) {
	// A[0,128) B[128,384) C[384,448) D[448,576) E[576,640) F[640,832)
	// G[832,896), then free B, D and F: holes of 256@128, 128@448, 192@640
	// and the 3200-byte tail @896.
	a := New(4096)
	offs := map[string]uint64{}
	for _, s := range []struct {
		name string
		size uint64
	}{{"A", 128}, {"B", 256}, {"C", 64}, {"D", 128}, {"E", 64}, {"F", 192}, {"G", 64}} {
		off, err := a.Alloc(s.size)
		if err != nil {
			t.Fatal(err)
		}
		offs[s.name] = off
	}
	for _, n := range []string{"B", "D", "F"} {
		if err := a.Free(offs[n]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		size, want uint64
	}{
		{100, 448}, // 128-hole, exact after rounding
		{150, 640}, // 192-hole
		{129, 128}, // 256-hole, leaves 64@320
		{64, 320},  // the 64 left over beats the tail
		{64, 896},  // the tail
	} {
		got, err := a.Alloc(tc.size)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Fatalf("Alloc(%d) = %d, want %d", tc.size, got, tc.want)
		}
	}
}

func TestBestFitTiesGoToLowestOffset(t *testing.T) {
	a := New(64 * 10)
	var offs []uint64
	for range 10 {
		off, err := a.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	for _, i := range []int{7, 5, 1, 3} {
		if err := a.Free(offs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []uint64{offs[1], offs[3], offs[5], offs[7]} {
		if got, err := a.Alloc(1); err != nil || got != want {
			t.Fatalf("Alloc(1) = %d, %v; want %d", got, err, want)
		}
	}
}

func TestFreeCoalesces(t *testing.T) {
	// Five 64-byte blocks filling the arena; free them in each order and
	// check the free extents after every step.
	orders := [][]int{
		{0, 1, 2, 3, 4},
		{4, 3, 2, 1, 0},
		{1, 3, 2, 0, 4}, // 2 merges with both neighbors
		{0, 2, 4, 1, 3},
	}
	for _, order := range orders {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			a := New(5 * 64)
			live := map[uint64]uint64{}
			for i := range 5 {
				off, err := a.Alloc(64)
				if err != nil || off != uint64(i)*64 {
					t.Fatalf("Alloc = %d, %v", off, err)
				}
				live[off] = 64
			}
			for _, i := range order {
				if err := a.Free(uint64(i) * 64); err != nil {
					t.Fatal(err)
				}
				delete(live, uint64(i)*64)
				checkInvariants(t, a, live)
			}
			if got := freeExtents(a); !slices.Equal(got, []extent{{0, 320}}) {
				t.Fatalf("free extents %v, want one [0, 320)", got)
			}
		})
	}
}

func TestFreeErrors(t *testing.T) {
	a := New(1024)
	off, err := a.Alloc(128)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		off  uint64
	}{
		{"never allocated", 512},
		{"interior", off + 64},
		{"unaligned", off + 1},
		{"beyond capacity", 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := a.Free(tc.off); !errors.Is(err, ErrUnknownOffset) {
				t.Fatalf("Free(%d) = %v, want ErrUnknownOffset", tc.off, err)
			}
			checkInvariants(t, a, map[uint64]uint64{off: 128})
		})
	}
	if err := a.Free(off); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(off); !errors.Is(err, ErrUnknownOffset) {
		t.Fatalf("double Free = %v, want ErrUnknownOffset", err)
	}
	checkInvariants(t, a, nil)
}

func TestShrink(t *testing.T) {
	for _, tc := range []struct {
		name          string
		size, newSize uint64
		want          uint64 // rounded size afterwards
		err           error
	}{
		{"to one unit", 1024, 1, 64, nil},
		{"same rounded", 1000, 980, 1024, nil},
		{"exact current", 1024, 1024, 1024, nil},
		{"half", 1024, 512, 512, nil},
		{"unaligned", 1024, 513, 576, nil},
		{"zero", 1024, 0, 1024, ErrBadSize},
		{"grow", 1024, 1025, 1024, ErrBadSize},
		{"grow within rounding", 1000, 1010, 1024, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(4096)
			// A neighbor on the left and a free extent on the right, so the
			// tail must coalesce to the right.
			left, _ := a.Alloc(64)
			off, err := a.Alloc(tc.size)
			if err != nil {
				t.Fatal(err)
			}
			err = a.Shrink(off, tc.newSize)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Shrink(%d, %d) = %v, want %v", off, tc.newSize, err, tc.err)
			}
			if got, _ := a.SizeOf(off); got != tc.want {
				t.Fatalf("SizeOf after Shrink = %d, want %d", got, tc.want)
			}
			checkInvariants(t, a, map[uint64]uint64{left: 64, off: tc.want})
		})
	}
	t.Run("unknown offset", func(t *testing.T) {
		a := New(4096)
		if err := a.Shrink(0, 64); !errors.Is(err, ErrUnknownOffset) {
			t.Fatalf("Shrink = %v, want ErrUnknownOffset", err)
		}
	})
	t.Run("tail before a live neighbor", func(t *testing.T) {
		a := New(256)
		off, _ := a.Alloc(128)
		right, _ := a.Alloc(128)
		if err := a.Shrink(off, 64); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, a, map[uint64]uint64{off: 64, right: 128})
		if got := freeExtents(a); !slices.Equal(got, []extent{{64, 64}}) {
			t.Fatalf("free extents %v, want [64, 128)", got)
		}
	})
}

func TestFreeExtentsSnapshot(t *testing.T) {
	a := New(64 * 8)
	var offs []uint64
	for range 8 {
		off, _ := a.Alloc(64)
		offs = append(offs, off)
	}
	for _, i := range []int{6, 0, 2, 4} {
		_ = a.Free(offs[i])
	}
	var seen []uint64
	a.FreeExtents(func(off, size uint64) {
		seen = append(seen, off)
		// Changing the allocator from fn must not disturb the walk.
		if _, err := a.Alloc(64); err != nil {
			t.Fatal(err)
		}
	})
	if want := []uint64{offs[0], offs[2], offs[4], offs[6]}; !slices.Equal(seen, want) {
		t.Fatalf("FreeExtents offsets %v, want %v", seen, want)
	}
}

func TestRandomAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := New(1 << 20)
	live := map[uint64]uint64{}
	var offs []uint64
	for step := range 20000 {
		switch r := rng.IntN(10); {
		case r < 5 || len(offs) == 0:
			size := uint64(rng.IntN(8192) + 1)
			want, fits := bestFit(freeExtents(a), size)
			off, err := a.Alloc(size)
			if fits != (err == nil) || (fits && off != want) {
				t.Fatalf("step %d: Alloc(%d) = %d, %v; best fit %d, %v", step, size, off, err, want, fits)
			}
			if err == nil {
				live[off] = roundUp(size)
				offs = append(offs, off)
			}
		case r < 9:
			i := rng.IntN(len(offs))
			if err := a.Free(offs[i]); err != nil {
				t.Fatal(err)
			}
			delete(live, offs[i])
			offs[i] = offs[len(offs)-1]
			offs = offs[:len(offs)-1]
		default:
			off := offs[rng.IntN(len(offs))]
			n := uint64(rng.Int64N(int64(live[off]))) + 1
			if err := a.Shrink(off, n); err != nil {
				t.Fatal(err)
			}
			live[off] = roundUp(n)
		}
		if step%97 == 0 {
			checkInvariants(t, a, live)
		}
	}
	checkInvariants(t, a, live)
}

func TestSplit(t *testing.T) {
	a := New(4096)
	left, _ := a.Alloc(64)
	off, _ := a.Alloc(1024)
	for _, tc := range []struct {
		name   string
		offset uint64
		at     uint64
		err    error
	}{
		{"unknown offset", 32, 96, ErrUnknownOffset},
		{"at the start", off, off, ErrBadSize},
		{"at the end", off, off + 1024, ErrBadSize},
		{"past the end", off, off + 2048, ErrBadSize},
		{"unaligned", off, off + 100, ErrBadSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := a.Split(tc.offset, tc.at); !errors.Is(err, tc.err) {
				t.Fatalf("Split(%d, %d) = %v, want %v", tc.offset, tc.at, err, tc.err)
			}
			checkInvariants(t, a, map[uint64]uint64{left: 64, off: 1024})
		})
	}
	// Split in three, free the middle, then the rest: everything coalesces.
	if err := a.Split(off, off+256); err != nil {
		t.Fatal(err)
	}
	if err := a.Split(off+256, off+512); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a, map[uint64]uint64{left: 64, off: 256, off + 256: 256, off + 512: 512})
	if err := a.Free(off + 256); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a, map[uint64]uint64{left: 64, off: 256, off + 512: 512})
	if err := a.Free(off + 512); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(off); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a, map[uint64]uint64{left: 64})
	if got := freeExtents(a); !slices.Equal(got, []extent{{64, 4096 - 64}}) {
		t.Fatalf("free extents %v, want one of everything past left", got)
	}
}
