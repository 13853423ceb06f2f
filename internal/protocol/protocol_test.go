package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"

	"github.com/v6d-io/v6d-go/internal/status"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, body := range []string{`{"type":"a"}`, `{}`, strings.Repeat("x", 70000)} {
		buf.Write(AppendFrame(nil, []byte(body)))
	}
	for _, want := range []string{`{"type":"a"}`, `{}`, strings.Repeat("x", 70000)} {
		got, err := ReadFrame(&buf, nil, DefaultMaxFrame)
		if err != nil || string(got) != want {
			t.Fatalf("ReadFrame = %q, %v", got, err)
		}
	}
	if _, err := ReadFrame(&buf, nil, DefaultMaxFrame); !errors.Is(err, io.EOF) {
		t.Fatalf("at end: %v", err)
	}
}

func TestFrameErrors(t *testing.T) {
	big := AppendFrame(nil, make([]byte, 100))
	if _, err := ReadFrame(bytes.NewReader(big), nil, 99); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(big[:50]), nil, 1000); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(big[:3]), nil, 1000); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short header: %v", err)
	}
}

func TestBeginEndFrame(t *testing.T) {
	f, at := BeginFrame([]byte("prefix"))
	f = append(f, `{"x":1}`...)
	EndFrame(f, at)
	got, err := ReadFrame(bytes.NewReader(f[6:]), nil, 100)
	if err != nil || string(got) != `{"x":1}` {
		t.Fatalf("%q %v", got, err)
	}
}

func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body, wire string
		code             status.Code
		check            func(t *testing.T, r Request)
	}{
		{"register", `{"type":"register_request","version":"0.1"}`, "register_request", status.OK, nil},
		{"get buffers ids", `{"type":"get_buffers_request","ids":[1,2],"unsafe":true}`, "get_buffers_request", status.OK,
			func(t *testing.T, r Request) {
				g := r.(*GetBuffersRequest)
				if len(g.IDs) != 2 || !g.Unsafe {
					t.Fatalf("%+v", g)
				}
			}},
		{"get buffers keyed", `{"type":"get_buffers_request","num":2,"0":7,"1":9}`, "get_buffers_request", status.OK,
			func(t *testing.T, r Request) {
				if g := r.(*GetBuffersRequest); len(g.IDs) != 2 || g.IDs[1] != 9 {
					t.Fatalf("%+v", g)
				}
			}},
		{"get buffers keyed missing", `{"type":"get_buffers_request","num":2,"0":7}`, "get_buffers_request", status.Invalid, nil},
		{"get data single id", `{"type":"get_data_request","id":5}`, "get_data_request", status.OK,
			func(t *testing.T, r Request) {
				if g := r.(*GetDataRequest); len(g.ID) != 1 || g.ID[0] != 5 {
					t.Fatalf("%+v", g)
				}
			}},
		{"feedbacks", `{"type":"del_data_with_feedbacks_request","id":[1],"deep":true}`, "del_data_with_feedbacks_request", status.OK,
			func(t *testing.T, r Request) {
				if d := r.(*DelDataRequest); !d.Feedback() || !d.Deep {
					t.Fatalf("%+v", d)
				}
			}},
		{"unknown", `{"type":"nope"}`, "nope", status.Invalid, nil},
		{"unimplemented", `{"type":"acquire_lock_request"}`, "acquire_lock_request", status.NotImplemented, nil},
		{"no type", `{"size":1}`, "", status.Invalid, nil},
		{"not json", `{"type":`, "", status.Invalid, nil},
		{"bad field", `{"type":"create_buffer_request","size":"big"}`, "create_buffer_request", status.Invalid, nil},
		{"negative size", `{"type":"create_buffer_request","size":-1}`, "create_buffer_request", status.Invalid, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := DecodeRequest([]byte(tc.body))
			wire, req := f.Wire, f.Req
			if wire != tc.wire {
				t.Fatalf("wire = %q, want %q", wire, tc.wire)
			}
			if status.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %v", err, tc.code)
			}
			if err == nil && tc.check != nil {
				tc.check(t, req)
			}
		})
	}
}

func TestEveryRequestRoundTrips(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		wire := k.String()
		if wire == "" || k.Reply() == "" || seen[wire] || KindOf(wire) != k {
			t.Errorf("kind %d: wire %q reply %q (duplicate or missing)", k, wire, k.Reply())
		}
		seen[wire] = true
		req := k.New()
		if got := req.RequestType(); got != wire {
			t.Errorf("%T.RequestType() = %q, table says %q", req, got, wire)
		}
		body, err := EncodeRequest(wire, req)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := DecodeRequest(body); err != nil || f.Kind != k || f.Wire != wire {
			t.Errorf("%s: decode own encoding %s: %+v %v", wire, body, f, err)
		}
	}
	if len(RequestTypes()) != int(NumKinds)-1 {
		t.Errorf("RequestTypes() has %d entries, want %d", len(RequestTypes()), NumKinds-1)
	}
}

