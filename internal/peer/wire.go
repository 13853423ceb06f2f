package peer

import (
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// Field numbers of peerpb/peer.proto.
const (
	fRangeBlob   protowire.Number = 1
	fRangeOffset protowire.Number = 2
	fRangeLength protowire.Number = 3

	fReqRanges     protowire.Number = 1
	fReqMaxStreams protowire.Number = 2
	fReqRaw        protowire.Number = 3

	fStreamRanges protowire.Number = 1

	fReplySizes  protowire.Number = 1
	fReplyPlan   protowire.Number = 2
	fReplyIndex  protowire.Number = 3
	fReplyOffset protowire.Number = 4
	fReplyData   protowire.Number = 5
	fReplyTicket protowire.Number = 6
)

// maxRanges bounds the ranges of one request and of one plan entry, and the
// plan entries of one header, so a malformed message cannot make a decoder
// allocate without limit (requests are also capped at maxRequestBytes).
const maxRanges = 1 << 16

// codecName is the gRPC content-subtype of the peer service.
const codecName = "v6dpeer"

// Range is a byte range of one blob: Length 0 with Offset 0 is the whole blob.
type Range struct {
	Blob   ids.ObjectID
	Offset uint64
	Length uint64
}

// fetchRequest is FetchRequest.
type fetchRequest struct {
	Ranges     []Range
	MaxStreams uint32
	// Raw says the client can take the bytes over a raw data connection.
	Raw bool
}

// header is the first Reply of a stream.
type header struct {
	Sizes []uint64
	Plan  [][]Range
	// Ticket, when set, says this stream's bytes come over a raw data
	// connection that presents it (raw.go); no chunk follows the header.
	Ticket []byte
}

// outChunk is a chunk Reply being sent. Data aliases the pinned source arena
// when pin is set: the codec hands it to gRPC without a copy and pin counts
// it until the transport releases it.
type outChunk struct {
	Index  uint32
	Offset uint64
	Data   []byte
	pin    *pinRef
}

// inChunk is a chunk Reply being received: the codec asks dest for the
// destination of the payload and copies it there from gRPC's buffers.
type inChunk struct {
	dest func(index uint32, offset uint64, n int) ([]byte, error)
	// n is the payload length of the last chunk decoded; err the error of
	// the last failed decode.
	n   int
	err error
}

// codec is the encoding.CodecV2 of the peer service. It knows only the four
// message types above; anything else is a programming error.
type codec struct{}

// Name is the content-subtype of the service.
func (codec) Name() string { return codecName }

// Marshal encodes a fetchRequest, header or outChunk.
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *outChunk:
		return m.marshal(), nil
	case *fetchRequest:
		return mem.BufferSlice{mem.SliceBuffer(m.append(nil))}, nil
	case *header:
		return mem.BufferSlice{mem.SliceBuffer(m.append(nil))}, nil
	}
	return nil, fmt.Errorf("peer codec: cannot marshal %T", v)
}

// Unmarshal decodes into a fetchRequest, header or inChunk.
func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *inChunk:
		return m.unmarshal(data)
	case *fetchRequest:
		return m.unmarshal(data.Materialize())
	case *header:
		return m.unmarshal(data.Materialize())
	}
	return fmt.Errorf("peer codec: cannot unmarshal into %T", v)
}

func appendRange(b []byte, r Range) []byte {
	b = protowire.AppendTag(b, fRangeBlob, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, uint64(r.Blob))
	if r.Offset != 0 {
		b = protowire.AppendTag(b, fRangeOffset, protowire.VarintType)
		b = protowire.AppendVarint(b, r.Offset)
	}
	if r.Length != 0 {
		b = protowire.AppendTag(b, fRangeLength, protowire.VarintType)
		b = protowire.AppendVarint(b, r.Length)
	}
	return b
}

func appendRanges(b []byte, num protowire.Number, rs []Range) []byte {
	var tmp []byte
	for _, r := range rs {
		tmp = appendRange(tmp[:0], r)
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, tmp)
	}
	return b
}

