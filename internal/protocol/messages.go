package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/v6d-io/v6d-go/internal/ids"

	"github.com/v6d-io/v6d-go/internal/status"
)

// Request is implemented by every request message. RequestType returns the
// message's "type" string on the wire.
type Request interface{ RequestType() string }

// Header is embedded in every reply: the "type", and on failure the status
// code and message of an error reply (which carries no type).
type Header struct {
	Type    string      `json:"type,omitempty"`
	Code    status.Code `json:"code,omitempty"`
	Message string      `json:"message,omitempty"`
}

// Err returns the error an error reply carries, or nil.
func (h *Header) Err() error {
	if h.Code == status.OK {
		return nil
	}
	return &status.Error{Code: h.Code, Message: h.Message}
}

// ReplyHeader returns the header itself; it lets generic code reach the
// embedded header of any reply.
func (h *Header) ReplyHeader() *Header { return h }

// Reply is implemented by every reply message (through the embedded Header).
type Reply interface{ ReplyHeader() *Header }

// IDList is a list of object ids that also decodes from a single number, as
// older upstream clients send.
type IDList []ids.ObjectID

// UnmarshalJSON accepts a number or an array of numbers.
func (l *IDList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '[' {
		var one ids.ObjectID
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*l = IDList{one}
		return nil
	}
	var many []ids.ObjectID
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*l = many
	return nil
}

// Payload locates a blob inside a mapped region: upstream's Payload.
type Payload struct {
	ObjectID   ids.ObjectID `json:"object_id"`
	StoreFd    int          `json:"store_fd"`
	DataOffset uint64       `json:"data_offset"`
	DataSize   uint64       `json:"data_size"`
	MapSize    uint64       `json:"map_size"`
	Pointer    uint64       `json:"pointer"`
	IsSealed   bool         `json:"is_sealed"`
	IsOwner    bool         `json:"is_owner"`
	IsGPU      bool         `json:"is_gpu"`
}

// ---- requests -------------------------------------------------------------

// RegisterRequest opens a session; it must be the first request.
type RegisterRequest struct {
	Version   string          `json:"version"`
	StoreType json.RawMessage `json:"store_type,omitempty"`
	SessionID uint64          `json:"session_id,omitempty"`
	Username  string          `json:"username,omitempty"`
	Password  string          `json:"password,omitempty"`
}

// ExitRequest announces a clean disconnect.
type ExitRequest struct{}

// CreateBufferRequest allocates one unsealed blob.
type CreateBufferRequest struct {
	Size uint64 `json:"size"`
}

// CreateBuffersRequest allocates several unsealed blobs at once.
type CreateBuffersRequest struct {
	Num   int      `json:"num"`
	Sizes []uint64 `json:"sizes"`
}

// SealRequest seals a blob the connection created.
type SealRequest struct {
	ObjectID ids.ObjectID `json:"object_id"`
}

// GetBuffersRequest asks for the payloads of blobs. Upstream sends the ids as
// "ids" or as keys "0".."num-1"; both are accepted.
type GetBuffersRequest struct {
	IDs    []ids.ObjectID `json:"ids"`
	Unsafe bool           `json:"unsafe"`
}