func TestReplyType(t *testing.T) {
	for in, want := range map[string]string{
		"seal_request": "seal_reply", "cluster_meta": "cluster_meta", "debug_command": "debug_reply",
	} {
		if got := ReplyType(in); got != want {
			t.Errorf("ReplyType(%q) = %q", in, got)
		}
	}
}

func TestBuffersReplyCompat(t *testing.T) {
	r := &BuffersReply{Header: Header{Type: "get_buffers_reply"}, Payloads: []Payload{{ObjectID: ids.EmptyBlob | 5, DataSize: 3}}, Num: 1, Fds: []int{}}
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if _, ok := m["0"]; !ok {
		t.Fatalf("no numbered payload key: %s", body)
	}
	var back BuffersReply
	if err := DecodeReply(body, "get_buffers_reply", &back); err != nil || back.Payloads[0].DataSize != 3 {
		t.Fatalf("%+v %v", back, err)
	}
}

func TestDecodeReplyErrors(t *testing.T) {
	var r AckReply
	err := DecodeReply([]byte(`{"code":12,"message":"gone"}`), "seal_reply", &r)
	if status.CodeOf(err) != status.ObjectNotExists || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("%v", err)
	}
	if !errors.Is(err, &status.Error{Code: status.ObjectNotExists}) {
		t.Fatal("errors.Is by code")
	}
	if err := DecodeReply([]byte(`{"type":"x_reply"}`), "seal_reply", &r); status.CodeOf(err) != status.Invalid {
		t.Fatalf("%v", err)
	}
	if err := DecodeReply([]byte(`nope`), "seal_reply", &r); status.CodeOf(err) != status.Invalid {
		t.Fatalf("%v", err)
	}
}

func TestErrors(t *testing.T) {
	if status.CodeOf(nil) != status.OK || status.CodeOf(io.EOF) != status.UnknownError {
		t.Fatal("CodeOf")
	}
	wrapped := errors.Join(status.Errorf(status.NotEnoughMemory, "full"))
	if status.AsError(wrapped).Code != status.NotEnoughMemory {
		t.Fatal("AsError keeps code")
	}
	if status.Code(999).String() != "Code(999)" || status.ObjectNotExists.String() != "ObjectNotExists" {
		t.Fatal("names")
	}
	body := EncodeError(status.Errorf(status.ObjectSealed, "x"))
	if string(body) != `{"code":13,"message":"x"}` {
		t.Fatalf("%s", body)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(AppendFrame(nil, []byte(`{"type":"register_request"}`)))
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			body, err := ReadFrame(r, nil, 1<<16)
			if err != nil {
				return
			}
			if len(body) > 1<<16 {
				t.Fatalf("frame over limit: %d", len(body))
			}
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	for _, k := range Kinds() {
		body, _ := EncodeRequest(k.String(), k.New())
		f.Add(body)
	}
	f.Add([]byte(`{"type":"create_data_request","content":5,"seal":"x","inline":[3,4]}`))
	f.Add([]byte(`{"type":"get_buffers_request","num":3,"0":1,"1":2,"2":3}`))
	f.Add([]byte(`{"type":"get_data_request","id":[1,2],"with_buffers":true}`))
	f.Add([]byte(`{"type":"create_data_request","content":{"typename":"x","m":{"id":"o8000000000000000"}},"seal":[1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := DecodeRequest(data)
		wire, req := fr.Wire, fr.Req
		if fr.Trailing > 0 && fr.Kind != KindCreateData {
			t.Fatalf("%s announces %d trailing bytes", wire, fr.Trailing)
		}
		if errors.Is(err, ErrUnframed) {
			if fr.Kind != KindCreateData {
				t.Fatalf("%s unframed: %v", wire, err)
			}
			return
		}
		if err != nil {
			if c := status.CodeOf(err); c != status.Invalid && c != status.NotImplemented {
				t.Fatalf("decode error without Invalid/status.NotImplemented code: %v", err)
			}
			return
		}
		if req.RequestType() != wire {
			t.Fatalf("type %q decoded as %q", wire, req.RequestType())
		}
		if _, err := EncodeRequest(wire, req); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte(`{"type":"get_buffers_reply","payloads":[{"object_id":1}],"fds":[3],"num":1}`))
	f.Add([]byte(`{"code":41,"message":"full"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r BuffersReply
		_ = DecodeReply(data, "get_buffers_reply", &r)
		var g GetDataReply
		_ = DecodeReply(data, "get_data_reply", &g)
	})
}
