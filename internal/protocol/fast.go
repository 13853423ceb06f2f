package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/v6d-io/v6d-go/internal/jsonscan"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/tree"
)

// Fast paths for the messages of every put and get. encoding/json costs
// several microseconds per message here: reflection, and a validating rescan
// of every json.RawMessage field (the metadata trees) on both encode and
// decode, against a round trip of about 20 µs. Replies on hot paths encode
// themselves by appending; everything else, and any reply whose fast encoder
// declines, goes through encoding/json. Tests check that both encodings
// decode to the same values.

// appender is implemented by replies that encode themselves by appending
// their JSON to dst; ok false leaves it to encoding/json.
type appender interface {
	appendJSON(dst []byte) (out []byte, ok bool)
}

// AppendReply appends the JSON of reply, whose header's Type must be set, to
// dst.
func AppendReply(dst []byte, reply Reply) ([]byte, error) {
	if a, ok := reply.(appender); ok && reply.ReplyHeader().Code == status.OK {
		if out, ok := a.appendJSON(dst); ok {
			return out, nil
		}
	}
	body, err := Marshal(reply)
	if err != nil {
		return dst, err
	}
	return append(dst, body...), nil
}

// Marshal is json.Marshal without HTML escaping: "<" stays "<" (typenames
// are full of them), as upstream writes it. See tree.Marshal.
func Marshal(v any) ([]byte, error) { return tree.Marshal(v) }

// AppendString appends s as a JSON string, as Marshal writes it. See
// tree.AppendString.
func AppendString(dst []byte, s string) []byte { return tree.AppendString(dst, s) }

// appendHead appends `{"type":"<t>"`; t is one of our reply types, plain
// ASCII with nothing to escape.
func appendHead(dst []byte, h *Header) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, h.Type...)
	return append(dst, '"')
}

func appendKey(dst []byte, key string) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

func appendUint(dst []byte, key string, v uint64) []byte {
	return strconv.AppendUint(appendKey(dst, key), v, 10)
}

func appendBool(dst []byte, key string, v bool) []byte {
	return strconv.AppendBool(appendKey(dst, key), v)
}

func appendUints[T ~uint64](dst []byte, key string, vs []T) []byte {
	dst = append(appendKey(dst, key), '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(v), 10)
	}
	return append(dst, ']')
}

func appendInts(dst []byte, key string, vs []int) []byte {
	dst = append(appendKey(dst, key), '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(v), 10)
	}
	return append(dst, ']')
}

// appendRaw appends a raw JSON value that came from the store (valid by
// construction); an empty one is null, as encoding/json writes it.
func appendRaw(dst []byte, key string, raw json.RawMessage) []byte {
	dst = appendKey(dst, key)
	if len(bytes.TrimSpace(raw)) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, raw...)
}

