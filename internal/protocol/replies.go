package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/v6d-io/v6d-go/internal/ids"

	"github.com/v6d-io/v6d-go/internal/status"
)

// AckReply is the reply of requests that return nothing but success
// (seal_reply, release_reply, put_name_reply, ...).
type AckReply struct {
	Header
}

// RegisterReply answers register_request.
type RegisterReply struct {
	Header
	IPCSocket             string `json:"ipc_socket"`
	RPCEndpoint           string `json:"rpc_endpoint"`
	InstanceID            uint64 `json:"instance_id"`
	SessionID             uint64 `json:"session_id"`
	Version               string `json:"version"`
	StoreMatch            bool   `json:"store_match"`
	SupportRPCCompression bool   `json:"support_rpc_compression"`
	// MetaEpochOffset (our extension) is the offset in the arena of the
	// meta epoch (docs/protocol.md, "Arena header"); 0 when there is none.
	MetaEpochOffset uint64 `json:"meta_epoch_offset,omitempty"`
	// Extensions (ours) lists the extensions the daemon has; upstream's
	// daemon sends none, and a client must then use only upstream's
	// messages (docs/protocol.md, "Extensions").
	Extensions []string `json:"extensions,omitempty"`
	// Directory (our extension, only to a client that listed
	// ExtDirectory) names the fds that follow the reply, in this order:
	// the arena's read-only fd, the directory's, and the connection's pin
	// page (read-write).
	Directory *DirectoryFds `json:"directory,omitempty"`
}

// DirectoryFds are the fds of register_reply.directory (daemon fd numbers).
type DirectoryFds struct {
	StoreFd     int `json:"store_fd"`
	DirectoryFd int `json:"directory_fd"`
	PinsFd      int `json:"pins_fd"`
}

// The extensions of the protocol, as named in register_request and
// register_reply (docs/protocol.md, "Extensions").
const (
	// ExtSeal is create_data(s).seal: blobs sealed in the same round trip.
	ExtSeal = "create_data.seal"
	// ExtInline is create_data.inline: blob bytes after the frame.
	ExtInline = "create_data.inline"
	// ExtWithContent is create_data.with_content: the stored tree in the reply.
	ExtWithContent = "create_data.with_content"
	// ExtWithBuffers is get_data.with_buffers: payloads and references in
	// the get_data reply.
	ExtWithBuffers = "get_data.with_buffers"
	// ExtReleaseIDs is release.ids: many blobs released by one request.
	ExtReleaseIDs = "release.ids"
	// ExtMetaEpoch is the meta epoch of the arena header and get_data's
	// meta_epoch (the client's tree cache).
	ExtMetaEpoch = "meta_epoch"
	// ExtLease is the lease of create_buffers and create_data: the client
	// carves its new blobs from leased arena memory and ids, so a put is one
	// create_data.
	ExtLease = "lease"
	// ExtDirectory is the directory and the pin page (register_reply's
	// directory): gets without a round trip (docs/design.md).
	ExtDirectory = "get.directory"
	// ExtPipelined is create_data.id and create_data.pipelined: puts into
	// leased memory with an id the client takes from its lease, sent
	// without waiting for a reply (docs/design.md, "Pipelined puts").
	ExtPipelined = "create_data.pipelined"
	// ExtStreams is the streams' extension: create_stream.readers and
	// .capacity, push_next_stream_chunk.timeout_ms.
	ExtStreams = "stream.readers"
)

// Extensions is every extension this implementation has, daemon and client.
var Extensions = []string{ExtSeal, ExtInline, ExtWithContent, ExtWithBuffers, ExtReleaseIDs, ExtMetaEpoch, ExtLease, ExtDirectory, ExtPipelined, ExtStreams}

// LeaseGrant (our extension) is a connection's lease as a reply reports it:
// the arena range [Offset, Offset+Size) the client may carve blobs from,
// mapped through StoreFd (the read-write fd), and the ids [FirstID,
// FirstID+IDs) it names them with. Size 0: no memory is leased.
type LeaseGrant struct {
	Offset  uint64       `json:"offset"`
	Size    uint64       `json:"size"`
	StoreFd int          `json:"store_fd"`
	FirstID ids.ObjectID `json:"first_id"`
	IDs     uint64       `json:"ids"`
}

