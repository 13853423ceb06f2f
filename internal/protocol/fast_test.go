package protocol

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"

	"github.com/v6d-io/v6d-go/internal/status"
)

// TestAppendReplyMatchesEncodingJSON checks every fast encoder against
// encoding/json: both must decode to the same value.
func TestAppendReplyMatchesEncodingJSON(t *testing.T) {
	p := Payload{ObjectID: ids.ObjectID(1<<63 | 42), StoreFd: 7, DataOffset: 4096, DataSize: 100,
		MapSize: 1 << 30, Pointer: 1 << 40, IsSealed: true, IsOwner: true}
	tree := json.RawMessage(`{"o0000000000000001":{"typename":"vineyard::Tensor<int64>","x":[1,2]}}`)
	for _, tc := range []struct {
		name  string
		reply Reply
	}{
		{"ack", &AckReply{Header{Type: "seal_reply"}}},
		{"exists", &ExistsReply{Header{Type: "exists_reply"}, true}},
		{"create_buffer", &CreateBufferReply{Header{Type: "create_buffer_reply"}, p.ObjectID, p, -1}},
		{"create_buffers", &BuffersReply{Header: Header{Type: "create_buffers_reply"}, IDs: []ids.ObjectID{1, 2},
			Payloads: []Payload{p, p}, Fds: []int{3}, Num: 2}},
		{"get_buffers empty", &BuffersReply{Header: Header{Type: "get_buffers_reply"}, Payloads: []Payload{}, Fds: []int{}}},
		{"create_data", &CreateDataReply{Header{Type: "create_data_reply"}, 5, 6, 7, tree, nil, nil}},
		{"create_data no content", &CreateDataReply{Header{Type: "create_data_reply"}, 5, 6, 7, nil, nil, nil}},
		{"create_data inline", &CreateDataReply{Header{Type: "create_data_reply"}, 5, 6, 7, tree, []ids.ObjectID{1 << 63, 3}, nil}},
		{"create_data lease", &CreateDataReply{Header{Type: "create_data_reply"}, 5, 6, 7, nil, []ids.ObjectID{3},
			&LeaseGrant{Offset: 4096, Size: 1 << 20, StoreFd: 9, FirstID: 1<<63 | 5, IDs: 1024}}},
		{"create_buffers lease", &BuffersReply{Header: Header{Type: "create_buffers_reply"}, Payloads: []Payload{},
			Fds: []int{9}, Lease: &LeaseGrant{Offset: 64, Size: 128, StoreFd: 9, FirstID: 1 << 63, IDs: 1}}},
		{"get_data", &GetDataReply{Header{Type: "get_data_reply"}, tree, []Payload{p}, []int{4}, &p.DataSize, []uint64{7}, ""}},
		{"get_data sync error", &GetDataReply{Header: Header{Type: "get_data_reply"}, Content: json.RawMessage(`{}`),
			SyncError: "etcd: context deadline exceeded \"<x>\""}},
		{"get_data plain", &GetDataReply{Header: Header{Type: "get_data_reply"}, Content: json.RawMessage(`{}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fast, err := AppendReply(nil, tc.reply)
			if err != nil {
				t.Fatal(err)
			}
			slow, err := json.Marshal(tc.reply)
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			if err := json.Unmarshal(fast, &a); err != nil {
				t.Fatalf("fast encoding is not JSON: %v\n%s", err, fast)
			}
			if err := json.Unmarshal(slow, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("encodings differ:\nfast %s\nslow %s", fast, slow)
			}
		})
	}
}

func TestAppendReplyKeepsErrorsAndEscapes(t *testing.T) {
	// An error reply never takes a fast path.
	r := &GetDataReply{Header: Header{Type: "get_data_reply", Code: status.ObjectNotExists, Message: "gone"}}
	out, err := AppendReply(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	var got GetDataReply
	if err := json.Unmarshal(out, &got); err != nil || got.Code != status.ObjectNotExists || got.Message != "gone" {
		t.Fatalf("%s: %v", out, err)
	}
	// Typenames keep their angle brackets.
	b, _ := Marshal(map[string]string{"typename": "vineyard::Tensor<int64>"})
	if string(b) != `{"typename":"vineyard::Tensor<int64>"}` {
		t.Fatalf("Marshal escaped HTML: %s", b)
	}
}

func TestRequestTypeFastPath(t *testing.T) {
	for body, want := range map[string]string{
		`{"type":"get_data_request","id":[1]}`: "get_data_request",
		`{"id":[1],"type":"get_data_request"}`: "",
		`{"type":"a\"b"}`:                      "",
		`{"type":`:                             "",
	} {
		got, ok := requestType([]byte(body))
		if string(got) != want || ok != (want != "") {
			t.Errorf("requestType(%s) = %q, %v", body, got, ok)
		}
	}
	// Bodies the fast path declines still decode through encoding/json.
	if f, err := DecodeRequest([]byte(`{"id":1,"type":"exists_request"}`)); err != nil || f.Kind != KindExists {
		t.Fatalf("slow path: %+v, %v", f, err)
	}
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range []string{"", "plain", "vineyard::Tensor<int64>", `q"uo\te`, "tab\there\nnl\r\x01\x1f", "ünï€😀", "a&b>c"} {
		want, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, Marshal = %s", s, got, want)
		}
	}
}

// TestEncodeRequestMatchesEncodingJSON checks the requests that append
// themselves: they must decode, on the daemon's side, to what they were.
func TestEncodeRequestMatchesEncodingJSON(t *testing.T) {
	tree := json.RawMessage(`{"typename":"vineyard::Tensor<int64>","buffer_":{"inline":0}}`)
	for _, req := range []Request{
		&CreateBufferRequest{Size: 1 << 40},
		&CreateBuffersRequest{Num: 2, Sizes: []uint64{1, 2}},
		&SealRequest{ObjectID: 1<<63 | 5},
		&ReleaseRequest{ObjectID: 7},
		&ReleaseRequest{ObjectID: 7, IDs: []ids.ObjectID{8, 9}},
		&ExistsRequest{ID: 3},
		&GetDataRequest{ID: IDList{1, 2}, SyncRemote: true, WithBuffers: true},
		&GetDataRequest{ID: IDList{1}},
		&CreateDataRequest{Content: tree, Seal: []ids.ObjectID{4}, WithContent: true},
		&CreateDataRequest{Inline: []uint64{3, 0}},
		&CreateDataRequest{Content: tree, Seal: []ids.ObjectID{1<<63 | 4}, LeaseBlobs: []uint64{1<<63 | 4, 4096, 10},
			LeaseSize: 1 << 20},
		&CreateBuffersRequest{Sizes: []uint64{}, Lease: true, LeaseSize: 1 << 20, LeaseNeed: 64,
			LeaseBlobs: []uint64{1<<63 | 4, 4096, 10}},
		&CreateBuffersRequest{Sizes: []uint64{}, Lease: true},
		&CreateBuffersRequest{Sizes: []uint64{}, Lease: true, LeaseKeep: true, LeaseBlobs: []uint64{1 << 63, 64, 1}},
	} {
		body, err := EncodeRequest(req.RequestType(), req)
		if err != nil {
			t.Fatal(err)
		}
		f, err := DecodeRequest(body)
		if err != nil || f.Wire != req.RequestType() {
			t.Fatalf("%s: %+v %v", body, f, err)
		}
		got := f.Req
		want := req
		if cd, ok := req.(*CreateDataRequest); ok && cd.Content == nil {
			c := *cd
			c.Content = json.RawMessage("null")
			want = &c
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s decodes to %+v, want %+v", body, got, want)
		}
	}
}

// TestAppendRequestFramesInPlace checks AppendRequest against AppendFrame of
// EncodeRequest, after bytes already in the buffer, for requests that append
// themselves and for one that is marshalled; a request that fails to
// marshal leaves the buffer as it was.
func TestAppendRequestFramesInPlace(t *testing.T) {
	reqs := []Request{
		&CreateDataRequest{Content: json.RawMessage(`{"typename":"t"}`), Seal: []ids.ObjectID{4}, Pipelined: true},
		&ExistsRequest{ID: 3},
		&CreateDatasRequest{Num: 1, Contents: []json.RawMessage{json.RawMessage(`{"a":1}`)}},
	}
	buf := []byte("prefix")
	want := []byte("prefix")
	for _, req := range reqs {
		var err error
		if buf, err = AppendRequest(buf, req.RequestType(), req); err != nil {
			t.Fatal(err)
		}
		body, err := EncodeRequest(req.RequestType(), req)
		if err != nil {
			t.Fatal(err)
		}
		want = AppendFrame(want, body)
	}
	if string(buf) != string(want) {
		t.Fatalf("AppendRequest wrote\n%q\nwant\n%q", buf, want)
	}
	bad := &RegisterRequest{StoreType: json.RawMessage(`{not json`)}
	got, err := AppendRequest(buf, bad.RequestType(), bad)
	if err == nil || string(got) != string(want) {
		t.Fatalf("a request that does not marshal: %v, buffer %q", err, got)
	}
}
