package protocol

import (
	"sort"
)

// Kind is a request type of the protocol: a small number the daemon indexes
// its handler table with. The zero Kind is no request (an unknown type).
type Kind uint8

// The request kinds, one per wire type the daemon understands.
const (
	KindNone Kind = iota
	KindRegister
	KindExit
	KindCreateBuffer
	KindCreateBuffers
	KindSeal
	KindGetBuffers
	KindDropBuffer
	KindShrinkBuffer
	KindRelease
	KindIncreaseReferenceCount
	KindCreateData
	KindCreateDatas
	KindGetData
	KindListData
	KindDelData
	KindDelDataWithFeedbacks
	KindExists
	KindPersist
	KindIfPersist
	KindLabel
	KindShallowCopy
	KindPutName
	KindGetName
	KindListName
	KindDropName
	KindClear
	KindMemoryTrim
	KindInstanceStatus
	KindClusterMeta
	KindDebug
	KindCreateRemoteBuffer
	KindCreateRemoteBuffers
	KindGetRemoteBuffers
	KindFillBuffers
	KindMigrateObject
	KindCreateStream
	KindOpenStream
	KindGetNextStreamChunk
	KindPushNextStreamChunk
	KindPullNextStreamChunk
	KindStopStream
	KindDropStream
	KindEvict
	KindLoad
	KindUnpin

	// NumKinds is one more than the largest Kind: the size of a table
	// indexed by Kind.
	NumKinds
)

// kindInfo is what the protocol knows of a request kind.
type kindInfo struct {
	wire  string         // the request's "type"
	reply string         // its reply's "type"
	new   func() Request // a zero request to decode into
	// trailing: the request may announce bytes that follow its frame
	// (Trailer); they are found even when its other fields fail to decode.
	trailing bool
}

// kinds is the one table of request types: every wire type and reply type
// string is written here and nowhere else.
var kinds = [NumKinds]kindInfo{
	KindRegister:               {"register_request", "register_reply", func() Request { return &RegisterRequest{} }, false},
	KindExit:                   {"exit_request", "exit_reply", func() Request { return &ExitRequest{} }, false},
	KindCreateBuffer:           {"create_buffer_request", "create_buffer_reply", func() Request { return &CreateBufferRequest{} }, false},
	KindCreateBuffers:          {"create_buffers_request", "create_buffers_reply", func() Request { return &CreateBuffersRequest{} }, false},
	KindSeal:                   {"seal_request", "seal_reply", func() Request { return &SealRequest{} }, false},
	KindGetBuffers:             {"get_buffers_request", "get_buffers_reply", func() Request { return &GetBuffersRequest{} }, false},
	KindDropBuffer:             {"drop_buffer_request", "drop_buffer_reply", func() Request { return &DropBufferRequest{} }, false},
	KindShrinkBuffer:           {"shrink_buffer_request", "shrink_buffer_reply", func() Request { return &ShrinkBufferRequest{} }, false},
	KindRelease:                {"release_request", "release_reply", func() Request { return &ReleaseRequest{} }, false},
	KindIncreaseReferenceCount: {"increase_reference_count_request", "increase_reference_count_reply", func() Request { return &IncreaseReferenceCountRequest{} }, false},
	KindCreateData:             {"create_data_request", "create_data_reply", func() Request { return &CreateDataRequest{} }, true},
	KindCreateDatas:            {"create_datas_request", "create_datas_reply", func() Request { return &CreateDatasRequest{} }, false},
	KindGetData:                {"get_data_request", "get_data_reply", func() Request { return &GetDataRequest{} }, false},
	KindListData:               {"list_data_request", "get_data_reply", func() Request { return &ListDataRequest{} }, false},
	KindDelData:                {"del_data_request", "del_data_reply", func() Request { return &DelDataRequest{} }, false},
	KindDelDataWithFeedbacks:   {"del_data_with_feedbacks_request", "del_data_with_feedbacks_reply", func() Request { return &DelDataRequest{feedback: true} }, false},
	KindExists:                 {"exists_request", "exists_reply", func() Request { return &ExistsRequest{} }, false},
	KindPersist:                {"persist_request", "persist_reply", func() Request { return &PersistRequest{} }, false},
	KindIfPersist:              {"if_persist_request", "if_persist_reply", func() Request { return &IfPersistRequest{} }, false},
	KindLabel:                  {"label_request", "label_reply", func() Request { return &LabelRequest{} }, false},
	KindShallowCopy:            {"shallow_copy_request", "shallow_copy_reply", func() Request { return &ShallowCopyRequest{} }, false},
	KindPutName:                {"put_name_request", "put_name_reply", func() Request { return &PutNameRequest{} }, false},
	KindGetName:                {"get_name_request", "get_name_reply", func() Request { return &GetNameRequest{} }, false},
	KindListName:               {"list_name_request", "list_name_reply", func() Request { return &ListNameRequest{} }, false},
	KindDropName:               {"drop_name_request", "drop_name_reply", func() Request { return &DropNameRequest{} }, false},
	KindClear:                  {"clear_request", "clear_reply", func() Request { return &ClearRequest{} }, false},
	KindMemoryTrim:             {"memory_trim_request", "memory_trim_reply", func() Request { return &MemoryTrimRequest{} }, false},
	KindInstanceStatus:         {"instance_status_request", "instance_status_reply", func() Request { return &InstanceStatusRequest{} }, false},
	KindClusterMeta:            {"cluster_meta", "cluster_meta", func() Request { return &ClusterMetaRequest{} }, false},
	KindDebug:                  {"debug_command", "debug_reply", func() Request { return &DebugRequest{} }, false},
	// The remote (TCP) blob transfers (remote.go): blob bytes follow the
	// request or the reply on the stream.
	KindCreateRemoteBuffer:  {"create_remote_buffer_request", "create_buffer_reply", func() Request { return &CreateRemoteBufferRequest{} }, true},
	KindCreateRemoteBuffers: {"create_remote_buffers_request", "create_buffers_reply", func() Request { return &CreateRemoteBuffersRequest{} }, true},
	KindGetRemoteBuffers:    {"get_remote_buffers_request", "get_buffers_reply", func() Request { return &GetRemoteBuffersRequest{} }, false},
	KindFillBuffers:         {"fill_buffers_request", "fill_buffers_reply", func() Request { return &FillBuffersRequest{} }, true},
	// Migration of a remote object's blobs over the peer service (migrate.go).
	KindMigrateObject: {"migrate_object_request", "migrate_object_reply", func() Request { return &MigrateObjectRequest{} }, false},
	// Streams (streams.go).
	KindCreateStream:        {"create_stream_request", "create_stream_reply", func() Request { return &CreateStreamRequest{} }, false},
	KindOpenStream:          {"open_stream_request", "open_stream_reply", func() Request { return &OpenStreamRequest{} }, false},
	KindGetNextStreamChunk:  {"get_next_stream_chunk_request", "get_next_stream_chunk_reply", func() Request { return &GetNextStreamChunkRequest{} }, false},
	KindPushNextStreamChunk: {"push_next_stream_chunk_request", "push_next_stream_chunk_reply", func() Request { return &PushNextStreamChunkRequest{} }, false},
	KindPullNextStreamChunk: {"pull_next_stream_chunk_request", "pull_next_stream_chunk_reply", func() Request { return &PullNextStreamChunkRequest{} }, false},
	KindStopStream:          {"stop_stream_request", "stop_stream_reply", func() Request { return &StopStreamRequest{} }, false},
	KindDropStream:          {"drop_stream_request", "drop_stream_reply", func() Request { return &DropStreamRequest{} }, false},

	// Spilling (upstream's).
	KindEvict: {"evict_request", "evict_reply", func() Request { return &EvictRequest{} }, false},
	KindLoad:  {"load_request", "load_reply", func() Request { return &LoadRequest{} }, false},
	KindUnpin: {"unpin_request", "unpin_reply", func() Request { return &UnpinRequest{} }, false},
}