// UnmarshalJSON decodes both forms of the id list.
func (r *GetBuffersRequest) UnmarshalJSON(b []byte) error {
	type plain GetBuffersRequest
	var p struct {
		plain
		Num *int `json:"num"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = GetBuffersRequest(p.plain)
	if r.IDs == nil && p.Num != nil {
		if *p.Num < 0 || *p.Num > 1<<20 {
			return fmt.Errorf("bad num %d", *p.Num)
		}
		var keyed map[string]json.RawMessage
		if err := json.Unmarshal(b, &keyed); err != nil {
			return err
		}
		r.IDs = make([]ids.ObjectID, 0, *p.Num)
		for i := 0; i < *p.Num; i++ {
			raw, ok := keyed[strconv.Itoa(i)]
			if !ok {
				return fmt.Errorf("missing id %d", i)
			}
			var id ids.ObjectID
			if err := json.Unmarshal(raw, &id); err != nil {
				return err
			}
			r.IDs = append(r.IDs, id)
		}
	}
	return nil
}

// DropBufferRequest frees an unsealed blob the connection created.
type DropBufferRequest struct {
	ID ids.ObjectID `json:"id"`
}

// ShrinkBufferRequest shrinks an unsealed blob the connection created.
type ShrinkBufferRequest struct {
	ID   ids.ObjectID `json:"id"`
	Size uint64       `json:"size"`
}

// ReleaseRequest drops the connection's reference to a blob. IDs (our
// extension) releases more blobs in the same request; the client uses it to
// send the releases it deferred ahead of its next request.
type ReleaseRequest struct {
	ObjectID ids.ObjectID   `json:"object_id"`
	IDs      []ids.ObjectID `json:"ids,omitempty"`
}

// IncreaseReferenceCountRequest takes a reference to each blob.
type IncreaseReferenceCountRequest struct {
	IDs []ids.ObjectID `json:"ids"`
}

// CreateDataRequest stores a metadata tree. Seal is our extension: blobs of
// this connection sealed first, in the same round trip. Inline (our
// extension) lists the sizes of new blobs whose bytes follow the frame on the
// socket, back to back; the tree refers to the i-th as {"inline": i}, and
// Content may then be empty to create only the blobs.
type CreateDataRequest struct {
	Content json.RawMessage `json:"content"`
	Seal    []ids.ObjectID  `json:"seal,omitempty"`
	Inline  []uint64        `json:"inline,omitempty"`
	// WithContent (our extension) asks for the stored tree in the reply.
	WithContent bool `json:"with_content,omitempty"`
}

// CreateDatasRequest stores several trees; Seal as in CreateDataRequest.
type CreateDatasRequest struct {
	Num      int               `json:"num"`
	Contents []json.RawMessage `json:"contents"`
	Seal     []ids.ObjectID    `json:"seal,omitempty"`
}

// GetDataRequest returns metadata trees. WithBuffers (our extension) also
// returns the payloads of every blob in the trees and takes a reference to
// each, so a get needs one round trip.
type GetDataRequest struct {
	ID          IDList `json:"id"`
	SyncRemote  bool   `json:"sync_remote"`
	Wait        bool   `json:"wait"`
	WithBuffers bool   `json:"with_buffers,omitempty"`
}

// ListDataRequest lists trees whose typename matches a glob or regex.
type ListDataRequest struct {
	Pattern string `json:"pattern"`
	Regex   bool   `json:"regex"`
	Limit   uint64 `json:"limit"`
}

// DelDataRequest deletes objects (del_data_request and
// del_data_with_feedbacks_request).
type DelDataRequest struct {
	ID         IDList `json:"id"`
	Force      bool   `json:"force"`
	Deep       bool   `json:"deep"`
	MemoryTrim bool   `json:"memory_trim"`
	Fastpath   bool   `json:"fastpath"`

	feedback bool
}

// ExistsRequest asks whether an object exists.
type ExistsRequest struct {
	ID ids.ObjectID `json:"id"`
}

// PersistRequest persists an object.
type PersistRequest struct {
	ID ids.ObjectID `json:"id"`
}

// IfPersistRequest asks whether an object is persisted.
type IfPersistRequest struct {
	ID ids.ObjectID `json:"id"`
}

// LabelRequest sets labels on an object.
type LabelRequest struct {
	ID     ids.ObjectID `json:"id"`
	Keys   []string     `json:"keys"`
	Values []string     `json:"values"`
}

// ShallowCopyRequest copies an object's metadata under a new id.
type ShallowCopyRequest struct {
	ID    ids.ObjectID    `json:"id"`
	Extra json.RawMessage `json:"extra,omitempty"`
}

// PutNameRequest names an object.
type PutNameRequest struct {
	ObjectID ids.ObjectID `json:"object_id"`
	Name     string       `json:"name"`
}

// GetNameRequest resolves a name. TimeoutMs (our extension) bounds Wait; a
// negative or absent value waits without limit.
type GetNameRequest struct {
	Name      string `json:"name"`
	Wait      bool   `json:"wait"`
	TimeoutMs *int64 `json:"timeout_ms,omitempty"`
}

// ListNameRequest lists names matching a glob or regex.
type ListNameRequest struct {
	Pattern string `json:"pattern"`
	Regex   bool   `json:"regex"`
	Limit   uint64 `json:"limit"`
}

// DropNameRequest removes a name.
type DropNameRequest struct {
	Name string `json:"name"`
}

// ClearRequest deletes every object.
type ClearRequest struct{}

// MemoryTrimRequest returns unused arena pages to the kernel.
type MemoryTrimRequest struct{}

// InstanceStatusRequest asks for the daemon's status.
type InstanceStatusRequest struct{}

// ClusterMetaRequest asks for the cluster's instances.
type ClusterMetaRequest struct{}

// DebugRequest is upstream's debug_command; answered with an empty reply.
type DebugRequest struct {
	Debug json.RawMessage `json:"debug,omitempty"`
}

// Feedback reports whether the request was del_data_with_feedbacks_request,
// whose reply lists the deleted blobs.
func (r *DelDataRequest) Feedback() bool { return r.feedback }

// requestTable maps each wire type to a constructor: the one place that lists
// every request this daemon understands.
var requestTable = map[string]func() Request{
	"register_request":                 func() Request { return &RegisterRequest{} },
	"exit_request":                     func() Request { return &ExitRequest{} },
	"create_buffer_request":            func() Request { return &CreateBufferRequest{} },
	"create_buffers_request":           func() Request { return &CreateBuffersRequest{} },
	"seal_request":                     func() Request { return &SealRequest{} },
	"get_buffers_request":              func() Request { return &GetBuffersRequest{} },
	"drop_buffer_request":              func() Request { return &DropBufferRequest{} },
	"shrink_buffer_request":            func() Request { return &ShrinkBufferRequest{} },
	"release_request":                  func() Request { return &ReleaseRequest{} },
	"increase_reference_count_request": func() Request { return &IncreaseReferenceCountRequest{} },
	"create_data_request":              func() Request { return &CreateDataRequest{} },
	"create_datas_request":             func() Request { return &CreateDatasRequest{} },
	"get_data_request":                 func() Request { return &GetDataRequest{} },
	"list_data_request":                func() Request { return &ListDataRequest{} },
	"del_data_request":                 func() Request { return &DelDataRequest{} },
	"del_data_with_feedbacks_request":  func() Request { return &DelDataRequest{feedback: true} },
	"exists_request":                   func() Request { return &ExistsRequest{} },
	"persist_request":                  func() Request { return &PersistRequest{} },
	"if_persist_request":               func() Request { return &IfPersistRequest{} },
	"label_request":                    func() Request { return &LabelRequest{} },
	"shallow_copy_request":             func() Request { return &ShallowCopyRequest{} },
	"put_name_request":                 func() Request { return &PutNameRequest{} },
	"get_name_request":                 func() Request { return &GetNameRequest{} },
	"list_name_request":                func() Request { return &ListNameRequest{} },
	"drop_name_request":                func() Request { return &DropNameRequest{} },
	"clear_request":                    func() Request { return &ClearRequest{} },
	"memory_trim_request":              func() Request { return &MemoryTrimRequest{} },
	"instance_status_request":          func() Request { return &InstanceStatusRequest{} },
	"cluster_meta":                     func() Request { return &ClusterMetaRequest{} },
	"debug_command":                    func() Request { return &DebugRequest{} },
}

// unimplemented lists upstream request types this daemon knows of but does
// not serve yet; they get NotImplemented instead of Invalid.
var unimplemented = map[string]bool{
	"create_stream_request": true, "open_stream_request": true, "get_next_stream_chunk_request": true,
	"push_next_stream_chunk_request": true, "pull_next_stream_chunk_request": true, "stop_stream_request": true,
	"drop_stream_request": true, "evict_request": true, "load_request": true, "unpin_request": true,
	"migrate_object_request": true, "create_remote_buffer_request": true, "create_remote_buffers_request": true,
	"get_remote_buffers_request": true, "new_session_request": true, "delete_session_request": true,
	"make_arena_request": true, "finalize_arena_request": true, "create_gpu_buffer_request": true,
	"get_gpu_buffers_request": true, "create_disk_buffer_request": true, "create_buffer_by_plasma_request": true,
	"get_buffers_by_plasma_request": true, "plasma_seal_request": true, "plasma_release_request": true,
	"plasma_del_data_request": true, "move_buffers_ownership_request": true, "acquire_lock_request": true,
	"release_lock_request": true, "is_spilled_request": true, "is_in_use_request": true,
}

// RequestTypes returns every request type the daemon understands, sorted.
func RequestTypes() []string {
	out := make([]string, 0, len(requestTable))
	for t := range requestTable {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// ReplyType returns the reply type string for a request type: upstream
// replaces "_request" by "_reply" (cluster_meta answers as cluster_meta,
// debug_command as debug_reply).
func ReplyType(requestType string) string {
	switch requestType {
	case "cluster_meta":
		return "cluster_meta"
	case "debug_command":
		return "debug_reply"
	}
	if n := len(requestType) - len("_request"); n > 0 && requestType[n:] == "_request" {
		return requestType[:n] + "_reply"
	}
	return requestType + "_reply"
}

// DecodeRequest decodes a request frame body. It returns the wire type even
// when decoding the fields fails, so that the error reply can name it. An
// error here is always a *status.Error with code Invalid.
func DecodeRequest(body []byte) (string, Request, error) {
	var head struct {
		Type string `json:"type"`
	}
	if t, ok := requestType(body); ok {
		head.Type = t
	} else if err := json.Unmarshal(body, &head); err != nil {
		return "", nil, status.Errorf(status.Invalid, "malformed message: %v", err)
	}
	mk, ok := requestTable[head.Type]
	if !ok {
		if head.Type == "" {
			return "", nil, status.Errorf(status.Invalid, "message has no \"type\"")
		}
		if unimplemented[head.Type] {
			return head.Type, nil, status.Errorf(status.NotImplemented, "%s is not implemented by this daemon", head.Type)
		}
		return head.Type, nil, status.Errorf(status.Invalid, "unknown message type %q", head.Type)
	}
	req := mk()
	if err := json.Unmarshal(body, req); err != nil {
		return head.Type, nil, status.Errorf(status.Invalid, "bad %s: %v", head.Type, err)
	}
	return head.Type, req, nil
}

// EncodeRequest marshals a request with its "type" as the first key.
func EncodeRequest(wireType string, req Request) ([]byte, error) {
	if a, ok := req.(requestAppender); ok {
		out := append(make([]byte, 0, 96), `{"type":"`...)
		out = append(out, wireType...)
		return append(a.appendFields(append(out, '"')), '}'), nil
	}
	body, err := Marshal(req)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)+len(wireType)+12)
	out = append(out, `{"type":`...)
	out = strconv.AppendQuote(out, wireType)
	if len(body) > 2 {
		out = append(out, ',')
		out = append(out, body[1:]...)
	} else {
		out = append(out, '}')
	}
	return out, nil
}