// CreateBufferReply answers create_buffer_request. Fd is the store fd that
// follows the reply, or -1 when the connection already has it.
type CreateBufferReply struct {
	Header
	ID      ids.ObjectID `json:"id"`
	Created Payload      `json:"created"`
	Fd      int          `json:"fd"`
}

// BuffersReply answers create_buffers_request and get_buffers_request: the
// payloads (also under keys "0".."n-1" for older upstream clients) and the fds
// that follow the reply.
type BuffersReply struct {
	Header
	IDs      []ids.ObjectID `json:"ids,omitempty"`
	Payloads []Payload      `json:"payloads"`
	Fds      []int          `json:"fds"`
	Num      int            `json:"num"`
	Compress bool           `json:"compress"`
	Lease    *LeaseGrant    `json:"lease,omitempty"` // ExtLease
}

// MarshalJSON adds the numbered keys upstream's readers expect.
func (r *BuffersReply) MarshalJSON() ([]byte, error) {
	type plain BuffersReply
	body, err := json.Marshal((*plain)(r))
	if err != nil {
		return nil, err
	}
	body = body[:len(body)-1]
	for i := range r.Payloads {
		p, err := json.Marshal(&r.Payloads[i])
		if err != nil {
			return nil, err
		}
		body = append(body, ',', '"')
		body = strconv.AppendInt(body, int64(i), 10)
		body = append(body, '"', ':')
		body = append(body, p...)
	}
	return append(body, '}'), nil
}

// CreateDataReply answers create_data_request. Content (our extension) is the
// stored tree.
type CreateDataReply struct {
	Header
	ID         ids.ObjectID    `json:"id"`
	Signature  uint64          `json:"signature"`
	InstanceID uint64          `json:"instance_id"`
	Content    json.RawMessage `json:"content,omitempty"`
	// InlineIDs (our extension) are the ids of the blobs of an inline create.
	InlineIDs []ids.ObjectID `json:"inline_ids,omitempty"`
	// Lease (ExtLease) is the new lease, when the request asked for one.
	Lease *LeaseGrant `json:"lease,omitempty"`
}

// CreateDatasReply answers create_datas_request.
type CreateDatasReply struct {
	Header
	Num         int            `json:"num"`
	IDs         []ids.ObjectID `json:"ids"`
	Signatures  []uint64       `json:"signatures"`
	InstanceIDs []uint64       `json:"instance_ids"`
}

// GetDataReply answers get_data_request and list_data_request: Content maps
// "o…" ids to trees. Payloads and Fds are set for WithBuffers requests.
type GetDataReply struct {
	Header
	Content  json.RawMessage `json:"content"`
	Payloads []Payload       `json:"payloads,omitempty"`
	Fds      []int           `json:"fds,omitempty"`
	// MetaEpoch (our extension, with_buffers only) is the daemon's meta
	// epoch when the trees were read: they stay valid while it reads the same.
	MetaEpoch *uint64 `json:"meta_epoch,omitempty"`
	// Shapes (our extension, with_buffers only) is the daemon's shape
	// number of each tree in Content, in Content's order (0: none), as
	// its directory records carry them (docs/design.md, "internal/tree").
	// Upstream's clients read the keys they know and ignore it.
	Shapes []uint64 `json:"shapes,omitempty"`
	// SyncError (our extension) is set when the daemon could not catch up
	// with etcd before answering: an id missing from Content may then exist
	// on another instance all the same. Our client says so in its
	// ObjectNotExists.
	SyncError string `json:"sync_error,omitempty"`
}

// DelDataReply answers del_data(_with_feedbacks)_request.
type DelDataReply struct {
	Header
	DeletedBids []ids.ObjectID `json:"deleted_bids"`
	// Deleted is how many ids (objects and blobs) the delete removed; ours
	// only (nil from upstream's daemon, which upstream's clients ignore).
	Deleted *int `json:"deleted,omitempty"`
}

// ExistsReply answers exists_request.
type ExistsReply struct {
	Header
	Exists bool `json:"exists"`
}

// IfPersistReply answers if_persist_request.
type IfPersistReply struct {
	Header
	Persist bool `json:"persist"`
}

