package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// TestDuplicatesCostNothing checks that a request repeating one id 10,000
// times gets the reply of one id, and one reference.
func TestDuplicatesCostNothing(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	obj := putTensor(t, ss)
	var bid ids.ObjectID
	for id := range s.blobs {
		bid = id
	}
	many := func(id ids.ObjectID) []ids.ObjectID {
		out := make([]ids.ObjectID, 10_000)
		for i := range out {
			out[i] = id
		}
		return out
	}
	one, _, err := s.GetData([]ids.ObjectID{obj})
	if err != nil {
		t.Fatal(err)
	}
	got, all, err := s.GetData(many(obj))
	if err != nil || !all || !bytes.Equal(got, one) {
		t.Fatalf("get_data of a repeated id: %d bytes (one: %d), all %v, %v", len(got), len(one), all, err)
	}
	reader := s.NewSession()
	defer reader.Close()
	content, payloads, _, err := reader.GetDataWithBuffers(many(obj))
	if err != nil || !bytes.Equal(content, one) || len(payloads) != 1 {
		t.Fatalf("get_data with buffers of a repeated id: %d bytes, %d payloads, %v", len(content), len(payloads), err)
	}
	ps, err := reader.GetBuffers(many(bid), false)
	if err != nil || len(ps) != 1 || s.blobs[bid].refs != 1 {
		t.Fatalf("get_buffers of a repeated id: %d payloads, refs %d, %v", len(ps), s.blobs[bid].refs, err)
	}
	checkInvariants(t, s)
}

// TestItemsPerRequest checks the cap on the sizes of one create_buffers:
// over it, a clear error and nothing allocated.
func TestItemsPerRequest(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	sizes := make([]uint64, MaxItemsPerRequest+1)
	if _, err := ss.CreateBuffers(sizes); status.CodeOf(err) != status.Invalid {
		t.Fatalf("create_buffers of %d sizes: %v", len(sizes), err)
	}
	if _, err := ss.CreateDatas(make([]json.RawMessage, MaxItemsPerRequest+1), nil); status.CodeOf(err) != status.Invalid {
		t.Fatalf("create_datas of %d trees: %v", MaxItemsPerRequest+1, err)
	}
	if used, _ := s.Usage(); used != 0 || len(s.blobs) != 0 {
		t.Fatalf("a refused request allocated: used %d, %d blobs", used, len(s.blobs))
	}
	if _, err := ss.CreateBuffers(sizes[:MaxItemsPerRequest]); err != nil {
		t.Fatalf("create_buffers of exactly the cap: %v", err) // zero sizes: the empty blob
	}
}

// TestReplyLimit checks Config.MaxReplyBytes: a get or list whose reply
// would be larger fails with a clear error and takes no reference.
func TestReplyLimit(t *testing.T) {
	s, err := New(Config{Size: 1 << 20, MaxReplyBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ss := s.NewSession()
	defer ss.Close()
	objs := fillStore(t, ss, 20)
	if _, _, err := s.GetData(objs[:1]); err != nil {
		t.Fatalf("a small get_data: %v", err)
	}
	if _, _, err := s.GetData(objs); status.CodeOf(err) != status.Invalid {
		t.Fatalf("get_data over the limit: %v", err)
	}
	reader := s.NewSession()
	defer reader.Close()
	if _, _, _, err := reader.GetDataWithBuffers(objs); status.CodeOf(err) != status.Invalid || len(reader.refs) != 0 {
		t.Fatalf("get_data with buffers over the limit: %v, %d references taken", err, len(reader.refs))
	}
	if _, err := s.List("*", false, 0); status.CodeOf(err) != status.Invalid {
		t.Fatalf("list over the limit: %v", err)
	}
	var blobs []ids.ObjectID
	for id := range s.blobs {
		blobs = append(blobs, id)
	}
	if _, err := reader.GetBuffers(blobs, false); status.CodeOf(err) != status.Invalid || len(reader.refs) != 0 {
		t.Fatalf("get_buffers of %d blobs over the limit: %v", len(blobs), err)
	}
	if _, err := reader.GetBuffers(blobs[:2], false); err != nil {
		t.Fatal(fmt.Errorf("a small get_buffers: %w", err))
	}
	checkInvariants(t, s)
}