func (m *fetchRequest) append(b []byte) []byte {
	b = appendRanges(b, fReqRanges, m.Ranges)
	if m.MaxStreams != 0 {
		b = protowire.AppendTag(b, fReqMaxStreams, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(m.MaxStreams))
	}
	if m.Raw {
		b = protowire.AppendTag(b, fReqRaw, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return b
}

func (m *header) append(b []byte) []byte {
	if len(m.Sizes) > 0 {
		var packed []byte
		for _, s := range m.Sizes {
			packed = protowire.AppendVarint(packed, s)
		}
		b = protowire.AppendTag(b, fReplySizes, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	var tmp []byte
	for _, st := range m.Plan {
		tmp = appendRanges(tmp[:0], fStreamRanges, st)
		b = protowire.AppendTag(b, fReplyPlan, protowire.BytesType)
		b = protowire.AppendBytes(b, tmp)
	}
	if len(m.Ticket) > 0 {
		b = protowire.AppendTag(b, fReplyTicket, protowire.BytesType)
		b = protowire.AppendBytes(b, m.Ticket)
	}
	return b
}

// chunkPrefix appends the fields of a chunk Reply up to and including the
// length of its data field.
func chunkPrefix(b []byte, index uint32, offset uint64, n int) []byte {
	b = protowire.AppendTag(b, fReplyIndex, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(index))
	b = protowire.AppendTag(b, fReplyOffset, protowire.VarintType)
	b = protowire.AppendVarint(b, offset)
	b = protowire.AppendTag(b, fReplyData, protowire.BytesType)
	return protowire.AppendVarint(b, uint64(n))
}

func (m *outChunk) marshal() mem.BufferSlice {
	prefix := chunkPrefix(make([]byte, 0, 32), m.Index, m.Offset, len(m.Data))
	if len(m.Data) == 0 {
		return mem.BufferSlice{mem.SliceBuffer(prefix)}
	}
	if m.pin == nil || mem.IsBelowBufferPoolingThreshold(len(m.Data)) {
		// Small payloads are copied: a SliceBuffer is not reference counted,
		// so it must never alias memory whose pin may be released.
		return mem.BufferSlice{mem.SliceBuffer(append(prefix, m.Data...))}
	}
	data := m.Data[:len(m.Data):len(m.Data)]
	m.pin.acquire()
	return mem.BufferSlice{mem.SliceBuffer(prefix), mem.NewBuffer(&data, m.pin)}
}

// pinRef counts the chunks of one stream that gRPC still holds. It is the
// mem.BufferPool of the chunk buffers: gRPC calls Put when it has written (or
// dropped) a chunk, and the last Put after done releases the pin.
type pinRef struct {
	n     atomic.Int64 // chunks held by gRPC, +1 while the handler runs
	unpin func()
	fired atomic.Bool
	done  chan struct{} // closed when unpinned
	// drained gets a token whenever gRPC released a chunk and only the
	// handler's reference is left.
	drained chan struct{}
}

func newPinRef(unpin func()) *pinRef {
	p := &pinRef{unpin: unpin, done: make(chan struct{}), drained: make(chan struct{}, 1)}
	p.n.Store(1)
	return p
}

func (p *pinRef) acquire() { p.n.Add(1) }

// Get is never called: chunk buffers are made with mem.NewBuffer.
func (p *pinRef) Get(int) *[]byte { panic("peer: pinRef.Get") }

// Put is called by gRPC when it lets go of one chunk.
func (p *pinRef) Put(*[]byte) { p.release() }

// release drops one reference and unpins on the last.
func (p *pinRef) release() {
	switch p.n.Add(-1) {
	case 0:
		p.force()
	case 1:
		select {
		case p.drained <- struct{}{}:
		default:
		}
	}
}

// wait returns when gRPC holds no chunk any more, or when done is closed.
func (p *pinRef) wait(done <-chan struct{}) error {
	for p.n.Load() > 1 {
		select {
		case <-p.drained:
		case <-done:
			return errors.New("peer: stream ended before its chunks were sent")
		}
	}
	return nil
}

// force unpins now, once.
func (p *pinRef) force() {
	if p.fired.CompareAndSwap(false, true) {
		p.unpin()
		close(p.done)
	}
}

func malformed(what string) error { return fmt.Errorf("%w: malformed %s", ErrProtocol, what) }

// eachField calls fn for every field of b; fn gets the field's number, type
// and its value bytes (varint/fixed values re-encoded are not needed: v is
// the decoded scalar for varint and fixed64 fields, raw the bytes of a
// length-delimited field).
func eachField(b []byte, what string, fn func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return malformed(what)
		}
		b = b[n:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return malformed(what)
		}
		b = b[n:]
		if err := fn(num, typ, v, raw); err != nil {
			return err
		}
	}
	return nil
}

func parseRange(b []byte) (Range, error) {
	var r Range
	err := eachField(b, "range", func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
		switch {
		case num == fRangeBlob && typ == protowire.Fixed64Type:
			r.Blob = ids.ObjectID(v)
		case num == fRangeOffset && typ == protowire.VarintType:
			r.Offset = v
		case num == fRangeLength && typ == protowire.VarintType:
			r.Length = v
		}
		return nil
	})
	return r, err
}

func parseRanges(b []byte, num protowire.Number, what string) ([]Range, error) {
	var rs []Range
	err := eachField(b, what, func(n protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		if n != num || typ != protowire.BytesType {
			return nil
		}
		if len(rs) >= maxRanges {
			return fmt.Errorf("%w: more than %d ranges", ErrProtocol, maxRanges)
		}
		r, err := parseRange(raw)
		if err != nil {
			return err
		}
		rs = append(rs, r)
		return nil
	})
	return rs, err
}

func (m *fetchRequest) unmarshal(b []byte) error {
	*m = fetchRequest{}
	rs, err := parseRanges(b, fReqRanges, "request")
	if err != nil {
		return err
	}
	m.Ranges = rs
	return eachField(b, "request", func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
		switch {
		case num == fReqMaxStreams && typ == protowire.VarintType:
			m.MaxStreams = uint32(min(v, 1<<16))
		case num == fReqRaw && typ == protowire.VarintType:
			m.Raw = v != 0
		}
		return nil
	})
}

