package arrowc

/*
#include "cabi.h"
*/
import "C"

import (
	"encoding/binary"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/cdata"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/tree"
)

// schemaField reads the caller's ArrowSchema at p into a field, without
// taking it: the caller keeps it and releases it.
func schemaField(p unsafe.Pointer) (*field, error) { return readSchema((*C.struct_ArrowSchema)(p), 0) }

// readSchema is schemaField of s, nested depth deep.
func readSchema(s *C.struct_ArrowSchema, depth int) (*field, error) {
	switch {
	case s == nil:
		return nil, errorf(ErrInvalidArgument, "ArrowSchema is NULL")
	case s.release == nil:
		return nil, errorf(ErrInvalidArgument, "ArrowSchema is released")
	case depth > maxDepth:
		return nil, errorf(ErrArrow, "ArrowSchema nests deeper than %d", maxDepth)
	case s.format == nil:
		return nil, errorf(ErrArrow, "ArrowSchema has no format")
	case s.n_children < 0 || s.n_children > 1<<20 || (s.n_children > 0 && s.children == nil):
		return nil, errorf(ErrArrow, "ArrowSchema has %d children at %p", int64(s.n_children), s.children)
	}
	f := &field{format: C.GoString(s.format), flags: int64(s.flags)}
	if s.name != nil {
		f.name = C.GoString(s.name)
	}
	var err error
	if f.metadata, err = readMetadata(s.metadata); err != nil {
		return nil, err
	}
	for _, c := range unsafe.Slice(s.children, s.n_children) {
		cf, err := readSchema(c, depth+1)
		if err != nil {
			return nil, err
		}
		f.children = append(f.children, cf)
	}
	if s.dictionary != nil {
		if f.dict, err = readSchema(s.dictionary, depth+1); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// readMetadata decodes the C data interface encoding of metadata.
func readMetadata(p *C.char) ([]kv, error) {
	if p == nil {
		return nil, nil
	}
	bad := errorf(ErrArrow, "ArrowSchema has malformed metadata")
	readInt := func(at uintptr) int {
		return int(int32(binary.NativeEndian.Uint32(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(p), at)), 4))))
	}
	n := readInt(0)
	if n < 0 || n > 1<<20 {
		return nil, bad
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]kv, n)
	at := uintptr(4)
	for i := range out {
		var pair [2]string
		for j := range pair {
			l := readInt(at)
			if l < 0 {
				return nil, bad
			}
			pair[j] = C.GoStringN((*C.char)(unsafe.Add(unsafe.Pointer(p), at+4)), C.int(l))
			at += 4 + uintptr(l)
		}
		out[i] = kv{pair[0], pair[1]}
	}
	return out, nil
}

// importArray moves a caller's ArrowArray of type f into arrow-go (zero
// copy). The caller's struct is released (marked so) also on failure.
func importArray(a *C.struct_ArrowArray, f *field) (arr arrow.Array, err error) {
	defer C.arrowc_release_array(a) // a no-op once arrow-go moved it
	defer func() {
		// arrow-go panics on some inconsistent arrays (a sparse union child
		// shorter than the union): that is bad input, not a fault of ours.
		if r := recover(); r != nil {
			arr, err = nil, errorf(ErrArrow, "cannot import the ArrowArray: %v", r)
		}
	}()
	dt, err := f.dataType()
	if err != nil {
		return nil, err
	}
	arr, err = cdata.ImportCArrayWithType((*cdata.CArrowArray)(unsafe.Pointer(a)), dt)
	if err != nil {
		return nil, errorf(ErrArrow, "cannot import the ArrowArray: %v", err)
	}
	return arr, nil
}

// plan collects the buffers of the arrays to store, then stores them.
// srcs[i] is copied into blob i, except when wide[i]: then it holds 32-bit
// offsets, written to the blob widened to 64 bits (for upstream's reader).
type plan struct {
	srcs [][]byte
	wide []bool
}

func (p *plan) add(b *memory.Buffer) int {
	if b == nil || b.Len() == 0 {
		return -1
	}
	p.srcs = append(p.srcs, b.Bytes())
	p.wide = append(p.wide, false)
	return len(p.srcs) - 1
}

// addWide records the 32-bit offsets of a string or list array (source
// buffer src) for a blob of them widened to 64 bits, and returns it as
// node.wide does (0: none, for an array without offsets).
func (p *plan) addWide(src int) int {
	if src < 0 {
		return 0
	}
	p.srcs = append(p.srcs, p.srcs[src][:len(p.srcs[src])&^3])
	p.wide = append(p.wide, true)
	return len(p.srcs)
}

