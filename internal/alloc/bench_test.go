package alloc

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAllocFree measures one Free of a random live allocation plus one
// Alloc of a random size, with a steady number of live allocations.
func BenchmarkAllocFree(b *testing.B) {
	for _, live := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 6))
			size := func() uint64 { return uint64(rng.IntN(16384) + 1) }
			// Twice the expected footprint, so fragmentation never runs out.
			a := New(uint64(live) * 16384)
			offs := make([]uint64, live)
			for i := range offs {
				off, err := a.Alloc(size())
				if err != nil {
					b.Fatal(err)
				}
				offs[i] = off
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				i := rng.IntN(live)
				if err := a.Free(offs[i]); err != nil {
					b.Fatal(err)
				}
				off, err := a.Alloc(size())
				if err != nil {
					b.Fatal(err)
				}
				offs[i] = off
			}
		})
	}
}
