package protocol

import (
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// The stream messages, as upstream spells them (src/common/util/protocols.cc):
// create_stream and open_stream name the stream "object_id", the others
// "id". Our extension ExtStreams adds optional fields upstream's daemon
// would ignore and upstream's clients never send: a stream's reader slots
// and capacity at create, a bound on a push's wait.

// CreateStreamRequest makes an existing object a stream.
type CreateStreamRequest struct {
	ObjectID ids.ObjectID `json:"object_id"`
	// Readers (ExtStreams) is the number of readers that each see every
	// chunk (default 1, upstream's one reader).
	Readers int `json:"readers,omitempty"`
	// Capacity (ExtStreams) is how many chunks the stream buffers before
	// its writer waits (default: the daemon's).
	Capacity int `json:"capacity,omitempty"`
}

// OpenStreamRequest opens a stream for reading (mode 1) or writing (mode 2).
type OpenStreamRequest struct {
	ObjectID ids.ObjectID `json:"object_id"`
	Mode     int64        `json:"mode"`
}

// GetNextStreamChunkRequest asks for a new blob of size bytes to write the
// next chunk into; the blob asked for before is sealed and pushed first.
type GetNextStreamChunkRequest struct {
	ID   ids.ObjectID `json:"id"`
	Size uint64       `json:"size"`
}

// PushNextStreamChunkRequest appends a sealed object or blob to a stream.
// TimeoutMs (ExtStreams) bounds the wait when the stream is full, in [0,
// MaxTimeoutMs]; absent, the daemon's default bound applies.
type PushNextStreamChunkRequest struct {
	ID        ids.ObjectID `json:"id"`
	Chunk     ids.ObjectID `json:"chunk"`
	TimeoutMs *int64       `json:"timeout_ms,omitempty"`
}

// PullNextStreamChunkRequest asks for the next chunk of a stream; the
// reply waits, without limit as upstream's, until there is one or the
// stream ends.
type PullNextStreamChunkRequest struct {
	ID ids.ObjectID `json:"id"`
}

// StopStreamRequest ends a stream, with failure or not.
type StopStreamRequest struct {
	ID     ids.ObjectID `json:"id"`
	Failed bool         `json:"failed"`
}

// DropStreamRequest removes a stream.
type DropStreamRequest struct {
	ID ids.ObjectID `json:"id"`
}

// GetNextStreamChunkReply answers get_next_stream_chunk_request: the new
// blob, as create_buffer_reply's payload, and the store fd that follows
// the reply (-1 when the connection has it already).
type GetNextStreamChunkReply struct {
	Header
	Buffer Payload `json:"buffer"`
	Fd     int     `json:"fd"`
}

// PullNextStreamChunkReply answers pull_next_stream_chunk_request.
type PullNextStreamChunkReply struct {
	Header
	Chunk ids.ObjectID `json:"chunk"`
}

// RequestType returns the message's type.
func (*CreateStreamRequest) RequestType() string { return KindCreateStream.String() }

// RequestType returns the message's type.
func (*OpenStreamRequest) RequestType() string { return KindOpenStream.String() }

// RequestType returns the message's type.
func (*GetNextStreamChunkRequest) RequestType() string { return KindGetNextStreamChunk.String() }

// RequestType returns the message's type.
func (*PushNextStreamChunkRequest) RequestType() string { return KindPushNextStreamChunk.String() }

// RequestType returns the message's type.
func (*PullNextStreamChunkRequest) RequestType() string { return KindPullNextStreamChunk.String() }

// RequestType returns the message's type.
func (*StopStreamRequest) RequestType() string { return KindStopStream.String() }

// RequestType returns the message's type.
func (*DropStreamRequest) RequestType() string { return KindDropStream.String() }

// Limits of the stream extension's fields (internal/streams has the same).
const (
	maxStreamReaders  = 64
	maxStreamCapacity = 1 << 16
)

func (r *CreateStreamRequest) validate() error {
	if r.Readers < 0 || r.Readers > maxStreamReaders {
		return status.Errorf(status.Invalid, "readers %d is out of range [1, %d]", r.Readers, maxStreamReaders)
	}
	if r.Capacity < 0 || r.Capacity > maxStreamCapacity {
		return status.Errorf(status.Invalid, "capacity %d is out of range [1, %d]", r.Capacity, maxStreamCapacity)
	}
	return nil
}

func (r *PushNextStreamChunkRequest) validate() error { return checkTimeout(r.TimeoutMs) }

func checkTimeout(ms *int64) error {
	if ms != nil && (*ms < 0 || *ms > MaxTimeoutMs) {
		return status.Errorf(status.Invalid, "timeout_ms %d is out of range [0, %d]; leave it out for the default", *ms, MaxTimeoutMs)
	}
	return nil
}