// ShallowCopyReply answers shallow_copy_request.
type ShallowCopyReply struct {
	Header
	TargetID ids.ObjectID `json:"target_id"`
}

// GetNameReply answers get_name_request.
type GetNameReply struct {
	Header
	ObjectID ids.ObjectID `json:"object_id"`
}

// ListNameReply answers list_name_request.
type ListNameReply struct {
	Header
	Size  int                     `json:"size"`
	Names map[string]ids.ObjectID `json:"names"`
}

// MemoryTrimReply answers memory_trim_request.
type MemoryTrimReply struct {
	Header
	Trimmed bool `json:"trimmed"`
}

// InstanceStatus is the body of instance_status_reply's "meta".
type InstanceStatus struct {
	InstanceID  uint64 `json:"instance_id"`
	Deployment  string `json:"deployment"`
	MemoryUsage uint64 `json:"memory_usage"`
	MemoryLimit uint64 `json:"memory_limit"`
	// MemoryLeased (ours) is arena memory leased to clients to carve new
	// blobs from (ExtLease): not in MemoryUsage, not free for others.
	MemoryLeased     uint64 `json:"memory_leased"`
	DeferredRequests int    `json:"deferred_requests"`
	IPCConnections   int    `json:"ipc_connections"`
	RPCConnections   int    `json:"rpc_connections"`
	// MetaPending (ours) counts the changes of persisted objects (deletes,
	// labels, names of deleted objects) queued until etcd answers again:
	// 0 when the cluster has everything this daemon did.
	MetaPending int `json:"meta_pending"`
	// SpilledObjects and SpilledBytes (ours) are the blobs whose bytes are
	// in spill files now, and their size (docs/design.md, "Spilling").
	SpilledObjects int    `json:"spilled_objects"`
	SpilledBytes   uint64 `json:"spilled_bytes"`
}

// InstanceStatusReply answers instance_status_request.
type InstanceStatusReply struct {
	Header
	Meta InstanceStatus `json:"meta"`
}

// ClusterMetaReply answers cluster_meta.
type ClusterMetaReply struct {
	Header
	Meta json.RawMessage `json:"meta"`
}

// EncodeError returns the body of an error reply.
func EncodeError(err error) []byte {
	e := status.AsError(err)
	body, _ := json.Marshal(struct {
		Code    status.Code `json:"code"`
		Message string      `json:"message"`
	}{e.Code, e.Message})
	return body
}

// PipelinedError is the frame the daemon sends, in the place of a reply,
// when a pipelined create_data fails: the id it would have created and the
// error. A client reads it ahead of the reply of its next request.
type PipelinedError struct {
	Type    string       `json:"type"` // PipelinedErrorType
	ID      ids.ObjectID `json:"id"`
	Code    status.Code  `json:"code"`
	Message string       `json:"message"`
}

// PipelinedErrorType is the type of a PipelinedError frame; the daemon
// writes it as the first key, so IsPipelinedError needs no decoding.
const PipelinedErrorType = "pipelined_error"

var pipelinedErrorPrefix = []byte(`{"type":"` + PipelinedErrorType + `"`)

// EncodePipelinedError returns the body of a PipelinedError frame.
func EncodePipelinedError(id ids.ObjectID, err error) []byte {
	e := status.AsError(err)
	body, _ := json.Marshal(PipelinedError{Type: PipelinedErrorType, ID: id, Code: e.Code, Message: e.Message})
	return body
}

// IsPipelinedError reports whether body is a PipelinedError frame.
func IsPipelinedError(body []byte) bool { return bytes.HasPrefix(body, pipelinedErrorPrefix) }

// DecodeReply decodes a reply body into r. An error reply, or a reply of a
// type other than want, is returned as an error. Pass a fresh r: fields
// absent from body keep their values.
func DecodeReply(body []byte, want string, r Reply) error {
	*r.ReplyHeader() = Header{}
	if err := UnmarshalReply(body, r); err != nil {
		return status.Errorf(status.Invalid, "malformed reply: %v", err)
	}
	h := r.ReplyHeader()
	if err := h.Err(); err != nil {
		return err
	}
	if h.Type != want {
		return status.Errorf(status.Invalid, "unexpected reply type %q, want %q", h.Type, want)
	}
	return nil
}
