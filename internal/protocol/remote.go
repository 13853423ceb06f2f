package protocol

import (
	"encoding/json"
	"math"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Remote blob transfer (docs/cluster-rpc.md): over TCP no fd can be passed,
// so blob bytes travel on the connection itself, raw and back to back,
// right after the frame that announces them.
//
//   - create_remote_buffer(s)_request (upstream's): the bytes of the new
//     blobs follow the request; the daemon reads them straight into its
//     arena, seals the blobs and replies create_buffer(s)_reply.
//   - get_remote_buffers_request (upstream's): the daemon replies
//     get_buffers_reply, then writes the bytes of every payload, in order.
//   - fill_buffers_request (ours): the bytes of unsealed blobs the
//     connection created (create_buffer(s)_request) follow the request; the
//     daemon copies them in and acknowledges. A remote client fills its
//     buffers this way before it seals them.
//   - get_data_request with with_buffers (ours), on a transport that passes
//     no fds: the reply is followed by the bytes of its payloads, in order.
//
// Compression (upstream's "compress") is not supported: a request asking for
// it is refused, and one announcing compressed bytes closes the connection,
// since their length cannot be known.

// CreateRemoteBufferRequest creates one sealed blob of Size bytes, which
// follow the frame.
type CreateRemoteBufferRequest struct {
	Size     uint64 `json:"size"`
	Compress bool   `json:"compress"`
	UseRDMA  bool   `json:"use_rdma"`
}

// CreateRemoteBuffersRequest creates sealed blobs of Sizes bytes, whose bytes
// follow the frame back to back.
type CreateRemoteBuffersRequest struct {
	Num      int      `json:"num"`
	Sizes    []uint64 `json:"sizes"`
	Compress bool     `json:"compress"`
	UseRDMA  bool     `json:"use_rdma"`
}

// GetRemoteBuffersRequest asks for blobs whose bytes follow the reply. The
// ids come as in GetBuffersRequest.
type GetRemoteBuffersRequest struct {
	GetBuffersRequest
	Compress bool `json:"compress"`
	UseRDMA  bool `json:"use_rdma"`
}

// UnmarshalJSON decodes the id list as GetBuffersRequest does, and the flags.
func (r *GetRemoteBuffersRequest) UnmarshalJSON(b []byte) error {
	if err := r.GetBuffersRequest.UnmarshalJSON(b); err != nil {
		return err
	}
	var flags struct {
		Compress bool `json:"compress"`
		UseRDMA  bool `json:"use_rdma"`
	}
	if err := json.Unmarshal(b, &flags); err != nil {
		return err
	}
	r.Compress, r.UseRDMA = flags.Compress, flags.UseRDMA
	return nil
}

// MarshalJSON writes the ids as "ids" with the flags.
func (r *GetRemoteBuffersRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		IDs      []ids.ObjectID `json:"ids"`
		Unsafe   bool           `json:"unsafe"`
		Compress bool           `json:"compress"`
		UseRDMA  bool           `json:"use_rdma"`
	}{r.IDs, r.Unsafe, r.Compress, r.UseRDMA})
}

// FillBuffersRequest (our extension) writes the bytes of unsealed blobs the
// connection created: Sizes[i] bytes from the start of IDs[i], back to back
// after the frame.
type FillBuffersRequest struct {
	IDs   []ids.ObjectID `json:"ids"`
	Sizes []uint64       `json:"sizes"`
}

// RequestType returns KindCreateRemoteBuffer's wire type.
func (*CreateRemoteBufferRequest) RequestType() string { return KindCreateRemoteBuffer.String() }

// RequestType returns KindCreateRemoteBuffers's wire type.
func (*CreateRemoteBuffersRequest) RequestType() string { return KindCreateRemoteBuffers.String() }

// RequestType returns KindGetRemoteBuffers's wire type.
func (*GetRemoteBuffersRequest) RequestType() string { return KindGetRemoteBuffers.String() }

// RequestType returns KindFillBuffers's wire type.
func (*FillBuffersRequest) RequestType() string { return KindFillBuffers.String() }

// sumSizes adds sizes, ok false past 63 bits.
func sumSizes(sizes []uint64) (uint64, bool) {
	var total uint64
	for _, n := range sizes {
		if n > math.MaxInt64-total {
			return 0, false
		}
		total += n
	}
	return total, true
}

// TrailingBytes returns Size; compressed bytes have no known count.
func (r *CreateRemoteBufferRequest) TrailingBytes() (uint64, bool) {
	if r.Compress {
		return 0, false
	}
	return sumSizes([]uint64{r.Size})
}

func (r *CreateRemoteBufferRequest) decodeTrailing(body []byte) error {
	var only struct {
		Size     uint64 `json:"size"`
		Compress bool   `json:"compress"`
	}
	err := json.Unmarshal(body, &only)
	r.Size, r.Compress = only.Size, only.Compress
	return err
}

// TrailingBytes returns the sum of Sizes; compressed bytes have no known
// count.
func (r *CreateRemoteBuffersRequest) TrailingBytes() (uint64, bool) {
	if r.Compress {
		return 0, false
	}
	return sumSizes(r.Sizes)
}

func (r *CreateRemoteBuffersRequest) decodeTrailing(body []byte) error {
	var only struct {
		Sizes    []uint64 `json:"sizes"`
		Compress bool     `json:"compress"`
	}
	err := json.Unmarshal(body, &only)
	r.Sizes, r.Compress = only.Sizes, only.Compress
	return err
}

// TrailingBytes returns the sum of Sizes.
func (r *FillBuffersRequest) TrailingBytes() (uint64, bool) { return sumSizes(r.Sizes) }

func (r *FillBuffersRequest) decodeTrailing(body []byte) error {
	var only struct {
		Sizes []uint64 `json:"sizes"`
	}
	err := json.Unmarshal(body, &only)
	r.Sizes = only.Sizes
	return err
}

func (r *CreateRemoteBufferRequest) validate() error {
	if r.UseRDMA {
		return status.Errorf(status.NotImplemented, "create_remote_buffer_request: RDMA is not supported")
	}
	return nil
}

func (r *CreateRemoteBuffersRequest) validate() error {
	if r.UseRDMA {
		return status.Errorf(status.NotImplemented, "create_remote_buffers_request: RDMA is not supported")
	}
	if r.Num != 0 && r.Num != len(r.Sizes) {
		return status.Errorf(status.Invalid, "create_remote_buffers_request: num %d does not match %d sizes", r.Num, len(r.Sizes))
	}
	return tooMany("sizes", len(r.Sizes))
}

func (r *GetRemoteBuffersRequest) validate() error {
	if r.Compress || r.UseRDMA {
		return status.Errorf(status.NotImplemented,
			"get_remote_buffers_request: compression and RDMA are not supported by this daemon; ask without them")
	}
	return tooMany("ids", len(r.IDs))
}

func (r *FillBuffersRequest) validate() error {
	if len(r.IDs) != len(r.Sizes) {
		return status.Errorf(status.Invalid, "fill_buffers_request: %d ids but %d sizes", len(r.IDs), len(r.Sizes))
	}
	return tooMany("ids", len(r.IDs))
}
