package arrowc

import (
	"encoding/binary"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
)

// bufKind is what one buffer of an array holds.
type bufKind uint8

const (
	bufValidity bufKind = iota // 1 bit per element, may be absent without nulls
	bufBits                    // boolean values, 1 bit per element
	bufFixed                   // width bytes per element
	bufOffsets                 // width bytes per element + 1; bounds the next buffer or the child
	bufData                    // bytes the offsets point into
)

type bufSpec struct {
	kind  bufKind
	width int64
}

// layout is how an array of a type is made of buffers, in the order of the
// Arrow C data interface (the stored order). Binary and string views add any
// number of data buffers after the fixed ones (variadic); the C interface's
// trailing buffer of their sizes is not stored (it is the blobs' lengths).
type layout struct {
	specs    []bufSpec
	variadic bool
	// goSlot0 is set for types without a validity bitmap that arrow-go still
	// gives a leading nil buffer (unions); goNone for types whose arrow-go
	// buffer list is empty (null, run-end encoded).
	goSlot0, goNone bool
}

var (
	validity = bufSpec{kind: bufValidity}
	bits     = bufSpec{kind: bufBits}
)

func fixed(w int64) bufSpec   { return bufSpec{kind: bufFixed, width: w} }
func offsets(w int64) bufSpec { return bufSpec{kind: bufOffsets, width: w} }

// layoutOf returns the layout of arrays of type dt.
func layoutOf(dt arrow.DataType) layout {
	switch t := dt.(type) {
	case *arrow.NullType, *arrow.RunEndEncodedType:
		return layout{goNone: true}
	case *arrow.BooleanType:
		return layout{specs: []bufSpec{validity, bits}}
	case *arrow.DictionaryType:
		return layoutOf(t.IndexType)
	case *arrow.StringType, *arrow.BinaryType:
		return layout{specs: []bufSpec{validity, offsets(4), {kind: bufData}}}
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		return layout{specs: []bufSpec{validity, offsets(8), {kind: bufData}}}
	case *arrow.StringViewType, *arrow.BinaryViewType:
		return layout{specs: []bufSpec{validity, fixed(int64(arrow.ViewHeaderSizeBytes))}, variadic: true}
	case *arrow.ListType, *arrow.MapType:
		return layout{specs: []bufSpec{validity, offsets(4)}}
	case *arrow.LargeListType:
		return layout{specs: []bufSpec{validity, offsets(8)}}
	case *arrow.ListViewType:
		return layout{specs: []bufSpec{validity, fixed(4), fixed(4)}}
	case *arrow.LargeListViewType:
		return layout{specs: []bufSpec{validity, fixed(8), fixed(8)}}
	case *arrow.FixedSizeListType, *arrow.StructType:
		return layout{specs: []bufSpec{validity}}
	case *arrow.SparseUnionType:
		return layout{specs: []bufSpec{fixed(1)}, goSlot0: true}
	case *arrow.DenseUnionType:
		return layout{specs: []bufSpec{fixed(1), fixed(4)}, goSlot0: true}
	case arrow.FixedWidthDataType:
		return layout{specs: []bufSpec{validity, fixed(int64(t.BitWidth() / 8))}}
	}
	return layout{}
}

// checker validates array nodes against the blobs they point into, in time
// independent of the data size: every buffer an Arrow consumer may read for
// the node's shape must lie within its blob. Offsets are checked at their
// first and last element only (a full check would read the data).
type checker struct {
	views [][]byte
}

func (c *checker) view(i int) []byte {
	if i < 0 {
		return nil
	}
	return c.views[i]
}

// check validates n and everything under it.
func (c *checker) check(n *node) error {
	l := layoutOf(n.dt)
	if len(n.bufs) != len(l.specs) && (!l.variadic || len(n.bufs) < len(l.specs)) {
		return errorf(ErrInvalidLayout, "array of type %s has %d buffers, want %d", n.dt, len(n.bufs), len(l.specs))
	}
	end := n.offset + n.length // no overflow: checked at decode
	fail := func(i int, need int64) error {
		return errorf(ErrInvalidLayout, "buffer %d of an array of type %s (offset %d, length %d) has %d bytes, needs %d",
			i, n.dt, n.offset, n.length, len(c.view(n.bufs[i])), need)
	}
	var bound int64 = -1 // the last offset, bounding the data buffer or the child
	for i, spec := range l.specs {
		b := c.view(n.bufs[i])
		var need int64
		switch spec.kind {
		case bufValidity:
			if len(b) == 0 && n.nulls == 0 {
				continue
			}
			need = (end + 7) / 8
		case bufBits:
			need = (end + 7) / 8
		case bufFixed:
			need = mulSat(end, spec.width)
		case bufOffsets:
			if len(b) == 0 && end == 0 {
				bound = 0
				continue
			}
			need = mulSat(end+1, spec.width)
			if int64(len(b)) < need {
				return fail(i, need)
			}
			first, last := offsetAt(b, n.offset, spec.width), offsetAt(b, end, spec.width)
			if first < 0 || last < first {
				return errorf(ErrInvalidLayout, "array of type %s has offsets from %d to %d", n.dt, first, last)
			}
			bound = last
			continue
		case bufData:
			need = bound
		}
		if int64(len(b)) < need {
			return fail(i, need)
		}
	}
	if n.nulls < 0 && !l.goNone {
		return errorf(ErrInvalidLayout, "array of type %s has an unknown null count", n.dt)
	}
	return c.checkChildren(n, end, bound)
}

// mulSat is a*b for non-negative a and b, saturated at the largest int64.
func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

func offsetAt(b []byte, i, width int64) int64 {
	if width == 4 {
		return int64(int32(binary.NativeEndian.Uint32(b[i*4:])))
	}
	return int64(binary.NativeEndian.Uint64(b[i*8:]))
}

// checkChildren checks the children's shapes against what the parent needs.
func (c *checker) checkChildren(n *node, end, bound int64) error {
	minLen := int64(0)
	switch t := n.dt.(type) {
	case *arrow.StructType, *arrow.SparseUnionType:
		minLen = end
	case *arrow.FixedSizeListType:
		minLen = mulSat(end, int64(t.Len()))
	case *arrow.ListType, *arrow.LargeListType, *arrow.MapType:
		minLen = bound
	case *arrow.RunEndEncodedType:
		if n.children[0].nulls != 0 {
			return errorf(ErrInvalidLayout, "run ends of a run-end encoded array have nulls")
		}
		if n.children[0].length != n.children[1].length {
			return errorf(ErrInvalidLayout, "a run-end encoded array has %d run ends for %d values",
				n.children[0].length, n.children[1].length)
		}
	case *arrow.DictionaryType:
		if n.dict == nil {
			return errorf(ErrInvalidLayout, "dictionary array without a dictionary")
		}
		if err := c.check(n.dict); err != nil {
			return err
		}
	}
	for _, ch := range n.children {
		if ch.length < minLen {
			return errorf(ErrInvalidLayout, "child of an array of type %s has %d elements, needs %d", n.dt, ch.length, minLen)
		}
		if err := c.check(ch); err != nil {
			return err
		}
	}
	return nil
}