// widen writes the 32-bit offsets src into dst (twice as long) as 64-bit
// ones.
func widen(dst, src []byte) {
	n := len(src) / 4
	if n == 0 {
		return
	}
	if uintptr(unsafe.Pointer(&src[0]))%4 != 0 || uintptr(unsafe.Pointer(&dst[0]))%8 != 0 {
		for i := 0; i < n; i++ { // not aligned: never for Arrow buffers and blobs
			v := int64(int32(binary.NativeEndian.Uint32(src[4*i:])))
			binary.NativeEndian.PutUint64(dst[8*i:], uint64(v))
		}
		return
	}
	in := unsafe.Slice((*int32)(unsafe.Pointer(&src[0])), n)
	out := unsafe.Slice((*int64)(unsafe.Pointer(&dst[0])), n)
	for i, v := range in {
		out[i] = int64(v)
	}
}

// node records the array data d of type f (its buffers to copy).
func (p *plan) node(f *field, d arrow.ArrayData) (*node, error) {
	n := &node{f: f, dt: d.DataType(), length: int64(d.Len()), nulls: nullCount(d), offset: int64(d.Offset())}
	l := layoutOf(n.dt)
	bufs := d.Buffers()
	switch {
	case l.goNone:
		bufs = nil
	case l.goSlot0 && len(bufs) > 0:
		bufs = bufs[1:]
	}
	for i, b := range bufs {
		if i == 0 && len(l.specs) > 0 && l.specs[0].kind == bufValidity && n.nulls == 0 {
			n.bufs = append(n.bufs, -1) // no nulls: no bitmap to store
			continue
		}
		n.bufs = append(n.bufs, p.add(b))
	}
	if id := n.dt.ID(); (id == arrow.STRING || id == arrow.LIST) && len(n.bufs) > 1 {
		n.wide = p.addWide(n.bufs[1])
	}
	kids := d.Children()
	if len(kids) != len(f.children) {
		return nil, errorf(ErrArrow, "array of format %q has %d children, its schema %d", f.format, len(kids), len(f.children))
	}
	for i, c := range kids {
		cn, err := p.node(f.children[i], c)
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, cn)
	}
	if n.dt.ID() == arrow.DICTIONARY {
		dict := d.Dictionary()
		if f.dict == nil {
			return nil, errorf(ErrArrow, "array of format %q has a dictionary its schema lacks", f.format)
		}
		dn, err := p.node(f.dict, dict)
		if err != nil {
			return nil, err
		}
		n.dict = dn
	}
	return n, nil
}

// nullCount returns the null count of d, counting the validity bitmap when
// the producer left it unknown (-1).
func nullCount(d arrow.ArrayData) int64 {
	if n := d.NullN(); n >= 0 {
		return int64(n)
	}
	switch d.DataType().ID() {
	case arrow.NULL:
		return int64(d.Len())
	case arrow.SPARSE_UNION, arrow.DENSE_UNION, arrow.RUN_END_ENCODED:
		return 0
	}
	bufs := d.Buffers()
	if len(bufs) == 0 || bufs[0] == nil || bufs[0].Len() == 0 {
		return 0
	}
	return int64(d.Len() - bitutil.CountSetBits(bufs[0].Bytes(), d.Offset(), d.Len()))
}

// batch records a struct array as a record batch: its children become the
// columns, sliced to the struct's rows.
func (p *plan) batch(f *field, d arrow.ArrayData) (*node, error) {
	if f.format != "+s" {
		return nil, errorf(ErrInvalidArgument, "a record batch must be a struct array, not of format %q", f.format)
	}
	if n := nullCount(d); n != 0 {
		return nil, errorf(ErrArrow, "a record batch cannot have nulls at the top level (%d)", n)
	}
	n := &node{f: f, dt: d.DataType(), length: int64(d.Len()), bufs: []int{-1}}
	var sliced []arrow.ArrayData
	defer func() {
		for _, s := range sliced {
			s.Release()
		}
	}()
	for i, c := range d.Children() {
		if c.Offset() != 0 || d.Offset() != 0 || c.Len() != d.Len() {
			c = array.NewSliceData(c, int64(d.Offset()), int64(d.Offset()+d.Len()))
			sliced = append(sliced, c)
		}
		cn, err := p.node(f.children[i], c)
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, cn)
	}
	return n, nil
}

// store creates the blobs (one round trip), copies every buffer once, and
// creates the whole tree with the blobs sealed (one round trip).
func (p *plan) store(c *client.Client, o *object, empty *node, extra []byte) (ids.ObjectID, error) {
	sizes := make([]uint64, len(p.srcs))
	for i, s := range p.srcs {
		sizes[i] = uint64(len(s))
		if p.wide[i] {
			sizes[i] *= 2
		}
	}
	bufs, err := c.CreateBuffers(sizes)
	if err != nil {
		return 0, err
	}
	blobs := make([]ids.ObjectID, len(bufs))
	dsts := make([][]byte, len(bufs))
	for i, b := range bufs {
		blobs[i], dsts[i] = b.ID, b.Data
	}
	copyAll(dsts, p.srcs, p.wide, !c.IsRPC())
	enc := &encoder{blobs: blobs, sizes: sizes}
	id, _, err := c.CreateMetadata(enc.object(o, empty, extra), blobs)
	if err != nil {
		for _, b := range blobs {
			_ = c.Abort(b)
		}
		return 0, err
	}
	if len(blobs) > 0 {
		// Drop the references sealing took (no round trip: the release is
		// deferred): a put keeps no view, and holding them would keep the
		// memory after a delete.
		_ = c.Release(id)
	}
	return id, nil
}

