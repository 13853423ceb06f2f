package peer

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// rawPeer is a gRPC client of the peer service that sends any request, as
// a hostile or broken peer could: Client refuses to.
type rawPeer struct {
	t  *testing.T
	cc *grpc.ClientConn
}

func newRawPeer(t *testing.T, addr string) *rawPeer {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec{}), grpc.MaxCallRecvMsgSize(MaxChunkSize+64)),
		grpc.WithInitialWindowSize(minWindow), grpc.WithInitialConnWindowSize(minWindow))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &rawPeer{t, cc}
}

// open sends req and returns the stream after its header (or the error
// that ended it first).
func (p *rawPeer) open(ctx context.Context, req *fetchRequest) (grpc.ClientStream, error) {
	cs, err := p.cc.NewStream(ctx, &fetchDesc, fetchMethod)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	var hdr header
	if err := cs.RecvMsg(&hdr); err != nil {
		return nil, err
	}
	return cs, nil
}

// drain reads the stream to its end and returns the payload bytes received.
func drain(cs grpc.ClientStream) (int64, error) {
	buf := make([]byte, MaxChunkSize)
	var got int64
	in := &inChunk{dest: func(_ uint32, _ uint64, n int) ([]byte, error) { got += int64(n); return buf[:n], nil }}
	for {
		if err := cs.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, err
		}
	}
}

