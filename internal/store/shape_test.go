package store

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// TestShapesBuildWhatTheTextDoes builds each tree twice, the second time
// with other blobs, id and signature, from its kept shape where one was kept,
// and once more without any kept shape: both must make the same objects, or
// fail alike. Trees of other kinds must keep none.
func TestShapesBuildWhatTheTextDoes(t *testing.T) {
	s := newStore(t)
	first := []ids.ObjectID{ids.BlobBit | 11, ids.BlobBit | 12}
	second := []ids.ObjectID{ids.BlobBit | 21, ids.BlobBit | 22}
	for _, tc := range []struct {
		name, tree string
		blobs      []ids.ObjectID // the second build's blobs
		kept       bool           // the first build keeps a shape
	}{
		{"tensor", `{"typename":"vineyard::Tensor<double>","shape_":"[128]","partition_index_":"[]",` +
			`"order_":"\"C\"","value_type_":"float","value_type_meta_":"<f8","nbytes":1024,"buffer_":{"inline":0}}`,
			second, true},
		{"members by position, a key twice, a signature", `{"typename":"T","b":{"inline":1},"a":{"inline":0},` +
			`"x":1,"x":2,"signature":7,"é":"\u00e9","global":true}`, second, true},
		{"no member", `{"typename":"vineyard::Scalar","value_":"1"}`, second, true},
		{"a member with more than its position", `{"typename":"T","a":{"inline":0,"typename":"U","id":"o1"}}`,
			second, true},
		{"too few blobs the second time", `{"typename":"T","a":{"inline":1}}`, second[:1], true},
		{"a new member", `{"typename":"T","a":{"typename":"U","k":"v"},"b":{"inline":0}}`, second, false},
		{"a member by id", `{"typename":"T","b":{"inline":0},"a":{"id":"o0000000000000001"}}`, second, false},
		{"a position past the blobs", `{"typename":"T","a":{"inline":2}}`, second, false},
		{"not a tree", `{"typename":"T",`, second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.shapes = nil
			_, _ = s.build.buildTreeLocked(json.RawMessage(tc.tree), first, 101, 101)
			if kept := s.shapes[tc.tree] != nil; kept != tc.kept {
				t.Fatalf("shape kept: %v, want %v", kept, tc.kept)
			}
			got, gotErr := s.build.buildTreeLocked(json.RawMessage(tc.tree), tc.blobs, 202, 303)
			s.shapes = nil
			want, wantErr := s.build.buildTreeLocked(json.RawMessage(tc.tree), tc.blobs, 202, 303)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Fatalf("error from the shape %v, from the text %v", gotErr, wantErr)
			}
			// A tree that kept no shape went through the text both times, and
			// the ids of its new members differ.
			if tc.kept && gotErr == nil && got[len(got)-1].fromShape == nil {
				t.Fatal("an object built from a shape does not know it")
			}
			for _, o := range append(got, want...) {
				o.fromShape = nil // which shape, by pointer: the two builds' differ
			}
			if tc.kept && !reflect.DeepEqual(got, want) {
				t.Fatalf("from the shape:\n%s\nfrom the text:\n%s", describe(got), describe(want))
			}
		})
	}
}

// describe prints built objects for a failure message.
func describe(objs []*object) string {
	out := ""
	for _, o := range objs {
		out += o.id.String() + " {" + string(o.encoded) + "} members "
		for _, m := range o.members {
			out += m.key + "=" + m.id.String() + " "
		}
		out += "\n"
	}
	return out
}

// TestShapesAreBounded: a store that sees more tree texts than maxShapes
// keeps at most that many.
func TestShapesAreBounded(t *testing.T) {
	s := newStore(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range 3 * maxShapes {
		tree := `{"typename":"T","n":` + string(rune('0'+i%10)) + `,"i":"` + ids.ObjectID(i).String() + `"}`
		if _, err := s.build.buildTreeLocked(json.RawMessage(tree), []ids.ObjectID{}, 0, 0); err != nil {
			t.Fatal(err)
		}
		if len(s.shapes) > maxShapes {
			t.Fatalf("%d shapes kept after %d texts", len(s.shapes), i+1)
		}
	}
}