// kindByWire maps each wire type to its Kind.
var kindByWire = func() map[string]Kind {
	m := make(map[string]Kind, NumKinds)
	for k := KindNone + 1; k < NumKinds; k++ {
		m[kinds[k].wire] = k
	}
	return m
}()

// String returns the kind's wire type ("" for KindNone).
func (k Kind) String() string {
	if k >= NumKinds {
		return ""
	}
	return kinds[k].wire
}

// Reply returns the "type" of the kind's reply ("" for KindNone).
func (k Kind) Reply() string {
	if k >= NumKinds {
		return ""
	}
	return kinds[k].reply
}

// New returns a zero request of the kind, or nil for KindNone.
func (k Kind) New() Request {
	if k == KindNone || k >= NumKinds {
		return nil
	}
	return kinds[k].new()
}

// KindOf returns the Kind of a wire type, or KindNone.
func KindOf(wire string) Kind { return kindByWire[wire] }

// Kinds returns every request kind, in order.
func Kinds() []Kind {
	out := make([]Kind, 0, NumKinds-1)
	for k := KindNone + 1; k < NumKinds; k++ {
		out = append(out, k)
	}
	return out
}

// RequestTypes returns every request type the daemon understands, sorted.
func RequestTypes() []string {
	out := make([]string, 0, NumKinds-1)
	for _, k := range Kinds() {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

// ReplyType returns the reply type string for a request type, from the
// table; for a type outside it, upstream's rule ("_request" becomes
// "_reply").
func ReplyType(requestType string) string {
	if k := KindOf(requestType); k != KindNone {
		return k.Reply()
	}
	if n := len(requestType) - len("_request"); n > 0 && requestType[n:] == "_request" {
		return requestType[:n] + "_reply"
	}
	return requestType + "_reply"
}