// Each request type names its wire type.

// RequestType returns "register_request".
func (*RegisterRequest) RequestType() string { return "register_request" }

// RequestType returns "exit_request".
func (*ExitRequest) RequestType() string { return "exit_request" }

// RequestType returns "create_buffer_request".
func (*CreateBufferRequest) RequestType() string { return "create_buffer_request" }

// RequestType returns "create_buffers_request".
func (*CreateBuffersRequest) RequestType() string { return "create_buffers_request" }

// RequestType returns "seal_request".
func (*SealRequest) RequestType() string { return "seal_request" }

// RequestType returns "get_buffers_request".
func (*GetBuffersRequest) RequestType() string { return "get_buffers_request" }

// RequestType returns "drop_buffer_request".
func (*DropBufferRequest) RequestType() string { return "drop_buffer_request" }

// RequestType returns "shrink_buffer_request".
func (*ShrinkBufferRequest) RequestType() string { return "shrink_buffer_request" }

// RequestType returns "release_request".
func (*ReleaseRequest) RequestType() string { return "release_request" }

// RequestType returns "increase_reference_count_request".
func (*IncreaseReferenceCountRequest) RequestType() string { return "increase_reference_count_request" }

// RequestType returns "create_data_request".
func (*CreateDataRequest) RequestType() string { return "create_data_request" }

