package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	// Extensions (ours) lists the extensions the client uses
	// (docs/protocol.md, "Extensions"). A client that sends none is treated
	// as upstream's: the daemon applies the upstream-client reference rule.
	Extensions []string `json:"extensions,omitempty"`
}

// ExitRequest announces a clean disconnect.
type ExitRequest struct{}

// CreateBufferRequest allocates one unsealed blob.
type CreateBufferRequest struct {
	Size uint64 `json:"size"`
}

// BlobAlignment is the alignment of every blob's offset in the arena and
// the unit its size is rounded up to (the daemon's allocator's,
// alloc.Alignment): the extents a client carves from its lease
// (LeaseBlobs) start at multiples of it.
const BlobAlignment = 64

// CreateBuffersRequest allocates several unsealed blobs at once. With
// Lease (our extension, ExtLease) it also replaces the connection's lease:
// LeaseBlobs (id, offset, size triples carved from the old lease) become
// unsealed blobs first, then the old lease's rest is returned and a new one
// of LeaseSize bytes granted (LeaseNeed bytes when LeaseSize are not free;
// LeaseSize 0 only returns the rest). LeaseKeep adopts LeaseBlobs and keeps
// the lease as it is (the client names blobs before a request about them).
type CreateBuffersRequest struct {
	Num        int      `json:"num"`
	Sizes      []uint64 `json:"sizes"`
	Lease      bool     `json:"lease,omitempty"`
	LeaseKeep  bool     `json:"lease_keep,omitempty"`
	LeaseSize  uint64   `json:"lease_size,omitempty"`
	LeaseNeed  uint64   `json:"lease_need,omitempty"`
	LeaseBlobs []uint64 `json:"lease_blobs,omitempty"`
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
		if *p.Num < 0 || *p.Num > MaxItems {
			return fmt.Errorf("num %d is out of range [0, %d]", *p.Num, MaxItems)
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

// EvictRequest spills the objects' blobs that no client holds now.
type EvictRequest struct {
	IDs []ids.ObjectID `json:"ids"`
}

// LoadRequest loads the objects' spilled blobs back; with Pin, the
// connection also holds each blob (none spills) until unpin_request.
type LoadRequest struct {
	IDs []ids.ObjectID `json:"ids"`
	Pin bool           `json:"pin"`
}

// UnpinRequest drops the connection's holds of the objects' blobs.
type UnpinRequest struct {
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
	// LeaseBlobs (our extension, ExtLease) are blobs the client carved from
	// its lease, as (id, offset, size) triples: they become unsealed blobs
	// of the connection before Seal applies. LeaseSize > 0 asks for a new
	// lease of that many bytes in the reply, best effort.
	LeaseBlobs []uint64 `json:"lease_blobs,omitempty"`
	LeaseSize  uint64   `json:"lease_size,omitempty"`
	// ID (our extension, ExtPipelined) makes the request a leased put: the
	// object gets this id, one of the lease's block with the blob bit
	// cleared and above every blob's, and its {"inline": i} members are
	// LeaseBlobs[i], sealed with it (Seal, Inline and LeaseSize must be
	// empty). Pipelined asks for no reply unless it fails (then a
	// PipelinedError frame), and counts in the pin page's submitted word.
	ID        ids.ObjectID `json:"id,omitempty"`
	Pipelined bool         `json:"pipelined,omitempty"`
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

// GetNameRequest resolves a name. TimeoutMs (our extension) bounds Wait, in
// [0, MaxTimeoutMs]; absent, Wait has no limit.
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

// unimplemented lists upstream request types this daemon knows of but does
// not serve yet; they get NotImplemented instead of Invalid.
var unimplemented = map[string]bool{
	"evict_request": true, "load_request": true, "unpin_request": true,
	"migrate_object_request": true, "new_session_request": true, "delete_session_request": true,
	"make_arena_request": true, "finalize_arena_request": true, "create_gpu_buffer_request": true,
	"get_gpu_buffers_request": true, "create_disk_buffer_request": true, "create_buffer_by_plasma_request": true,
	"get_buffers_by_plasma_request": true, "plasma_seal_request": true, "plasma_release_request": true,
	"plasma_del_data_request": true, "move_buffers_ownership_request": true, "acquire_lock_request": true,
	"release_lock_request": true, "is_spilled_request": true, "is_in_use_request": true,
}

// Frame is a decoded request frame.
type Frame struct {
	// Kind is the request's kind; KindNone when its type is unknown.
	Kind Kind
	// Wire is the request's "type" as sent ("" when there is none).
	Wire string
	// Req is the decoded request; nil when its fields could not be decoded.
	// With an error, a non-nil Req decoded but is invalid: the caller must
	// not act on it, only answer it as its kind requires (a pipelined
	// create_data's failure goes back as a PipelinedError frame, since its
	// client awaits no reply, and counts as handled).
	Req Request
	// Trailing is the number of bytes that follow the frame on the stream
	// and belong to this request (Trailer). The reader must consume them,
	// also when decoding failed, or close the connection.
	Trailing uint64
}

// DecodeRequest decodes a request frame body. The returned Frame names the
// kind and the trailing byte count even when decoding the fields fails, so
// that the error reply can name the type and the stream stays in step. An
// error is a *status.Error (Invalid or NotImplemented), except when the
// trailing byte count cannot be known: then it wraps ErrUnframed and the
// connection must be closed.
func DecodeRequest(body []byte) (Frame, error) {
	var f Frame
	if t, ok := requestType(body); ok {
		f.Kind = kindByWire[string(t)]
		if f.Kind != KindNone {
			f.Wire = f.Kind.String()
		} else {
			f.Wire = string(t)
		}
	} else {
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			return f, status.Errorf(status.Invalid, "malformed message: %v", err)
		}
		f.Wire, f.Kind = head.Type, KindOf(head.Type)
	}
	if f.Kind == KindNone {
		switch {
		case f.Wire == "":
			return f, status.Errorf(status.Invalid, "message has no \"type\"")
		case unimplemented[f.Wire]:
			return f, status.Errorf(status.NotImplemented, "%s is not implemented by this daemon", f.Wire)
		}
		return f, status.Errorf(status.Invalid, "unknown message type %q", f.Wire)
	}
	req := f.Kind.New()
	var err error
	if !fastDecodeRequest(body, req) {
		req = f.Kind.New()
		err = json.Unmarshal(body, req)
	}
	decoded := err == nil
	if err != nil {
		err = status.Errorf(status.Invalid, "bad %s: %v", f.Wire, err)
	} else if v, ok := req.(validator); ok {
		err = v.validate()
	}
	if kinds[f.Kind].trailing {
		t, ok := req.(Trailer)
		if err != nil {
			// The fields may be half decoded: read the count on its own.
			t, ok = f.Kind.New().(Trailer)
			if ok && t.decodeTrailing(body) != nil {
				return f, fmt.Errorf("%w: %s with an unreadable trailing byte count: %w", ErrUnframed, f.Wire, err)
			}
		}
		if !ok {
			return f, fmt.Errorf("%w: %s has no trailing byte count", ErrUnframed, f.Wire)
		}
		n, tok := t.TrailingBytes()
		if !tok {
			return f, fmt.Errorf("%w: %s announces trailing bytes of no usable count (over 63 bits, or compressed, which this daemon does not support)", ErrUnframed, f.Wire)
		}
		f.Trailing = n
	}
	if decoded {
		f.Req = req
	}
	return f, err
}

// EncodeRequest marshals a request with its "type" as the first key.
func EncodeRequest(wireType string, req Request) ([]byte, error) {
	return appendRequestBody(make([]byte, 0, 96), wireType, req)
}

// AppendRequest appends the frame of req (EncodeRequest's body) to dst,
// writing the body in place: a client that reuses dst encodes a put or a get
// without allocating. On an error dst is returned as it was.
func AppendRequest(dst []byte, wireType string, req Request) ([]byte, error) {
	out, at := BeginFrame(dst)
	out, err := appendRequestBody(out, wireType, req)
	if err != nil {
		return dst, err
	}
	EndFrame(out, at)
	return out, nil
}

func appendRequestBody(out []byte, wireType string, req Request) ([]byte, error) {
	if a, ok := req.(requestAppender); ok {
		out = append(out, `{"type":"`...)
		out = append(out, wireType...)
		return append(a.appendFields(append(out, '"')), '}'), nil
	}
	body, err := Marshal(req)
	if err != nil {
		return nil, err
	}
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

// Each request type names its wire type, from the kinds table.

// RequestType returns KindRegister's wire type.
func (*RegisterRequest) RequestType() string { return KindRegister.String() }

// RequestType returns KindExit's wire type.
func (*ExitRequest) RequestType() string { return KindExit.String() }

// RequestType returns KindCreateBuffer's wire type.
func (*CreateBufferRequest) RequestType() string { return KindCreateBuffer.String() }

// RequestType returns KindCreateBuffers's wire type.
func (*CreateBuffersRequest) RequestType() string { return KindCreateBuffers.String() }

// RequestType returns KindSeal's wire type.
func (*SealRequest) RequestType() string { return KindSeal.String() }

// RequestType returns KindGetBuffers's wire type.
func (*GetBuffersRequest) RequestType() string { return KindGetBuffers.String() }

// RequestType returns KindDropBuffer's wire type.
func (*DropBufferRequest) RequestType() string { return KindDropBuffer.String() }

// RequestType returns KindShrinkBuffer's wire type.
func (*ShrinkBufferRequest) RequestType() string { return KindShrinkBuffer.String() }

// RequestType returns KindRelease's wire type.
func (*ReleaseRequest) RequestType() string { return KindRelease.String() }

// RequestType returns KindIncreaseReferenceCount's wire type.
func (*IncreaseReferenceCountRequest) RequestType() string {
	return KindIncreaseReferenceCount.String()
}

// RequestType returns KindCreateData's wire type.
func (*CreateDataRequest) RequestType() string { return KindCreateData.String() }

// RequestType returns KindCreateDatas's wire type.
func (*CreateDatasRequest) RequestType() string { return KindCreateDatas.String() }

// RequestType returns KindGetData's wire type.
func (*GetDataRequest) RequestType() string { return KindGetData.String() }

// RequestType returns KindListData's wire type.
func (*ListDataRequest) RequestType() string { return KindListData.String() }

// RequestType returns KindExists's wire type.
func (*ExistsRequest) RequestType() string { return KindExists.String() }

// RequestType returns KindPersist's wire type.
func (*PersistRequest) RequestType() string { return KindPersist.String() }

// RequestType returns KindIfPersist's wire type.
func (*IfPersistRequest) RequestType() string { return KindIfPersist.String() }

// RequestType returns KindLabel's wire type.
func (*LabelRequest) RequestType() string { return KindLabel.String() }

// RequestType returns KindShallowCopy's wire type.
func (*ShallowCopyRequest) RequestType() string { return KindShallowCopy.String() }

// RequestType returns KindPutName's wire type.
func (*PutNameRequest) RequestType() string { return KindPutName.String() }

// RequestType returns KindGetName's wire type.
func (*GetNameRequest) RequestType() string { return KindGetName.String() }

// RequestType returns KindListName's wire type.
func (*ListNameRequest) RequestType() string { return KindListName.String() }

// RequestType returns KindDropName's wire type.
func (*DropNameRequest) RequestType() string { return KindDropName.String() }

// RequestType returns KindClear's wire type.
func (*ClearRequest) RequestType() string { return KindClear.String() }

// RequestType returns KindMemoryTrim's wire type.
func (*MemoryTrimRequest) RequestType() string { return KindMemoryTrim.String() }

// RequestType returns KindInstanceStatus's wire type.
func (*InstanceStatusRequest) RequestType() string { return KindInstanceStatus.String() }

// RequestType returns KindClusterMeta's wire type.
func (*ClusterMetaRequest) RequestType() string { return KindClusterMeta.String() }

// RequestType returns KindDebug's wire type.
func (*DebugRequest) RequestType() string { return KindDebug.String() }

// RequestType is del_data_with_feedbacks_request or del_data_request.
func (r *DelDataRequest) RequestType() string {
	if r.feedback {
		return KindDelDataWithFeedbacks.String()
	}
	return KindDelData.String()
}

// NewDelDataRequest returns a del_data_with_feedbacks_request.
func NewDelDataRequest(idl []ids.ObjectID, force, deep, memoryTrim bool) *DelDataRequest {
	return &DelDataRequest{ID: idl, Force: force, Deep: deep, MemoryTrim: memoryTrim, feedback: true}
}

// RequestType returns KindEvict's wire type.
func (*EvictRequest) RequestType() string { return KindEvict.String() }

// RequestType returns KindLoad's wire type.
func (*LoadRequest) RequestType() string { return KindLoad.String() }

// RequestType returns KindUnpin's wire type.
func (*UnpinRequest) RequestType() string { return KindUnpin.String() }