func (m *header) unmarshal(b []byte) error {
	*m = header{}
	return eachField(b, "header", func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == fReplySizes && typ == protowire.BytesType:
			for len(raw) > 0 {
				s, n := protowire.ConsumeVarint(raw)
				if n < 0 {
					return malformed("header sizes")
				}
				if len(m.Sizes) >= maxRanges {
					return fmt.Errorf("%w: more than %d sizes", ErrProtocol, maxRanges)
				}
				m.Sizes = append(m.Sizes, s)
				raw = raw[n:]
			}
		case num == fReplySizes && typ == protowire.VarintType:
			if len(m.Sizes) >= maxRanges {
				return fmt.Errorf("%w: more than %d sizes", ErrProtocol, maxRanges)
			}
			m.Sizes = append(m.Sizes, v)
		case num == fReplyPlan && typ == protowire.BytesType:
			if len(m.Plan) >= maxRanges {
				return fmt.Errorf("%w: more than %d plan entries", ErrProtocol, maxRanges)
			}
			rs, err := parseRanges(raw, fStreamRanges, "plan")
			if err != nil {
				return err
			}
			m.Plan = append(m.Plan, rs)
		case num == fReplyTicket && typ == protowire.BytesType:
			if len(raw) != ticketLen {
				return malformed("header ticket")
			}
			m.Ticket = append([]byte(nil), raw...)
		case num == fReplyIndex, num == fReplyOffset, num == fReplyData:
			return fmt.Errorf("%w: chunk where a header was expected", ErrProtocol)
		}
		return nil
	})
}

// unmarshal decodes a chunk Reply whose fields are in the order chunkPrefix
// writes them and copies its payload straight from gRPC's buffers into the
// slice m.dest returns.
func (m *inChunk) unmarshal(data mem.BufferSlice) error {
	m.err = m.decode(data)
	return m.err
}

func (m *inChunk) decode(data mem.BufferSlice) error {
	var pre [40]byte
	total := data.Len()
	np := copyPrefix(pre[:min(total, len(pre))], data)
	b := pre[:np]
	var vals [2]uint64
	for i, want := range [...]protowire.Number{fReplyIndex, fReplyOffset} {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != want || typ != protowire.VarintType {
			return malformed("chunk")
		}
		b = b[n:]
		vals[i], n = protowire.ConsumeVarint(b)
		if n < 0 {
			return malformed("chunk")
		}
		b = b[n:]
	}
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != fReplyData || typ != protowire.BytesType {
		return malformed("chunk")
	}
	b = b[n:]
	size, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return malformed("chunk")
	}
	b = b[n:]
	start := np - len(b)
	if size != uint64(total-start) || vals[0] > 1<<32-1 {
		return malformed("chunk")
	}
	dst, err := m.dest(uint32(vals[0]), vals[1], int(size))
	if err != nil {
		return err
	}
	m.n = int(size)
	copySkip(dst, data, start)
	return nil
}

// copyPrefix copies the first len(dst) bytes of data into dst.
func copyPrefix(dst []byte, data mem.BufferSlice) int {
	n := 0
	for _, buf := range data {
		if n == len(dst) {
			break
		}
		n += copy(dst[n:], buf.ReadOnlyData())
	}
	return n
}

// copySkip copies data, less its first skip bytes, into dst.
func copySkip(dst []byte, data mem.BufferSlice, skip int) {
	for _, buf := range data {
		b := buf.ReadOnlyData()
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		b = b[skip:]
		skip = 0
		dst = dst[copy(dst, b):]
	}
}