// RequestType returns "create_datas_request".
func (*CreateDatasRequest) RequestType() string { return "create_datas_request" }

// RequestType returns "get_data_request".
func (*GetDataRequest) RequestType() string { return "get_data_request" }

// RequestType returns "list_data_request".
func (*ListDataRequest) RequestType() string { return "list_data_request" }

// RequestType returns "exists_request".
func (*ExistsRequest) RequestType() string { return "exists_request" }

// RequestType returns "persist_request".
func (*PersistRequest) RequestType() string { return "persist_request" }

// RequestType returns "if_persist_request".
func (*IfPersistRequest) RequestType() string { return "if_persist_request" }

// RequestType returns "label_request".
func (*LabelRequest) RequestType() string { return "label_request" }

// RequestType returns "shallow_copy_request".
func (*ShallowCopyRequest) RequestType() string { return "shallow_copy_request" }

// RequestType returns "put_name_request".
func (*PutNameRequest) RequestType() string { return "put_name_request" }

// RequestType returns "get_name_request".
func (*GetNameRequest) RequestType() string { return "get_name_request" }

// RequestType returns "list_name_request".
func (*ListNameRequest) RequestType() string { return "list_name_request" }

// RequestType returns "drop_name_request".
func (*DropNameRequest) RequestType() string { return "drop_name_request" }

// RequestType returns "clear_request".
func (*ClearRequest) RequestType() string { return "clear_request" }

// RequestType returns "memory_trim_request".
func (*MemoryTrimRequest) RequestType() string { return "memory_trim_request" }

// RequestType returns "instance_status_request".
func (*InstanceStatusRequest) RequestType() string { return "instance_status_request" }

// RequestType returns "cluster_meta".
func (*ClusterMetaRequest) RequestType() string { return "cluster_meta" }

// RequestType returns "debug_command".
func (*DebugRequest) RequestType() string { return "debug_command" }

// RequestType is del_data_with_feedbacks_request or del_data_request.
func (r *DelDataRequest) RequestType() string {
	if r.feedback {
		return "del_data_with_feedbacks_request"
	}
	return "del_data_request"
}

// NewDelDataRequest returns a del_data_with_feedbacks_request.
func NewDelDataRequest(idl []ids.ObjectID, force, deep, memoryTrim bool) *DelDataRequest {
	return &DelDataRequest{ID: idl, Force: force, Deep: deep, MemoryTrim: memoryTrim, feedback: true}
}
