package tree

import (
	"slices"
	"strconv"
	"strings"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// BlobTypename is the typename of blobs in metadata trees.
const BlobTypename = "vineyard::Blob"

// Field is one entry of a tree object: its key and its raw JSON value.
type Field struct {
	Key string
	Raw []byte
}

// compareKeys orders fields by key, in byte order.
func compareKeys(a, b Field) int { return strings.Compare(a.Key, b.Key) }

// Split orders the entries of one object, all (in the order written), as
// the canonical text writes them: it sorts all by key in place (stably),
// keeps the last value of a repeated key, and returns the scalar fields,
// all[:n], and the members (values that are objects, copied out), both in
// key order. The scalar values are left as they are (Canon makes them
// canonical).
func Split(all []Field) (fields, members []Field) {
	slices.SortStableFunc(all, compareKeys)
	n := 0
	for i, f := range all {
		if i+1 < len(all) && all[i+1].Key == f.Key {
			continue // a later value of the same key counts
		}
		if len(f.Raw) > 0 && f.Raw[0] == '{' {
			members = append(members, f)
			continue
		}
		all[n] = f
		n++
	}
	clear(all[n:])
	return all[:n], members
}

// Canon makes the value of every field canonical (AppendValue), in place;
// the values already canonical, most of them, keep their memory.
func Canon(fields []Field) {
	for i, f := range fields {
		if !IsCanonicalValue(f.Raw) {
			fields[i].Raw = AppendValue(nil, f.Raw)
		}
	}
}

// Find returns where key is or would be in fields (sorted by key), and
// whether it is there.
func Find(fields []Field, key string) (int, bool) {
	return slices.BinarySearchFunc(fields, key, func(f Field, k string) int { return strings.Compare(f.Key, k) })
}

// AppendFieldKey appends what precedes the value of the i-th field of an
// object, key, inside its braces: a comma unless it is the first, the
// quoted key and a colon.
func AppendFieldKey(dst []byte, i int, key string) []byte {
	if i > 0 {
		dst = append(dst, ',')
	}
	return append(AppendString(dst, key), ':')
}

// AppendFields appends fields (sorted, canonical values) as an object's
// text writes them inside its braces: "k":v,...
func AppendFields(dst []byte, fields []Field) []byte {
	for i, f := range fields {
		dst = append(AppendFieldKey(dst, i, f.Key), f.Raw...)
	}
	return dst
}

// AppendBlob appends the tree of a blob: its id, size and the instance it
// lives on, in the blob's fixed field order.
func AppendBlob(dst []byte, id ids.ObjectID, size, instance uint64) []byte {
	dst = append(dst, `{"id":"`...)
	dst = id.AppendText(dst)
	dst = append(dst, `","typename":"vineyard::Blob","length":`...)
	dst = strconv.AppendUint(dst, size, 10)
	dst = append(dst, `,"nbytes":`...)
	dst = strconv.AppendUint(dst, size, 10)
	dst = append(dst, `,"instance_id":`...)
	dst = strconv.AppendUint(dst, instance, 10)
	return append(dst, `,"transient":true}`...)
}

// blobOrder is the order of a blob's own fields in its tree (AppendBlob).
var blobOrder = []string{"id", "typename", "length", "nbytes", "instance_id", "transient"}

// DaemonFields are the scalar fields the daemon sets on every object it
// stores (id, signature unless given, instance_id, transient, nbytes
// unless given); a tree may not name a member so, or its text would hold
// the key twice.
var DaemonFields = []string{"id", "instance_id", "nbytes", "signature", "transient"}

// IsDaemonField reports whether key is one of DaemonFields.
func IsDaemonField(key string) bool {
	switch key {
	case "id", "instance_id", "nbytes", "signature", "transient":
		return true
	}
	return false
}