// appendJSON appends the payload as a JSON object.
func (p *Payload) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"object_id":`...)
	dst = strconv.AppendUint(dst, uint64(p.ObjectID), 10)
	dst = strconv.AppendInt(appendKey(dst, "store_fd"), int64(p.StoreFd), 10)
	dst = appendUint(dst, "data_offset", p.DataOffset)
	dst = appendUint(dst, "data_size", p.DataSize)
	dst = appendUint(dst, "map_size", p.MapSize)
	dst = appendUint(dst, "pointer", p.Pointer)
	dst = appendBool(dst, "is_sealed", p.IsSealed)
	dst = appendBool(dst, "is_owner", p.IsOwner)
	dst = appendBool(dst, "is_gpu", p.IsGPU)
	return append(dst, '}')
}

func appendPayloads(dst []byte, key string, ps []Payload) []byte {
	dst = append(appendKey(dst, key), '[')
	for i := range ps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = ps[i].appendJSON(dst)
	}
	return append(dst, ']')
}

func (r *AckReply) appendJSON(dst []byte) ([]byte, bool) {
	return append(appendHead(dst, &r.Header), '}'), true
}

func (r *ExistsReply) appendJSON(dst []byte) ([]byte, bool) {
	return append(appendBool(appendHead(dst, &r.Header), "exists", r.Exists), '}'), true
}

func (r *CreateBufferReply) appendJSON(dst []byte) ([]byte, bool) {
	dst = appendUint(appendHead(dst, &r.Header), "id", uint64(r.ID))
	dst = r.Created.appendJSON(appendKey(dst, "created"))
	dst = strconv.AppendInt(appendKey(dst, "fd"), int64(r.Fd), 10)
	return append(dst, '}'), true
}

func (r *BuffersReply) appendJSON(dst []byte) ([]byte, bool) {
	dst = appendHead(dst, &r.Header)
	if len(r.IDs) > 0 {
		dst = appendUints(dst, "ids", r.IDs)
	}
	dst = appendPayloads(dst, "payloads", r.Payloads)
	dst = appendInts(dst, "fds", r.Fds)
	dst = strconv.AppendInt(appendKey(dst, "num"), int64(r.Num), 10)
	dst = appendBool(dst, "compress", r.Compress)
	if r.Lease != nil {
		dst = r.Lease.appendJSON(appendKey(dst, "lease"))
	}
	for i := range r.Payloads { // the numbered keys older upstream clients read
		dst = r.Payloads[i].appendJSON(appendKey(dst, strconv.Itoa(i)))
	}
	return append(dst, '}'), true
}

func (r *CreateDataReply) appendJSON(dst []byte) ([]byte, bool) {
	dst = appendUint(appendHead(dst, &r.Header), "id", uint64(r.ID))
	dst = appendUint(dst, "signature", r.Signature)
	dst = appendUint(dst, "instance_id", r.InstanceID)
	if len(r.Content) > 0 {
		dst = appendRaw(dst, "content", r.Content)
	}
	if len(r.InlineIDs) > 0 {
		dst = appendUints(dst, "inline_ids", r.InlineIDs)
	}
	if r.Lease != nil {
		dst = r.Lease.appendJSON(appendKey(dst, "lease"))
	}
	return append(dst, '}'), true
}

func (g *LeaseGrant) appendJSON(dst []byte) []byte {
	dst = strconv.AppendUint(append(dst, `{"offset":`...), g.Offset, 10)
	dst = appendUint(dst, "size", g.Size)
	dst = strconv.AppendInt(appendKey(dst, "store_fd"), int64(g.StoreFd), 10)
	dst = appendUint(dst, "first_id", uint64(g.FirstID))
	dst = appendUint(dst, "ids", g.IDs)
	return append(dst, '}')
}

func (r *GetDataReply) appendJSON(dst []byte) ([]byte, bool) {
	dst = appendRaw(appendHead(dst, &r.Header), "content", r.Content)
	if len(r.Payloads) > 0 {
		dst = appendPayloads(dst, "payloads", r.Payloads)
	}
	if len(r.Fds) > 0 {
		dst = appendInts(dst, "fds", r.Fds)
	}
	if r.MetaEpoch != nil {
		dst = appendUint(dst, "meta_epoch", *r.MetaEpoch)
	}
	if len(r.Shapes) > 0 {
		dst = appendUints(dst, "shapes", r.Shapes)
	}
	if r.SyncError != "" {
		dst = AppendString(appendKey(dst, "sync_error"), r.SyncError)
	}
	return append(dst, '}'), true
}

// requestAppender is implemented by the requests of every put and get: they
// append their fields (each preceded by a comma) after the "type".
type requestAppender interface {
	appendFields(dst []byte) []byte
}

func (r *CreateBufferRequest) appendFields(dst []byte) []byte {
	return appendUint(dst, "size", r.Size)
}

func (r *CreateBuffersRequest) appendFields(dst []byte) []byte {
	dst = strconv.AppendInt(appendKey(dst, "num"), int64(r.Num), 10)
	dst = appendUints(dst, "sizes", r.Sizes)
	if r.Lease {
		dst = appendBool(dst, "lease", true)
		if r.LeaseKeep {
			dst = appendBool(dst, "lease_keep", true)
		}
		dst = appendUint(dst, "lease_size", r.LeaseSize)
		dst = appendUint(dst, "lease_need", r.LeaseNeed)
		if len(r.LeaseBlobs) > 0 {
			dst = appendUints(dst, "lease_blobs", r.LeaseBlobs)
		}
	}
	return dst
}

func (r *SealRequest) appendFields(dst []byte) []byte {
	return appendUint(dst, "object_id", uint64(r.ObjectID))
}

func (r *ReleaseRequest) appendFields(dst []byte) []byte {
	dst = appendUint(dst, "object_id", uint64(r.ObjectID))
	if len(r.IDs) > 0 {
		dst = appendUints(dst, "ids", r.IDs)
	}
	return dst
}

func (r *ExistsRequest) appendFields(dst []byte) []byte {
	return appendUint(dst, "id", uint64(r.ID))
}

func (r *GetDataRequest) appendFields(dst []byte) []byte {
	dst = appendUints(dst, "id", r.ID)
	dst = appendBool(dst, "sync_remote", r.SyncRemote)
	dst = appendBool(dst, "wait", r.Wait)
	if r.WithBuffers {
		dst = appendBool(dst, "with_buffers", true)
	}
	return dst
}

// appendFields writes Content as given: the daemon validates it, and the
// client checked it is JSON before (Client.create).
func (r *CreateDataRequest) appendFields(dst []byte) []byte {
	dst = appendRaw(dst, "content", r.Content)
	if len(r.Seal) > 0 {
		dst = appendUints(dst, "seal", r.Seal)
	}
	if len(r.Inline) > 0 {
		dst = appendUints(dst, "inline", r.Inline)
	}
	if r.WithContent {
		dst = appendBool(dst, "with_content", true)
	}
	if len(r.LeaseBlobs) > 0 {
		dst = appendUints(dst, "lease_blobs", r.LeaseBlobs)
	}
	if r.LeaseSize > 0 {
		dst = appendUint(dst, "lease_size", r.LeaseSize)
	}
	if r.ID != 0 {
		dst = appendUint(dst, "id", uint64(r.ID))
	}
	if r.Pipelined {
		dst = appendBool(dst, "pipelined", true)
	}
	return dst
}

// requestType returns the "type" of a request body (a slice of it) when it
// is the first key with a plain string value, as every client we know writes
// it; ok is false otherwise and the caller decodes the body to find it.
func requestType(body []byte) ([]byte, bool) {
	s := jsonscan.Scanner{Buf: body}
	if s.Expect('{') != nil {
		return nil, false
	}
	if k, err := s.Key(); err != nil || string(k) != "type" || s.Expect(':') != nil {
		return nil, false
	}
	raw, escaped, err := s.RawString()
	if err != nil || escaped {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}