// Copies split over goroutines above parallelCopyMin bytes, in pieces of at
// least copyPiece bytes: the first touch of fresh arena pages is expensive
// (page faults), and cores fault in parallel.
const (
	parallelCopyMin = 8 << 20
	copyPiece       = 2 << 20
)

// pretouchMin is the smallest copy whose destination is mapped first
// (client.Pretouch).
const pretouchMin = 1 << 20

// fill copies (or widens) src into dst; with touch (dst is arena memory, not
// a remote client's buffer), a large dst is mapped first, 16 pages per fault.
func fill(dst, src []byte, wide, touch bool) {
	if touch && len(dst) >= pretouchMin {
		_ = client.Pretouch(uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uint64(len(dst))) // only speed is at stake
	}
	if wide {
		widen(dst, src)
	} else {
		copy(dst, src)
	}
}

// copyAll copies srcs[i] into dsts[i], or widens it when wide[i] (wide may
// be nil: none); touch as for fill.
func copyAll(dsts, srcs [][]byte, wide []bool, touch bool) {
	isWide := func(i int) bool { return i < len(wide) && wide[i] }
	var total int
	for i, s := range srcs {
		total += len(s)
		if isWide(i) {
			total += len(s) // written twice over
		}
	}
	workers := min(runtime.GOMAXPROCS(0), total/copyPiece)
	if total < parallelCopyMin || workers < 2 {
		for i := range srcs {
			fill(dsts[i], srcs[i], isWide(i), touch)
		}
		return
	}
	type piece struct {
		dst, src []byte
		wide     bool
	}
	pieces := make(chan piece, 64)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pc := range pieces {
				fill(pc.dst, pc.src, pc.wide, touch)
			}
		}()
	}
	for i, s := range srcs {
		w := isWide(i)
		step := copyPiece
		if w {
			step /= 2 // copyPiece bytes written per piece; a multiple of 4
		}
		for off := 0; off < len(s); off += step {
			end := min(off+step, len(s))
			if w {
				pieces <- piece{dsts[i][2*off : 2*end], s[off:end], true}
			} else {
				pieces <- piece{dsts[i][off:end], s[off:end], false}
			}
		}
	}
	close(pieces)
	wg.Wait()
}

// emptyOf returns an array of type f with no rows, for the schema of a table
// (or the type of a chunked array) that has no batches (chunks).
func (p *plan) emptyOf(f *field, batch bool) (n *node, err error) {
	dt, err := f.dataType()
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil { // arrow-go cannot make every type empty
			n, err = nil, errorf(ErrNotImplemented, "cannot store an empty %s: %v", dt, r)
		}
	}()
	arr := array.MakeArrayOfNull(memory.DefaultAllocator, dt, 0)
	defer arr.Release()
	if batch {
		return p.batch(f, arr.Data())
	}
	return p.node(f, arr.Data())
}

// reserved are the root keys the layout writes; extra fields may not use them.
var reserved = []string{"typename", "id", "signature", "instance_id", "transient", "nbytes", "global",
	keyFormat, keyName, keyFlags, keyMetadata, keyMetadata64, keyLength, keyNullCount, keyOffset,
	keyDictionary, keySchema, keyType, keySchemaMeta, keySchemaMeta4, "row_num_", "column_num_",
	"num_rows_", "num_columns_", "batch_num_"}

// extraFields checks extra (a JSON object of scalar fields, or empty) and
// returns its body, to splice into the root of the stored tree.
func extraFields(extra []byte) ([]byte, error) {
	if len(extra) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(extra, &m); err != nil || m == nil {
		return nil, errorf(ErrInvalidArgument, "extra fields must be a JSON object")
	}
	var body []byte
	for k, v := range m {
		for _, r := range reserved {
			if k == r {
				return nil, errorf(ErrInvalidArgument, "extra field %q is reserved", k)
			}
		}
		for _, prefix := range indexedKeys {
			if strings.HasPrefix(k, prefix) {
				return nil, errorf(ErrInvalidArgument, "extra field %q is reserved", k)
			}
		}
		if t := strings.TrimLeft(string(v), " \t\r\n"); t == "" || t[0] == '{' {
			return nil, errorf(ErrInvalidArgument, "extra field %q must not be an object", k)
		}
		if len(body) > 0 {
			body = append(body, ',')
		}
		body = tree.AppendString(body, k)
		body = append(body, ':')
		body = append(body, v...)
	}
	return body, nil
}
