package alloc

// extentKey orders free extents by size, then by offset, so that the first key
// not less than {size, 0} is the best fit with the lowest address.
type extentKey struct {
	size, off uint64
}

func (k extentKey) less(o extentKey) bool {
	return k.size < o.size || (k.size == o.size && k.off < o.off)
}

// treapNode is one node of sizeTree. Children are indexes into sizeTree.nodes;
// index 0 is the empty tree.
type treapNode struct {
	key         extentKey
	prio        uint32
	left, right int32
}

// sizeTree is a treap of distinct extentKeys. Nodes live in one slice and
// refer to each other by index, so the garbage collector has no pointers to
// trace however many free extents there are. Expected depth is O(log n);
// priorities come from a fixed-seed generator, so behavior is reproducible.
type sizeTree struct {
	nodes []treapNode // nodes[0] is the nil sentinel
	spare []int32     // indexes of deleted nodes, reused first
	root  int32
	rng   uint64
	count int
}

func newSizeTree() sizeTree {
	return sizeTree{nodes: make([]treapNode, 1), rng: 0x9e3779b97f4a7c15}
}

// Len returns the number of keys in the tree.
func (t *sizeTree) Len() int { return t.count }

func (t *sizeTree) nextPrio() uint32 {
	// xorshift64*
	t.rng ^= t.rng >> 12
	t.rng ^= t.rng << 25
	t.rng ^= t.rng >> 27
	return uint32((t.rng * 2685821657736338717) >> 32)
}

// Insert adds k, which must not already be in the tree.
func (t *sizeTree) Insert(k extentKey) {
	var n int32
	if l := len(t.spare); l > 0 {
		n = t.spare[l-1]
		t.spare = t.spare[:l-1]
	} else {
		t.nodes = append(t.nodes, treapNode{})
		n = int32(len(t.nodes) - 1)
	}
	t.nodes[n] = treapNode{key: k, prio: t.nextPrio()}
	t.root = t.insert(t.root, n)
	t.count++
}

func (t *sizeTree) insert(root, n int32) int32 {
	if root == 0 {
		return n
	}
	if t.nodes[n].prio > t.nodes[root].prio {
		l, r := t.split(root, t.nodes[n].key)
		t.nodes[n].left, t.nodes[n].right = l, r
		return n
	}
	if t.nodes[n].key.less(t.nodes[root].key) {
		t.nodes[root].left = t.insert(t.nodes[root].left, n)
	} else {
		t.nodes[root].right = t.insert(t.nodes[root].right, n)
	}
	return root
}

// split divides root into the keys less than k and the keys not less than k.
func (t *sizeTree) split(root int32, k extentKey) (less, rest int32) {
	if root == 0 {
		return 0, 0
	}
	if t.nodes[root].key.less(k) {
		l, r := t.split(t.nodes[root].right, k)
		t.nodes[root].right = l
		return root, r
	}
	l, r := t.split(t.nodes[root].left, k)
	t.nodes[root].left = r
	return l, root
}

// merge joins a and b, where every key of a is less than every key of b.
func (t *sizeTree) merge(a, b int32) int32 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case t.nodes[a].prio > t.nodes[b].prio:
		t.nodes[a].right = t.merge(t.nodes[a].right, b)
		return a
	default:
		t.nodes[b].left = t.merge(a, t.nodes[b].left)
		return b
	}
}

// Delete removes k and reports whether it was present.
func (t *sizeTree) Delete(k extentKey) bool {
	link := &t.root
	for n := t.root; n != 0; {
		nk := t.nodes[n].key
		switch {
		case k.less(nk):
			link = &t.nodes[n].left
		case nk.less(k):
			link = &t.nodes[n].right
		default:
			// merge never grows t.nodes, so link stays valid.
			*link = t.merge(t.nodes[n].left, t.nodes[n].right)
			t.nodes[n] = treapNode{}
			t.spare = append(t.spare, n)
			t.count--
			return true
		}
		n = *link
	}
	return false
}

// Ceil returns the smallest key not less than k.
func (t *sizeTree) Ceil(k extentKey) (extentKey, bool) {
	best := int32(0)
	for n := t.root; n != 0; {
		if t.nodes[n].key.less(k) {
			n = t.nodes[n].right
		} else {
			best = n
			n = t.nodes[n].left
		}
	}
	return t.nodes[best].key, best != 0
}

// Max returns the largest key.
func (t *sizeTree) Max() (extentKey, bool) {
	n := t.root
	if n == 0 {
		return extentKey{}, false
	}
	for t.nodes[n].right != 0 {
		n = t.nodes[n].right
	}
	return t.nodes[n].key, true
}
