package alloc

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func cmpKey(x, y extentKey) int {
	switch {
	case x.less(y):
		return -1
	case y.less(x):
		return 1
	}
	return 0
}

// TestSizeTree checks the treap against a sorted slice.
func TestSizeTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tr := newSizeTree()
	var model []extentKey
	randKey := func() extentKey {
		return extentKey{size: uint64(rng.IntN(64)), off: uint64(rng.IntN(256))}
	}
	for step := range 50000 {
		k := randKey()
		i, found := slices.BinarySearchFunc(model, k, cmpKey)
		switch rng.IntN(3) {
		case 0:
			if !found {
				tr.Insert(k)
				model = slices.Insert(model, i, k)
			}
		case 1:
			if got := tr.Delete(k); got != found {
				t.Fatalf("step %d: Delete(%v) = %v, want %v", step, k, got, found)
			}
			if found {
				model = slices.Delete(model, i, i+1)
			}
		case 2:
			got, ok := tr.Ceil(k)
			if ok != (i < len(model)) || (ok && got != model[i]) {
				t.Fatalf("step %d: Ceil(%v) = %v, %v", step, k, got, ok)
			}
		}
		if tr.Len() != len(model) {
			t.Fatalf("step %d: Len() = %d, want %d", step, tr.Len(), len(model))
		}
		if m, ok := tr.Max(); ok != (len(model) > 0) || (ok && m != model[len(model)-1]) {
			t.Fatalf("step %d: Max() = %v, %v", step, m, ok)
		}
	}
	// Nodes are recycled: the slice never holds more than the peak live count.
	if len(tr.nodes)-1 > 64*256 {
		t.Fatalf("%d nodes allocated for at most %d keys", len(tr.nodes)-1, 64*256)
	}
}

// TestSizeTreeDepth checks that sequential inserts (the worst case for an
// unbalanced tree) stay shallow.
func TestSizeTreeDepth(t *testing.T) {
	tr := newSizeTree()
	const n = 100000
	for i := range n {
		tr.Insert(extentKey{size: uint64(i), off: 0})
	}
	var depth func(n int32) int
	depth = func(n int32) int {
		if n == 0 {
			return 0
		}
		return 1 + max(depth(tr.nodes[n].left), depth(tr.nodes[n].right))
	}
	// Expected depth is about 2.99·log2(n) ≈ 50 at worst; 100 means broken.
	if d := depth(tr.root); d > 100 {
		t.Fatalf("depth %d for %d sequential keys", d, n)
	}
}