// TestRequestServesEachBlobOnce: a request naming one blob many times is
// refused before a byte is sent (before the bound, 60,000 ranges of one
// 64 MiB blob made a daemon send 8.5 GB); ranges that cut one blob into
// parts are served.
func TestRequestServesEachBlobOnce(t *testing.T) {
	const size = 1 << 20
	src := newFakeSource()
	src.put(blobID(0), pattern(3, size))
	s := startServer(t, ServerConfig{}, src, nil)
	p := newRawPeer(t, s.Addr())
	rs := make([]Range, 1000)
	for i := range rs {
		rs[i] = Range{Blob: blobID(0)}
	}
	_, err := p.open(fetchCtx(t), &fetchRequest{Ranges: rs})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("1000 x one blob: %v, want InvalidArgument", err)
	}
	// Overlapping halves: more than the blob's bytes, refused too.
	_, err = p.open(fetchCtx(t), &fetchRequest{Ranges: []Range{{Blob: blobID(0), Length: size/2 + 1}, {Blob: blobID(0), Offset: size / 2}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("overlapping ranges: %v, want InvalidArgument", err)
	}
	cs, err := p.open(fetchCtx(t), &fetchRequest{Ranges: []Range{{Blob: blobID(0), Length: size / 2}, {Blob: blobID(0), Offset: size / 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := drain(cs); err != nil || got != size {
		t.Fatalf("two halves: %d bytes, %v", got, err)
	}
	eventually(t, "pins released", func() bool { return src.pins.Load() == 0 })
}

// TestStalledStreamReleasesPins: a peer that reads a stream's header and
// then nothing has its connection closed after StallTimeout, and the
// blob's pin is released (before, it stayed pinned as long as the peer
// liked); a peer that reads is not disturbed.
func TestStalledStreamReleasesPins(t *testing.T) {
	const size = 8 << 20
	src := newFakeSource()
	src.put(blobID(0), pattern(4, size))
	s := startServer(t, ServerConfig{StallTimeout: 300 * time.Millisecond, StreamWindow: minWindow, ConnWindow: minWindow}, src, nil)
	stalled := newRawPeer(t, s.Addr())
	cs, err := stalled.open(fetchCtx(t), &fetchRequest{Ranges: []Range{{Blob: blobID(0)}}, MaxStreams: 1})
	if err != nil {
		t.Fatal(err)
	}
	if src.pins.Load() != 1 {
		t.Fatalf("%d pins during the stream", src.pins.Load())
	}
	eventually(t, "the stalled stream's pin to be released", func() bool { return src.pins.Load() == 0 })
	if _, err := drain(cs); err == nil {
		t.Fatal("the stalled stream completed")
	}
	// A reading peer gets the whole blob.
	sink := newFakeSink()
	mustFetch(t, newClient(t, ClientConfig{MaxStreams: 1}, sink), sink, s.Addr(), []ids.ObjectID{blobID(0)}, pattern(4, size))
}

// TestPeerStreamCap: one peer (one IP) has at most MaxPeerStreams streams
// served at once, over all its connections; the next is refused with
// ResourceExhausted, and a slot freed is usable again.
func TestPeerStreamCap(t *testing.T) {
	src := newFakeSource()
	src.put(blobID(0), pattern(5, 8<<20))
	s := startServer(t, ServerConfig{MaxPeerStreams: 2, StreamWindow: minWindow, ConnWindow: minWindow}, src, nil)
	ctx, cancel := context.WithCancel(fetchCtx(t))
	defer cancel()
	req := &fetchRequest{Ranges: []Range{{Blob: blobID(0)}}, MaxStreams: 1}
	for range 2 {
		if _, err := newRawPeer(t, s.Addr()).open(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newRawPeer(t, s.Addr()).open(fetchCtx(t), req); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third stream: %v, want ResourceExhausted", err)
	}
	cancel()
	eventually(t, "the streams to end", func() bool { return src.pins.Load() == 0 })
	eventually(t, "a slot to free", func() bool {
		cs, err := newRawPeer(t, s.Addr()).open(fetchCtx(t), req)
		if err != nil {
			return false
		}
		_, err = drain(cs)
		return err == nil
	})
}

// FuzzFetchRequest: whatever ranges a peer asks for (any blobs, offsets,
// lengths, repeats, stream counts), the server sends at most the bytes of
// the distinct blobs named per stream it serves, answers or refuses in
// bounded time, and every pin is released afterwards.
func FuzzFetchRequest(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0}, uint8(1))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(4))
	f.Add([]byte{1, 0, 8, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 4}, uint8(2))
	f.Add([]byte{2, 255, 255, 255, 255, 255, 255}, uint8(0))
	f.Add([]byte{0, 0, 1, 0, 0, 0, 255, 0, 0, 1, 0, 0, 0, 255}, uint8(3))
	sizes := []int{1 << 20, 3000, 0}
	src := newFakeSource()
	for i, n := range sizes {
		src.put(blobID(i), pattern(byte(i+1), n))
	}
	s, err := NewServer(ServerConfig{SplitAbove: 64 << 10, ChunkSize: 16 << 10}, src)
	if err != nil {
		f.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	defer s.Close()
	f.Fuzz(func(t *testing.T, spec []byte, streams uint8) {
		// Each 7 bytes name a range: blob (one of 4, the 4th unknown),
		// offset and length (3 bytes each, scaled to reach past the ends).
		var rs []Range
		for ; len(spec) >= 7 && len(rs) < 64; spec = spec[7:] {
			off := uint64(spec[1])<<16 | uint64(spec[2])<<8 | uint64(spec[3])
			length := uint64(spec[4])<<16 | uint64(spec[5])<<8 | uint64(spec[6])
			rs = append(rs, Range{Blob: blobID(int(spec[0] % 4)), Offset: off, Length: length})
		}
		if len(rs) == 0 {
			return
		}
		var distinct uint64
		seen := map[ids.ObjectID]bool{}
		for _, r := range rs {
			if i := int(r.Blob&^ids.BlobBit) - 0x1000; i < len(sizes) && !seen[r.Blob] {
				seen[r.Blob] = true
				distinct += uint64(sizes[i])
			}
		}
		p := newRawPeer(t, lis.Addr().String())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := p.open(ctx, &fetchRequest{Ranges: rs, MaxStreams: uint32(streams)})
		if err == nil {
			got, err := drain(cs)
			if err != nil && status.Code(err) == codes.DeadlineExceeded {
				t.Fatalf("stream did not end: %v", err)
			}
			if uint64(got) > distinct {
				t.Fatalf("%d bytes sent for %d bytes of distinct blobs (%v)", got, distinct, rs)
			}
		} else if status.Code(err) == codes.DeadlineExceeded {
			t.Fatalf("no answer: %v", err)
		}
		eventually(t, "pins released", func() bool { return src.pins.Load() == 0 })
	})
}
