package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

var replyBodies = []string{
	`{"type":"seal_reply"}`,
	`{"type":"release_reply","code":0,"message":""}`,
	` { "type" : "create_buffers_reply" , "payloads" : [ {"object_id":1} ], "fds":[], "num":0, "compress":false } `,
	`{"type":"x","code":11,"message":"object not exists: o123"}`,
	`{"type":"exists_reply","exists":true}`,
	`{"type":"exists_reply","exists":false,"other":{"a":[1,2,null]}}`,
	`{"type":"create_data_reply","id":123,"signature":45,"instance_id":0}`,
	`{"type":"create_data_reply","id":18446744073709551615,"signature":0,"instance_id":7,"content":{"typename":"t","x":"\u00e9"},"inline_ids":[9223372036854775808,1]}`,
	`{"type":"create_data_reply","id":1,"content":null,"inline_ids":[],"lease":{"offset":4096,"size":1048576,"store_fd":5,"first_id":9223372036854775809,"ids":1024}}`,
	`{"type":"create_data_reply","id":1,"lease":null}`,
	`{"type":"create_data_reply","id":1.5}`,
	`{"type":"create_data_reply","ID":2}`,
	`{"type":"create_data_reply","id":-1}`,
	`{"type":"exists_reply","exists":tru}`,
	`{"type":"exists_reply","exists":true} x`,
	`{"type":"a\"b"}`,
	`{"type":"ack","unknown":tru}`,
	`{}`,
	`[]`,
	``,
}

func decodeBoth(t *testing.T, body []byte, mk func() Reply) {
	t.Helper()
	fast, slow := mk(), mk()
	errFast := UnmarshalReply(body, fast)
	errSlow := json.Unmarshal(body, slow)
	if (errFast == nil) != (errSlow == nil) {
		t.Fatalf("%q: UnmarshalReply error %v, encoding/json %v", body, errFast, errSlow)
	}
	if errSlow == nil && !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: UnmarshalReply %+v, encoding/json %+v", body, fast, slow)
	}
}

var replyKinds = []func() Reply{
	func() Reply { return &AckReply{} },
	func() Reply { return &ExistsReply{} },
	func() Reply { return &CreateDataReply{} },
}

func TestDecodeReplyMatchesEncodingJSON(t *testing.T) {
	for _, body := range replyBodies {
		for _, mk := range replyKinds {
			decodeBoth(t, []byte(body), mk)
		}
	}
	// The fast path is taken for what the daemon writes.
	g := &LeaseGrant{Offset: 64, Size: 128, StoreFd: 3, FirstID: 1<<63 | 9, IDs: 1000}
	body, err := AppendReply(nil, &CreateDataReply{Header: Header{Type: "create_data_reply"}, ID: 5, InlineIDs: nil, Lease: g})
	if err != nil {
		t.Fatal(err)
	}
	var r CreateDataReply
	if !fastDecodeReply(body, &r) || !reflect.DeepEqual(r.Lease, g) || r.ID != 5 {
		t.Fatalf("fast path not taken or wrong for %s: %+v", body, r)
	}
}

func FuzzUnmarshalReply(f *testing.F) {
	for _, b := range replyBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, mk := range replyKinds {
			decodeBoth(t, body, mk)
		}
	})
}
