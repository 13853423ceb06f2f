package protocol

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

var requestBodies = []string{
	`{"type":"create_data_request","content":{"typename":"t","x":[1,{"a":null}]}}`,
	`{"type":"create_data_request","content":{"typename":"t","buffer_":{"inline":0}},"inline":[1024,0]}`,
	` {"type":"create_data_request", "content" : null , "seal":[9223372036854775809,2],"with_content":true} `,
	`{"type":"create_data_request","content":{},"lease_blobs":[1,64,10],"lease_size":1048576}`,
	`{"type":"create_data_request","content":{"a":tru}}`,
	`{"type":"create_data_request","content":{"a":1},"Seal":[1]}`,
	`{"type":"create_data_request","content":{"a":1},"seal":["o8000000000000001"]}`,
	`{"type":"create_data_request","content":{"a":1},"inline":[1.5]}`,
	`{"type":"create_data_request","content":{"a":1},"x":[1,2]}`,
	`{"type":"create_data_request","content":{"a":1}} {}`,
	`{"type":"release_request","object_id":7}`,
	`{"type":"release_request","object_id":7,"ids":[8,9]}`,
	`{"type":"release_request","object_id":-7}`,
	`{"type":"exists_request","id":3}`,
	`{"type":"exists_request","id":"o0000000000000003"}`,
	`{"type":"exists_request","id":03}`,
	`{"type":"exists_request"}`,
	`{"type":"del_data_request","id":[1,2,3],"force":false,"deep":true,"memory_trim":false,"fastpath":false}`,
	`{"type":"del_data_request","id":5,"deep":true}`,
	`{"type":"del_data_request","id":null}`,
	`{"type":"del_data_request","id":[]}`,
	`{"type":"del_data_request","id":"o0000000000000003"}`,
	`{"type":"del_data_request","id":[1],"Deep":true}`,
	`{"type":"del_data_request","id":[1],"deep":1}`,
}

var requestKinds = []func() Request{
	func() Request { return &CreateDataRequest{} },
	func() Request { return &ReleaseRequest{} },
	func() Request { return &ExistsRequest{} },
	func() Request { return &DelDataRequest{} },
}

func decodeRequestBoth(t *testing.T, body []byte, mk func() Request) {
	t.Helper()
	fast, slow := mk(), mk()
	if !fastDecodeRequest(body, fast) {
		return // the caller decodes with encoding/json
	}
	if err := json.Unmarshal(body, slow); err != nil {
		t.Fatalf("%q: decoded by hand, but encoding/json fails: %v", body, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: by hand %+v, encoding/json %+v", body, fast, slow)
	}
}

func TestDecodeRequestFastMatchesEncodingJSON(t *testing.T) {
	for _, body := range requestBodies {
		for _, mk := range requestKinds {
			decodeRequestBoth(t, []byte(body), mk)
		}
	}
	// What our client writes takes the fast path.
	for _, req := range []Request{
		&CreateDataRequest{Content: json.RawMessage(`{"typename":"t"}`), Seal: []ids.ObjectID{1 << 63}, LeaseBlobs: []uint64{1, 2, 3}, LeaseSize: 9},
		&ReleaseRequest{ObjectID: 4, IDs: []ids.ObjectID{5}},
		&ExistsRequest{ID: 6},
		&DelDataRequest{ID: IDList{7, 8}, Deep: true},
	} {
		body, err := EncodeRequest(req.RequestType(), req)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(reflect.TypeOf(req).Elem()).Interface().(Request)
		if !fastDecodeRequest(body, got) || !reflect.DeepEqual(got, req) {
			t.Fatalf("%s: not decoded by hand, or wrongly: %+v", body, got)
		}
	}
}

func FuzzDecodeRequestFast(f *testing.F) {
	for _, b := range requestBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, mk := range requestKinds {
			decodeRequestBoth(t, body, mk)
		}
	})
}
