package peer

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"regexp"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// TestProtoFieldNumbers checks the constants of wire.go against
// peerpb/peer.proto, the documented contract.
func TestProtoFieldNumbers(t *testing.T) {
	src, err := os.ReadFile("peerpb/peer.proto")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]protowire.Number{}
	msg := regexp.MustCompile(`(?s)message (\w+) \{(.*?)\n\}`)
	field := regexp.MustCompile(`(?m)^\s+(?:repeated )?\w+ (\w+) = (\d+);`)
	for _, m := range msg.FindAllStringSubmatch(string(src), -1) {
		for _, f := range field.FindAllStringSubmatch(m[2], -1) {
			var n int
			for _, c := range f[2] {
				n = n*10 + int(c-'0')
			}
			got[m[1]+"."+f[1]] = protowire.Number(n)
		}
	}
	want := map[string]protowire.Number{
		"Range.blob_id": fRangeBlob, "Range.offset": fRangeOffset, "Range.length": fRangeLength,
		"FetchRequest.ranges": fReqRanges, "FetchRequest.max_streams": fReqMaxStreams, "FetchRequest.raw": fReqRaw,
		"Stream.ranges": fStreamRanges,
		"Reply.sizes":   fReplySizes, "Reply.plan": fReplyPlan, "Reply.index": fReplyIndex,
		"Reply.offset": fReplyOffset, "Reply.data": fReplyData, "Reply.ticket": fReplyTicket,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("peer.proto fields %v, wire.go %v", got, want)
	}
}

func marshal(t *testing.T, v any) mem.BufferSlice {
	t.Helper()
	bs, err := codec{}.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func TestWireRoundTrip(t *testing.T) {
	req := fetchRequest{Ranges: []Range{{Blob: blobID(1)}, {Blob: blobID(2), Offset: 5, Length: 1 << 40}}, MaxStreams: 4, Raw: true}
	var req2 fetchRequest
	if err := (codec{}).Unmarshal(marshal(t, &req), &req2); err != nil || !reflect.DeepEqual(req, req2) {
		t.Fatalf("request: %+v, %v", req2, err)
	}
	hdr := header{Sizes: []uint64{0, 1, 1 << 50}, Plan: [][]Range{{{Blob: blobID(1), Length: 3}}, {{Blob: blobID(1), Offset: 3, Length: 9}}}, Ticket: bytes.Repeat([]byte{9}, ticketLen)}
	var hdr2 header
	if err := (codec{}).Unmarshal(marshal(t, &hdr), &hdr2); err != nil || !reflect.DeepEqual(hdr, hdr2) {
		t.Fatalf("header: %+v, %v", hdr2, err)
	}
	for _, n := range []int{0, 1, 1024, 1025, 1 << 20} {
		data := pattern(3, n)
		pin := newPinRef(func() {})
		bs := marshal(t, &outChunk{Index: 7, Offset: 1 << 33, Data: data, pin: pin})
		dst := make([]byte, n)
		in := inChunk{dest: func(index uint32, offset uint64, m int) ([]byte, error) {
			if index != 7 || offset != 1<<33 || m != n {
				t.Fatalf("chunk %d %d %d", index, offset, m)
			}
			return dst, nil
		}}
		if err := (codec{}).Unmarshal(bs, &in); err != nil || !bytes.Equal(dst, data) {
			t.Fatalf("chunk of %d: %v", n, err)
		}
		// The payload aliases data exactly when it is above the pooling
		// threshold; the pin is released when gRPC frees it.
		bs.Free()
		pin.release()
		if !pin.fired.Load() {
			t.Fatalf("chunk of %d: pin still held after Free", n)
		}
	}
	// A chunk where a header is expected, and the reverse, are errors.
	var h header
	if err := (codec{}).Unmarshal(marshal(t, &outChunk{Data: []byte("x")}), &h); !errors.Is(err, ErrProtocol) {
		t.Fatalf("chunk as header: %v", err)
	}
	in := inChunk{dest: func(uint32, uint64, int) ([]byte, error) { return make([]byte, 1<<10), nil }}
	if err := (codec{}).Unmarshal(marshal(t, &hdr), &in); !errors.Is(err, ErrProtocol) {
		t.Fatalf("header as chunk: %v", err)
	}
	// A ticket of the wrong length is malformed.
	bad := (&header{Sizes: []uint64{1}, Ticket: []byte("short")}).append(nil)
	if err := h.unmarshal(bad); !errors.Is(err, ErrProtocol) {
		t.Fatalf("short ticket: %v", err)
	}
	if _, err := (codec{}).Marshal(42); err == nil {
		t.Fatal("marshal of an int")
	}
}

// FuzzDecode feeds arbitrary bytes to every decoder: errors, never panics,
// and never a payload written past what dest returned.
func FuzzDecode(f *testing.F) {
	f.Add(chunkPrefix(nil, 1, 2, 3))
	f.Add((&fetchRequest{Ranges: []Range{{Blob: ids.ObjectID(1) | ids.BlobBit, Offset: 1, Length: 2}}, MaxStreams: 3}).append(nil))
	f.Add((&header{Sizes: []uint64{1, 2}, Plan: [][]Range{{{Blob: 1, Length: 1}}}}).append(nil))
	f.Add((&header{Sizes: []uint64{1}, Ticket: make([]byte, ticketLen)}).append(nil))
	f.Add((&fetchRequest{Ranges: []Range{{Blob: ids.ObjectID(1) | ids.BlobBit}}, Raw: true}).append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req fetchRequest
		_ = req.unmarshal(b)
		var h header
		_ = h.unmarshal(b)
		in := inChunk{dest: func(_ uint32, _ uint64, n int) ([]byte, error) {
			if n > 1<<16 {
				return nil, ErrProtocol
			}
			return make([]byte, n), nil
		}}
		// Split b in two buffers, as gRPC may.
		half := len(b) / 2
		_ = in.unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:half]), mem.SliceBuffer(b[half:])})
	})
}
